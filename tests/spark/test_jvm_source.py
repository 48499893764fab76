"""The JVM connector (spark/jvm, issue 28) against the Python source, in the
one test SparkSession (it carries the jar, tests/conftest.py): the same
queries through ``engine=jvm`` and ``engine=python`` return the same rows,
over Kafka batches of every codec a real client sends (librdkafka through
the Kafka listener), our own batches with headers and nulls, and a
compacted topic with gaps; what only the JVM does (pruning, pushed filters,
COUNT from headers) shows in the plan and keeps the answers."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("pyspark")

from tests.support.compaction import compact_all, open_compacted  # noqa: E402
from tests.support.fixtures import FAST, T0  # noqa: E402
from tests.support.kafka_raw import WAIT, batch_codecs, kafka_broker  # noqa: E402
from logbroker import Admin, Producer  # noqa: E402
from logbroker.records import build_batch  # noqa: E402
from logbroker.spark import connector  # noqa: E402

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                 reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")]
CODECS = ("gzip", "snappy", "lz4", "zstd")


@pytest.fixture(scope="module")
def jvm(spark):
    if not connector.on_classpath(spark):
        if os.environ.get("LOGBROKER_JVM_REQUIRED") == "1":
            pytest.fail(f"the JVM connector is required here: {connector.why_python()}")
        pytest.skip(connector.why_python())
    return spark


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A data dir written by a real broker: librdkafka's batches in every
    codec (topics kz-<codec>), and ours with headers, null keys and values
    over several segments (topic ours, 2 partitions)."""
    ck = pytest.importorskip("confluent_kafka")
    data = tmp_path_factory.mktemp("jvm") / "data"
    with kafka_broker(data, config={"log.segment_bytes": 4096, "log.index_interval_bytes": 512}) \
            as (b, bootstrap):
        for codec in CODECS:
            p = ck.Producer({"bootstrap.servers": bootstrap, "compression.type": codec,
                             "linger.ms": 20, "acks": "all"})
            for i in range(300):
                p.produce(f"kz-{codec}", value=b"%s-%d-" % (codec.encode(), i) + b"z" * (i % 50),
                          key=None if i % 7 == 0 else b"k%d" % (i % 11), partition=0,
                          timestamp=T0 + i, headers=[("n", b"%d" % i)] if i % 3 else None)
                if i % 100 == 99:
                    p.flush(WAIT)
            assert p.flush(WAIT) == 0
            # librdkafka sends a batch uncompressed when compressing does not shrink it
            assert CODECS.index(codec) + 1 in batch_codecs(bootstrap, f"kz-{codec}")
        with Admin(b.bootstrap, **FAST) as a:
            a.create_topic("ours", partitions=2)
        with Producer(b.bootstrap, **FAST) as p:
            for i in range(400):
                p.send("ours", value=None if i % 13 == 0 else b"v%d" % i * (1 + i % 4),
                       key=None if i % 5 == 0 else b"k%d" % (i % 9), partition=i % 2,
                       headers=[("h", b"%d" % i), ("x", None)] if i % 4 == 0 else None,
                       timestamp_ms=T0 + 1000 + i)
                if i % 40 == 39:
                    p.flush(WAIT)
        assert b.stop() == 0
    return str(data)


@pytest.fixture(scope="module")
def compacted(tmp_path_factory):
    """A compacted topic with gaps (Store, compacted in place)."""
    path = tmp_path_factory.mktemp("jvm-compact") / "data"
    s = open_compacted(path)
    s.create_topic("kv", 1, cleanup_policy="compact")
    lg = s.get_log("kv", 0)
    for b in range(30):
        lg.append([build_batch([(b"v%d-%d" % (b, j), b"key%d" % ((b * 5 + j) % 12), (), 1_000 + b)
                                for j in range(5)])])
    lg.roll()
    compact_all(s)
    s.close()
    return str(path)


def load(spark, data, engine, schema=None, **options):
    r = spark.read.format("logbroker").option("path", data).option("engine", engine)
    if schema:
        r = r.schema(schema)
    return r.options(**options).load()


def rows(df):
    out = []
    for r in df.collect():
        d = r.asDict(recursive=True)
        for k, v in d.items():
            if isinstance(v, (bytes, bytearray)):
                d[k] = bytes(v)
            if k == "headers" and v is not None:
                d[k] = [(h["key"], None if h["value"] is None else bytes(h["value"])) for h in v]
        out.append(d)
    return sorted(out, key=lambda d: json.dumps(d, sort_keys=True, default=str))


