"""Smoke test of the storage benchmark (``python -m bench.storage --quick --json``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.bench  # make test-bench (-m bench): not in the default suite

pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]


def test_quick_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.storage", "--quick", "--json", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "encode", "append", "read", "decode", "reopen", "targets"):
        assert key in out, key
    assert out["quick"] is True
    shapes = {(r["record_bytes"], r["records_per_batch"]) for r in out["append"]}
    assert {(1024, 1), (1024, 1000), (100, 1), (100, 1000)} <= shapes
    for row in out["append"]:
        for kind in ("raw", "fsync", "lazy"):
            assert row[kind]["mb_per_s"]["median"] > 0
        assert row["fsync"]["fsyncs_per_append"]["min"] >= 1  # every durable append waited for an fsync
        assert row["ratio_fsync_vs_raw"]["median"] > 0
    assert {r["mode"] for r in out["decode"]} >= {"arrow", "records"}
    assert all(r["mb_per_s"]["median"] > 0 for r in out["read"])
    sizes = out["reopen"]["sizes"]
    assert len(sizes) == 2
    for size in sizes:
        assert size["clean"]["segment_bytes_read"]["max"] == 0  # a clean open reads no segment data
        for crash in size["crash"]:
            assert crash["segment_bytes_read"]["median"] > 0
    assert {t["target"] for t in out["targets"]}
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
