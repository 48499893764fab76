"""Smoke test of the attacks bench (``python -m bench.attacks --quick
--json``): a broker of 1,000 partitions per scenario, each attack for 3 s,
another client's round trips measured (~1 minute)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

ROOT = Path(__file__).resolve().parents[2]


def test_quick_attacks_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.attacks", "--quick", "--json", "--dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=400, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    assert set(out["summary"]) == {"idle", "bombs", "create", "scrapers", "all"}
    s = out["summary"]
    assert s["idle"]["bombs"] == 0 and s["bombs"]["bombs"] > 0 and s["all"]["scrapes"] > 0
    assert s["create"]["create_s"] > 0 and s["idle"]["create_s"] == 0
    for name, row in s.items():
        assert row["round_trips"] > 0 and 0 < row["p50_ms"] <= row["p99_ms"] <= row["max_ms"], name
