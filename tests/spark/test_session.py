"""The ``logbroker`` format in a real local SparkSession (one per module,
local[2]) over data written by a real broker and by Store."""

from __future__ import annotations

import os
import shutil
import threading
import time

import pytest

pytest.importorskip("pyspark")

from tests.support.fixtures import BrokerProcess  # noqa: E402
from logbroker import Admin, Consumer, Producer  # noqa: E402
from logbroker.spark.plan import Options, Planner  # noqa: E402
from tests.support.fixtures import FAST, consume  # noqa: E402
from tests.support.fixtures import T0, fill  # noqa: E402

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                 reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")]


@pytest.fixture(scope="module")
def fast_broker(tmp_path_factory):
    """A broker that checkpoints (and so publishes its HW to readers) every 50 ms."""
    base = tmp_path_factory.mktemp("spark")
    b = BrokerProcess(base / "data")
    b.config_path = str(base / "broker.toml")
    with open(b.config_path, "w") as fh:
        fh.write("housekeeping_ms = 50\n[storage]\ncheckpoint_interval_ms = 50\n"
                 "[log]\nsegment_bytes = 65536\nindex_interval_bytes = 1024\n")
    try:
        yield b.start()
    finally:
        b.kill()


def committed(data_dir: str, topic: str, partition: int) -> int:
    planner = Planner(Options(data_dir=data_dir))
    try:
        return planner.bounds(topic, partition)[2]
    finally:
        planner.close()


def wait_committed(data_dir, topic, partition, n, timeout=15.0) -> None:
    deadline = time.monotonic() + timeout
    while committed(data_dir, topic, partition) < n:
        assert time.monotonic() < deadline, f"HW of {topic}-{partition} never reached {n}"
        time.sleep(0.05)


def produce(bootstrap, topic, n, partitions=2):
    with Admin(bootstrap, **FAST) as a:
        a.create_topic(topic, partitions=partitions, exist_ok=True)
    with Producer(bootstrap, **FAST) as p:
        for i in range(n):
            p.send(topic, b"%d" % i, key=b"k%d" % (i % 7), partition=i % partitions,
                   timestamp_ms=T0 + i)
        p.flush()


def lb(spark, path, **options):
    reader = spark.read.format("logbroker").option("path", path)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def test_results_equal_what_a_consumer_reads(spark, fast_broker):
    data = fast_broker.data_dir
    produce(fast_broker.bootstrap, "orders", 3000)
    for p in (0, 1):
        wait_committed(data, "orders", p, 1500)
    with Consumer(fast_broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("orders", 0), ("orders", 1)])
        recs = consume(c, 3000)
    assert len(recs) == 3000
    df = lb(spark, data, subscribe="orders", minPartitions="4")
    assert df.count() == 3000
    total = df.selectExpr("sum(cast(cast(value as string) as bigint)) as s").first()["s"]
    assert total == sum(int(r.value) for r in recs)
    per_key = {r["key"]: r["n"] for r in df.groupBy("key").count().withColumnRenamed("count", "n")
               .collect()}
    expect: dict = {}
    for r in recs:
        expect[bytes(r.key)] = expect.get(bytes(r.key), 0) + 1
    assert {bytes(k): v for k, v in per_key.items()} == expect
    got = {(r.partition, r.offset): bytes(r.value) for r in
           df.select("partition", "offset", "value").collect()}
    assert got == {(r.partition, r.offset): r.value for r in recs}
    # a given schema reads (and ships) only those columns
    pruned = spark.read.format("logbroker").schema("value binary, offset long").option("path", data) \
        .option("subscribe", "orders").load()
    assert pruned.columns == ["value", "offset"]
    assert pruned.selectExpr("sum(cast(cast(value as string) as bigint)) as s").first()["s"] == total
    # the auto-registered format through SQL (pyspark_logbroker.DefaultSource)
    spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW orders USING logbroker "
              f"OPTIONS (path '{data}', assign '{{\"orders\":[1]}}')")
    assert spark.sql("SELECT count(*) AS n, min(offset) AS lo FROM orders").first().asDict() == \
        {"n": 1500, "lo": 0}


def test_offset_and_timestamp_options(spark, fast_broker):
    data = fast_broker.data_dir
    produce(fast_broker.bootstrap, "ts", 200, partitions=1)
    wait_committed(data, "ts", 0, 200)
    df = lb(spark, data, subscribe="ts", startingOffsets='{"ts":{"0":50}}',
            endingOffsets='{"ts":{"0":60}}')
    assert [r.offset for r in df.orderBy("offset").collect()] == list(range(50, 60))
    df = lb(spark, data, subscribePattern="t.", startingTimestamp=str(T0 + 120),
            endingTimestamp=str(T0 + 130))
    rows = df.orderBy("offset").collect()
    assert [r.offset for r in rows] == list(range(120, 130))
    assert int(rows[0].timestamp.timestamp() * 1000) == T0 + 120 and rows[0].timestampType == 0


def test_reading_while_the_broker_appends(spark, fast_broker):
    data = fast_broker.data_dir
    produce(fast_broker.bootstrap, "live", 100, partitions=1)
    wait_committed(data, "live", 0, 100)
    stop = threading.Event()

    def append():
        with Producer(fast_broker.bootstrap, **FAST) as p:
            i = 100
            while not stop.is_set():
                p.send("live", b"%d" % i, partition=0)
                i += 1
                if i % 50 == 0:
                    p.flush()

    t = threading.Thread(target=append)
    t.start()
    try:
        counts = []
        for _ in range(3):
            rows = lb(spark, data, subscribe="live").select("offset").collect()
            offsets = sorted(r.offset for r in rows)
            assert offsets == list(range(len(offsets)))  # no gap, nothing torn
            counts.append(len(offsets))
    finally:
        stop.set()
        t.join()
    assert counts[0] >= 100 and counts == sorted(counts)


def test_retention_deleted_range(spark, tmp_path):
    s = fill(tmp_path / "data", partitions=1)
    s.get_log("orders", 0).delete_before(200)
    lso = s.get_log("orders", 0).log_start_offset
    s.close()
    path = str(tmp_path / "data")
    opts = dict(subscribe="orders", startingOffsets='{"orders":{"0":0}}')
    with pytest.raises(Exception, match="deleted by retention"):
        lb(spark, path, **opts).count()
    df = lb(spark, path, failOnDataLoss="false", **opts)
    assert df.count() == 400 - lso
    assert df.agg({"offset": "min"}).first()[0] == lso
