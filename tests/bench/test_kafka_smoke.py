"""Smoke test of the Kafka listener bench (``python -m bench.kafka --quick --json``):
a real broker with ``--kafka-port 0``, our Python clients and confluent-kafka
(librdkafka) producing and consuming W1 and W2, tiny counts, one round each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tests.support.fixtures import gone  # the same check: kill(pid, 0) fails

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

pytest.importorskip("confluent_kafka")

ROOT = Path(__file__).resolve().parents[2]
PHASES = ("W1.produce", "W1.consume", "W2.produce", "W2.consume")
CLIENTS = ("python", "kafka", "kafka-lean")


def test_quick_kafka_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.kafka", "--quick", "--json", "--dir", str(tmp_path)],
                          check=False, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "quick", "rounds", "limits", "runs", "summary", "ratios", "targets",
                "elapsed_s"):
        assert key in out, key
    assert out["quick"] is True and out["rounds"] == 1
    p = out["params"]
    expected = {"W1": p["w1_records"], "W2": p["w2_records"]}
    assert [r["client"] for r in out["runs"]] == list(CLIENTS)
    for run in out["runs"]:
        assert run["broker_exit_code"] == 0  # stopped cleanly by SIGTERM
        assert gone(run["broker_pid"])
        assert set(run["phases"]) == set(PHASES)
        for phase, res in run["phases"].items():
            records = expected[phase[:2]]
            assert res["records"] == records, (run["client"], phase)  # every record acked / read
            assert res["last_offset"] == records - 1, (run["client"], phase)
            assert res["seconds"] > 0 and res["cpu_s"] >= 0 and res["broker"]["cpu_s"] >= 0
            assert gone(res["pid"]), phase  # every worker process ended
    for client in CLIENTS:
        for phase in PHASES:
            assert out["summary"][client][phase]["records_per_s"]["median"] > 0
    for client in CLIENTS[1:]:
        assert set(out["ratios"][client]) == set(PHASES) and all(r > 0 for r in out["ratios"][client].values())
    assert [t["client"] for t in out["targets"]] == list(CLIENTS[1:])
    assert all(isinstance(t["met"], bool) and t["ratio"] == out["ratios"][t["client"]]["W2.produce"]
               for t in out["targets"])
    for wl in ("W1", "W2"):
        assert out["limits"]["records_per_s"][wl]["disk_fdatasync_1m"] > 0
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
