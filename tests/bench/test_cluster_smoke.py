"""Smoke test of the cluster benchmark (``python -m bench.cluster --quick --json``):
real etcd + brokers (a single node, etcd + 1, etcd + 3), the broker bench's
client processes, one failover trial (kill -9 of a leader); tiny counts.
Skips without etcd (fails with LOGBROKER_ETCD_REQUIRED=1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import gone, require_etcd

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {"single", "c1-rf1", "c3-rf1", "c3-rf3"}
PHASES = {"W1.produce", "W1.consume", "W2.produce", "W2.consume", "roundtrip"}


def test_quick_cluster_bench_emits_json(tmp_path: Path) -> None:
    require_etcd()
    proc = subprocess.run([sys.executable, "-m", "bench.cluster", "--quick", "--json", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "quick", "rounds", "failover", "summary", "targets", "elapsed_s"):
        assert key in out, key
    assert out["quick"] is True and len(out["rounds"]) == 1
    rnd = out["rounds"][0]
    assert set(rnd["setups"]) == {"single", "cluster1", "cluster3"}
    for kind, setup in rnd["setups"].items():
        assert set(setup["exit_codes"].values()) == {0}, (kind, setup["exit_codes"])  # clean SIGTERM exits
        assert setup["pids"] and all(gone(pid) for pid in setup["pids"].values()), kind
    assert {(ph["config"], ph["phase"]) for ph in rnd["phases"]} == {(c, p) for c in CONFIGS for p in PHASES}
    for ph in rnd["phases"]:
        assert ph["records"] > 0 and ph["seconds"] > 0 and gone(ph["pid"]), ph["phase"]
        assert ph["machine"]["busy_cores"] >= 0
        brokers = [name for name in ph["cpu"] if name.startswith("broker-")]
        assert len(brokers) == (3 if ph["config"].startswith("c3") else 1)
        assert ("etcd" in ph["cpu"]) == (ph["config"] != "single")
        if ph["config"] == "c3-rf3" and ph["phase"] == "W1.produce":
            kinds = sorted(("L" if r["leads"] else "") + ("F" if r["follows"] else "") for r in ph["roles"].values())
            assert kinds == ["F", "F", "L"], ph["roles"]  # one leader, two followers
    configs = out["summary"]["configs"]
    assert set(configs) == CONFIGS
    for config in CONFIGS:
        assert configs[config]["W1.produce"]["records_per_s"]["median"] > 0
        assert configs[config]["W2.consume"]["records_per_s"]["median"] > 0
        rtt = configs[config]["roundtrip"]
        assert 0 < rtt["p50_ms"]["median"] <= rtt["p99_ms"]["median"]
    assert out["summary"]["ratios"]["c3-rf3/c3-rf1 W1.produce records_per_s"]["median"] > 0
    (trial,) = out["failover"]["trials"]
    assert trial["first_ack_s"] > 0 and trial["failed"] == 0 and not trial["errors"]
    assert trial["new_leader"] not in (-1, trial["victim"])
    assert gone(trial["pid"])
    assert all(gone(pid) for pid in out["failover"]["pids"].values())
    assert set(out["failover"]["exit_codes"].values()) == {0}  # the two survivors
    assert len(out["targets"]) == 3
    assert all(isinstance(t["met"], bool) and t["ratio"] > 0 for t in out["targets"])
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
