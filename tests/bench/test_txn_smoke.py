"""Smoke test of the transactions bench (``python -m bench.txn --quick
--json``): a fresh broker, every case of 300 records, the floors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]


def test_quick_txn_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.txn", "--quick", "--json", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    assert {"environment", "params", "floors", "single", "elapsed_s"} <= set(out)
    assert "cluster" not in out
    summary = out["single"]["summary"]
    for k in (1, 10, 100):
        row = summary[f"txn {k}"]
        assert row["records_per_s"]["median"] > 0 and row["vs_plain"] > 0
        assert 0 < row["commit_p50_ms"]["median"] <= row["commit_p99_ms"]["median"]
    assert out["floors"]["three_fsyncs_two_rtts_ms"] > 0