def plan_of(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def same(spark, data, query, **options):
    """The query's rows through both engines (must be equal); the JVM's plan."""
    jvm_df = query(load(spark, data, "jvm", **options))
    py_df = query(load(spark, data, "python", **options))
    got, want = rows(jvm_df), rows(py_df)
    assert got == want
    assert "logbroker (jvm)" in plan_of(jvm_df) and "logbroker (jvm)" not in plan_of(py_df)
    return got, plan_of(jvm_df)


def test_every_column_of_every_codec_and_ours(jvm, mixed):
    got, _ = same(jvm, mixed, lambda df: df, subscribePattern="kz-.*|ours", includeHeaders="true")
    assert len(got) == 4 * 300 + 400
    kz = [r for r in got if r["topic"] == "kz-zstd"]
    assert {r["offset"] for r in kz} == set(range(300))
    r7 = next(r for r in kz if r["offset"] == 7)
    assert r7["key"] is None and r7["value"] == b"zstd-7-" + b"z" * 7 and r7["headers"] == [("n", b"7")]
    assert any(r["value"] is None for r in got if r["topic"] == "ours")


def test_offset_and_timestamp_options_and_pruned_schemas(jvm, mixed):
    starting = json.dumps({"ours": {"0": 17, "1": 50}})
    ending = json.dumps({"ours": {"0": 120}})
    got, _ = same(jvm, mixed, lambda df: df.select("partition", "offset", "value"),
                  subscribe="ours", startingOffsets=starting, endingOffsets=ending)
    assert min(r["offset"] for r in got if r["partition"] == 0) == 17
    assert max(r["offset"] for r in got if r["partition"] == 0) == 119
    got, _ = same(jvm, mixed, lambda df: df, schema="value binary, offset long, headers "
                  "array<struct<key:string,value:binary>>", subscribe="kz-gzip",
                  startingTimestamp=str(T0 + 250))
    assert sorted(r["offset"] for r in got) == list(range(250, 300))


def test_aggregates_filters_and_count_from_headers(jvm, mixed):
    count = load(jvm, mixed, "jvm", subscribePattern="kz-.*|ours")
    assert count.count() == 1600
    assert "COUNT from batch headers" in plan_of(count.groupBy().count())
    got, plan = same(jvm, mixed, lambda df: df.where("offset between 100 and 149 and partition = 0")
                     .groupBy("topic").count(), subscribePattern="kz-.*|ours")
    assert {r["topic"]: r["count"] for r in got} == {**{f"kz-{c}": 50 for c in CODECS}, "ours": 50}
    assert "narrowed by" in plan and "offset" in plan
    got, plan = same(jvm, mixed, lambda df: df.groupBy("partition").count(), subscribe="ours")
    assert {r["partition"]: r["count"] for r in got} == {0: 200, 1: 200}
    assert "logbroker (jvm) struct<partition:int>" in plan  # pruned: no key, no value read
    got, _ = same(jvm, mixed, lambda df: df.groupBy("key").count(), subscribe="ours")
    assert sum(r["count"] for r in got) == 400


def test_compacted_topic_with_gaps(jvm, compacted):
    got, _ = same(jvm, compacted, lambda df: df, subscribe="kv")
    assert 12 <= len(got) < 150  # the newest value of each key, and what compaction left
    assert len({r["key"] for r in got}) == 12
    assert load(jvm, compacted, "jvm", subscribe="kv").count() == len(got)


def test_errors_are_the_python_sources(jvm, mixed, tmp_path):
    from pyspark.errors import PySparkException
    from py4j.protocol import Py4JJavaError

    for options, message in (({"subscribe": "nope"}, "unknown topic(s) nope"),
                             ({"subscribe": "ours", "startingOffsets": "bad"},
                              "option startingOffsets must be")):
        with pytest.raises((PySparkException, Py4JJavaError), match=message.replace("(", r"\(")
                           .replace(")", r"\)")):
            load(jvm, mixed, "jvm", **options).collect()
    with pytest.raises((PySparkException, Py4JJavaError), match="option engine must be"):
        load(jvm, mixed, "fast", subscribe="ours").collect()
