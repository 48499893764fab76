"""The tools/ spark-submit jobs: argument errors (no JVM) and one real run."""

from __future__ import annotations

import csv
import glob
import os
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from fixtures import fill  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLS = os.path.join(ROOT, "tools")
SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")


def run(args, timeout=180) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.fixture
def data(tmp_path):
    fill(tmp_path / "data").close()
    return str(tmp_path / "data")


@pytest.mark.parametrize("job", ["topic_stats.py", "top_keys.py", "export_parquet.py"])
def test_jobs_fail_clearly_on_a_wrong_path_or_topic(job, data, tmp_path):
    out = ["--out", str(tmp_path / "out")]
    r = run([sys.executable, os.path.join(TOOLS, job), "--data-dir", str(tmp_path / "nope"), *out])
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
    r = run([sys.executable, os.path.join(TOOLS, job), "--data-dir", data, "--topic", "x", *out])
    assert r.returncode == 2 and "unknown topic(s) x" in r.stderr and "orders" in r.stderr, r.stderr


@pytest.mark.spark
@pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                    reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
def test_top_keys_via_spark_submit(data, tmp_path):
    out = str(tmp_path / "out")
    r = run([SPARK_SUBMIT, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
             os.path.join(TOOLS, "top_keys.py"), "--data-dir", data, "-n", "2", "--out", out])
    assert r.returncode == 0, r.stderr[-3000:]
    assert "orders  k0" in r.stdout  # the printed table
    (path,) = glob.glob(os.path.join(out, "top_keys_csv", "part-*.csv"))
    with open(path) as fh:
        rows = list(csv.DictReader(fh))
    # 800 records, key k<i%3> per partition of 400: k0 134, k1 133, k2 133 each
    assert [(r["key"], int(r["records"]), int(r["rank"])) for r in rows] == [("k0", 268, 1),
                                                                            ("k1", 266, 2)]


@pytest.mark.spark
@pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                    reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
def test_pipeline_writes_per_minute_rows_to_a_topic_and_parquet(broker, tmp_path):
    import json

    import pyarrow.dataset as ds

    from fixtures import FAST, T0, consume
    from logbroker import Consumer, Producer

    base = T0 // 60_000 * 60_000  # a minute boundary
    want = {}
    with Producer(broker.bootstrap, **FAST) as p:
        for minute in range(4):
            for k, key in enumerate(("a", "b", "c")):
                n = (minute + 1) * (k + 1)
                for i in range(n):
                    p.send("clicks", b"v" * 10, key=key.encode(), timestamp_ms=base + minute * 60_000 + i)
                want[(minute, key)] = (n, n * 11)
        # ten minutes later: moves the watermark past minute 3; its own window stays open
        p.send("clicks", b"late", key=b"z", timestamp_ms=base + 10 * 60_000).result(timeout=30)
    out, parquet = str(tmp_path / "out"), str(tmp_path / "parquet")
    r = run([SPARK_SUBMIT, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
             os.path.join(TOOLS, "pipeline.py"), "--bootstrap", broker.bootstrap, "--topic", "clicks",
             "--out-topic", "clicks-per-minute", "--parquet", parquet,
             "--checkpoint", os.path.join(out, "checkpoint"), "--available-now",
             "--state-partitions", "2"], timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    table = ds.dataset(parquet, format="parquet", partitioning="hive").to_table().to_pylist()
    got = {((row["minute"].timestamp() * 1000 - base) // 60_000, bytes(row["key"]).decode()):
           (row["records"], row["bytes"]) for row in table}
    assert got == want and len(table) == len(want)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("clicks-per-minute", 0)])
        rows = [json.loads(rec.value) for rec in consume(c, len(want))]
    assert sorted((row["key"], row["records"], row["bytes"]) for row in rows) == \
        sorted((key, n, b) for (_, key), (n, b) in want.items())


def test_pipeline_arguments_fail_clearly(tmp_path):
    base = [sys.executable, os.path.join(TOOLS, "pipeline.py"), "--bootstrap", "127.0.0.1:1",
            "--topic", "t", "--out-topic", "o", "--parquet", str(tmp_path / "p"),
            "--checkpoint", str(tmp_path / "c")]
    r = run(base + ["--state-partitions", "0"])
    assert r.returncode == 2 and "--state-partitions must be in 1..10000" in r.stderr, r.stderr
    r = run(base + ["--data-dir", str(tmp_path / "nope")])
    assert r.returncode == 2 and "is not a directory" in r.stderr, r.stderr
    r = run(base + ["--trigger", "1 second", "--available-now"])
    assert r.returncode == 2 and "not allowed with argument" in r.stderr, r.stderr
