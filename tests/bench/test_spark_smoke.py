"""Smoke test of the Spark benchmark (``python -m bench.spark --quick --json``):
every format, the no-work source included, answers every query it runs, checked."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.spark, pytest.mark.bench,
              pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                 reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")]


def test_quick_spark_bench_emits_json(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.spark", "--quick", "--json", "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=180, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    for key in ("environment", "params", "data", "queries", "ratios", "targets", "quick", "elapsed_s"):
        assert key in out, key
    assert out["quick"] is True
    assert out["environment"]["spark"]["pyspark"]
    data = out["data"]
    assert data["records"] == out["params"]["records"] > 0
    assert data["segment_bytes_on_disk"] > 0 and data["parquet_bytes"] > 0 and data["json_bytes"] > 0
    cases = {(r["query"], r["format"]) for r in out["queries"]}
    floors = ("floor", "floor_kv")  # the no-work source: no offset range
    queries = ("count", "scan", "groupby", "range")
    assert cases == {(q, f) for q in queries
                     for f in ("jvm", "jvm_kv", "logbroker", "logbroker_kv", "parquet", "json") + floors
                     if not (q == "range" and f in floors)} | {("range_where", "jvm"),
                                                                ("range_where", "parquet")}
    for row in out["queries"]:
        assert row["seconds"]["median"] > 0 and row["mb_per_s"]["median"] > 0
        assert row["cpu_seconds"]["median"] >= 0  # driver + JVM + Python workers
    ratios = {(r["query"], r["format"]): r for r in out["ratios"]}
    assert set(ratios) == {(q, f) for q in queries
                           for f in ("jvm", "jvm_kv", "logbroker", "logbroker_kv")} | {("range_where", "jvm")}
    assert ratios[("scan", "logbroker_kv")]["vs_floor"] > 0 and ratios[("range", "logbroker")]["vs_floor"] is None
    assert ratios[("scan", "jvm")]["vs_python"] > 0 and ratios[("range_where", "jvm")]["vs_parquet"] > 0
    targets = out["targets"]
    assert len(targets) == 2 + 9 and all(isinstance(t["met"], bool) for t in targets)
    assert sum("no-work" in t["target"] for t in targets) == 2
    assert sum(t["target"].startswith("JVM ") for t in targets) == 9
    assert list(tmp_path.iterdir()) == []  # the work dir was removed


def test_quick_locality_bench_emits_json(tmp_path: Path) -> None:
    """``python -m bench.spark.locality --quick --json``: both reads timed, the
    JVM's tasks NODE_LOCAL (etcd + 3 brokers; skips without etcd)."""
    from tests.support.cluster import require_etcd

    require_etcd()
    proc = subprocess.run([sys.executable, "-m", "bench.spark.locality", "--quick", "--json",
                           "--dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    out = json.loads(proc.stdout)
    assert out["records"] == 5_000 and out["rounds"] == 2
    assert set(out["seconds"]) == {"jvm_paths", "python_fetch"}
    assert all(s["median"] > 0 and s["n"] == 2 for s in out["seconds"].values())
    assert out["tasks"]["jvm_paths"] == {"NODE_LOCAL": 2 * out["partitions"]}
    assert list(tmp_path.iterdir()) == []  # the work dir was removed
