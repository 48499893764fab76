"""Smoke test of the broker benchmark (``python -m bench.broker --quick --json``):
a real broker, producer, consumer, round-trip and fetch processes, 1% of the
work, one durable and one lazy run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import gone

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]
PHASES = {"W1.produce", "W1.consume", "W2.produce", "W2.consume", "roundtrip.raw", "roundtrip",
          "fetch.fill", "fetch.raw", "fetch.consumer"}


def test_quick_broker_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.broker", "--quick", "--json", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "quick", "runs", "summary", "targets", "elapsed_s"):
        assert key in out, key
    assert out["quick"] is True
    assert {r["flush"] for r in out["runs"]} == {"fsync", "lazy"}
    for run in out["runs"]:
        assert run["broker_exit_code"] == 0  # stopped cleanly by SIGTERM
        assert gone(run["broker_pid"])
        for phase, res in run["phases"].items():
            assert res["records"] > 0 and res["seconds"] > 0, phase
            assert res["broker"]["peak_rss_mib"] > 0, phase
            assert gone(res["pid"]), phase  # every worker process ended
    fsync = out["summary"]["fsync"]
    assert PHASES <= set(fsync)
    assert set(out["summary"]["lazy"]) >= PHASES - {"fetch.fill", "fetch.raw", "fetch.consumer"}
    for phase in ("W1.produce", "W1.consume", "W2.produce", "W2.consume"):
        assert fsync[phase]["records_per_s"]["median"] > 0
        assert fsync[phase]["mb_per_s"]["median"] > 0
        assert "broker_cpu_s" in fsync[phase] and "broker_peak_rss_mib" in fsync[phase]
    rtt = fsync["roundtrip"]
    assert 0 < rtt["p50_ms"]["median"] <= rtt["p99_ms"]["median"]
    assert fsync["fetch.raw"]["gb_per_s"]["median"] > 0
    assert len(out["targets"]) == 7
    assert all(isinstance(t["met"], bool) and t["ratio"] > 0 for t in out["targets"])
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
