"""Smoke test of the consumer groups bench (``python -m bench.groups --quick
--json``): a real single-node broker, member processes, one crash (kill -9)
and one clean-leave trial, one throughput round of 1 and 3 members; tiny
counts (~15 s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.fixtures import gone

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]


def test_quick_groups_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.groups", "--quick", "--json", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=180, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "throughput", "crash", "leave", "summary", "targets"):
        assert key in out, key
    p = out["params"]
    assert out["quick"] is True and "cluster" not in out
    runs = out["throughput"]
    assert sorted(r["members"] for r in runs) == [1, 3]
    for run in runs:  # every record read exactly once, by the members together
        assert run["records"] == p["records"] and sum(run["per_member"]) == p["records"]
        assert len(run["per_member"]) == run["members"] and min(run["per_member"]) > 0
        assert run["records_per_s"] > 0 and run["mb_per_s"] > 0
        assert run["bytes"] == p["records"] * (p["value_bytes"] + 8)
    for kind in ("crash", "leave"):
        (trial,) = out[kind]
        assert len(trial["partitions"]) == 2 and gone(trial["pid"])
        assert 0 < trial["assigned_s"] <= trial["first_s"] < p["session_ms"] / 1000 + 30
    assert out["crash"][0]["first_s"] >= p["session_ms"] / 1000 * 0.5  # waited for the session
    assert out["summary"]["throughput_ratio"]["median"] > 0
    assert [t["met"] in (True, False) for t in out["targets"]] == [True, True]
    assert "Rebalance" in proc.stderr and "Consume throughput" in proc.stderr
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
