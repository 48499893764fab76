"""Smoke test of the partitions-at-scale bench (``python -m bench.scale
--quick --json``): 1 and 100 partitions, fsync and lazy, every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]


def test_quick_scale_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.scale", "--quick", "--json", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    rows = {(r["partitions"], r["flush"]): r for r in out["summary"]}
    assert set(rows) == {(1, "fsync"), (1, "lazy"), (100, "fsync"), (100, "lazy")}
    for row in rows.values():
        med = {k: v["median"] for k, v in row.items() if isinstance(v, dict)}
        assert med["produce_rec_s"] > 0 and med["consume_rec_s"] > 0
        assert med["produce_broker_us"] > 0 and med["rss_mb"] > 0 and med["open_files"] > 0
        assert 0 < med["stop_s"] < 120 and 0 < med["restart_s"] < 300
        assert med["create_worst_rtt_ms"] > 0
    assert "partitions" in proc.stderr  # progress lines
