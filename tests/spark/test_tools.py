"""The tools/ spark-submit jobs: argument errors (no JVM) and one real run."""

from __future__ import annotations

import argparse
import csv
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

from tests.support.fixtures import T0, fill, open_store  # noqa: E402
from logbroker.records import build_batch  # noqa: E402
from logbroker.spark.charts import to_num  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOLS = os.path.join(ROOT, "tools")
SPARK_SUBMIT = os.path.join(os.path.dirname(sys.executable), "spark-submit")
needs_java = pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")


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
def test_top_keys_prints_and_writes_the_top_keys_with_their_share(spark, data, tmp_path, capsys):
    """The job's own code with the shared session (spark-submit itself is
    covered by the pipeline test: a second JVM here cost ~20 s of the suite)."""
    from logbroker.spark.jobs import check

    mod, out = tool("top_keys"), str(tmp_path / "out")
    args = mod.arguments().parse_args(["--data-dir", data, "-n", "2", "--out", out])
    rows, figures = mod.run(spark, args, check(args))
    printed = capsys.readouterr().out
    assert "orders  k0" in printed and "33.5%" in printed  # the printed table
    (path,) = glob.glob(os.path.join(out, "top_keys_csv", "part-*.csv"))
    with open(path) as fh:
        written = list(csv.DictReader(fh))
    # 800 records, key k<i%3> per partition of 400: k0 134, k1 133, k2 133 each
    assert [(r["key"], int(r["records"]), int(r["rank"])) for r in written] == [("k0", 268, 1),
                                                                               ("k1", 266, 2)]
    assert [r["share"][:5] for r in written] == ["0.335", "0.332"]
    assert [(r["key"], r["records"]) for r in rows] == [(b"k0", 268), (b"k1", 266)]
    assert set(figures) == {"top_keys.png"} and os.path.getsize(os.path.join(out, "top_keys.png")) > 0


def tool(name: str):
    """tools/<name>.py as a module (spark-submit runs it as a script)."""
    spec = importlib.util.spec_from_file_location(f"tools_{name}", os.path.join(TOOLS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def produce(path, topics: dict[str, int], span_ms: int) -> None:
    """``n`` records per topic (one partition), keys k0-k3 in turn, the
    producer's timestamps spread evenly from T0 to T0 + ``span_ms``."""
    s = open_store(path)
    for topic, n in topics.items():
        s.create_topic(topic, 1)
        recs = [(b"v" * 10, b"k%d" % (i % 4), (), T0 + span_ms * i // (n - 1)) for i in range(n)]
        log = s.get_log(topic, 0)
        for i in range(0, n, 2000):
            log.append([build_batch(recs[i:i + 2000])])
        log.set_high_watermark(log.log_end_offset)
    s.close()


def assert_charts(figures: dict, topics: dict[str, int], span_ms: int, unit: str) -> None:
    """A panel per topic, x over the data's span (to within a bucket each
    side), bars a bucket wide from y = 0, the unit in the y label, the
    topic's records (or bytes: 12 a record) in its bars."""
    first, last = T0 / 1000, (T0 + span_ms) / 1000
    width = {"second": 1, "5 seconds": 5, "15 minutes": 900}[unit] / 86400
    assert sorted(figures) == ["bytes_per_bucket.png", "records_per_bucket.png"]
    for name, fig in figures.items():
        assert [ax.get_title(loc="left").split(":")[0] for ax in fig.axes] == sorted(topics)
        for ax, topic in zip(fig.axes, sorted(topics)):
            left, right = ax.get_xlim()
            assert left <= to_num(first) and to_num(last) <= right
            assert right - left <= (last - first) / 86400 + 2 * width
            (bars,) = ax.containers
            assert all(b.get_width() == pytest.approx(width) for b in bars)
            label, per = ax.get_ylabel().split(" ", 1)
            assert ax.get_ylim()[0] == 0 and per == f"per {unit}"
            total = sum(b.get_height() for b in bars)
            if name == "records_per_bucket.png":
                assert label == "records" and total == topics[topic]
            else:
                assert total * {"bytes": 1, "kB": 1000}[label] == pytest.approx(topics[topic] * 12)


@pytest.mark.spark
@needs_java
def test_topic_stats_charts_each_topic_over_the_data_span(spark, tmp_path, capsys):
    """The issue's case (two topics of 20,000 records within a second) through
    the whole job, then 10 minutes and 3 days through its table and charts:
    the charts alone tell which topic had how many records when. (top_keys'
    chart: test_top_keys_via_spark_submit and tests/spark/test_charts.py.)"""
    pytest.importorskip("matplotlib")
    stats = tool("topic_stats")
    cases = [(950, "second", "0.95 s", {"clicks": 20_000, "orders": 20_000}),
             (600_000, "5 seconds", "10 min", {"clicks": 1_000, "orders": 3_000}),
             (3 * 86_400_000, "15 minutes", "3 d", {"clicks": 1_000, "orders": 3_000})]
    for span_ms, unit, span, topics in cases:
        data, out = str(tmp_path / f"data{span_ms}"), str(tmp_path / f"out{span_ms}")
        produce(data, topics, span_ms)
        args = argparse.Namespace(data_dir=data, out=out, topic=None, master=None)
        if span_ms < 1000:  # the whole job once: table, files, charts
            rows, figures = stats.run(spark, args, list(topics))
            assert sorted(os.listdir(out)) == sorted([*figures, "topic_stats.parquet", "topic_stats_csv"])
            assert re.search(r"^clicks +1 +20000 +240000 .* 0\.95 s +21,052\.63 *$",
                             capsys.readouterr().out, re.M)
        else:
            df = stats.load(spark, args, list(topics))
            rows = stats.collect(stats.stats(df))
            figures = stats.charts(df, rows)
        assert_charts(figures, topics, span_ms, unit)
        summary = {r["topic"]: r for r in stats.per_topic(rows)}
        for topic, n in topics.items():
            rate = n / (span_ms / 1000)
            assert (summary[topic]["records"], summary[topic]["span"], summary[topic]["records/s"]) == \
                (n, span, f"{rate:,.2f}" if rate >= 1 else f"{rate:.3g}")


@pytest.mark.spark
@pytest.mark.slow  # ~31 s (a spark-submit job end to end); the topic-stats job stays in the default run
@pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                    reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")
def test_pipeline_writes_per_minute_rows_to_a_topic_and_parquet(broker, tmp_path):
    import json

    import pyarrow.dataset as ds

    from tests.support.fixtures import FAST, T0, consume
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
