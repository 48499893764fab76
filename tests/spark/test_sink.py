"""The Spark sink (spark/sink.py, spark/sink_rows.py): option and column
checks and the row -> send path without Spark (fast), then ``df.write`` and
``df.writeStream`` in the shared local[2] SparkSession into a real broker,
read back with the Consumer."""

from __future__ import annotations

import json
import os
import shutil

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType,  # noqa: E402
                               StringType, StructField, StructType)

from tests.support.fixtures import FAST, consume  # noqa: E402
from logbroker import Admin, Consumer  # noqa: E402
from logbroker.client import partition_for_key  # noqa: E402
from logbroker.errors import RequestTimedOutError, UnknownTopicOrPartitionError  # noqa: E402
from logbroker.spark.sink import (CLIENT_ID, check_schema, parse_sink_options,  # noqa: E402
                                  producer_options)
from logbroker.spark.sink_rows import SinkConfig, SparkSinkError, TaskWriter, to_rows  # noqa: E402

HEADERS_T = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
NEEDS_JAVA = pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")


# -- options (no Spark) ---------------------------------------------------------------------
def test_options_pass_producer_settings_through_typed():
    c = parse_sink_options({"bootstrap": "127.0.0.1:1", "Topic": "orders", "LINGER_MS": "2.5",
                            "batch_size": "65536", "idempotent": "false", "acks": "1",
                            "delivery_timeout_ms": "9000"})
    assert c == SinkConfig("127.0.0.1:1", "orders", {
        "linger_ms": 2.5, "batch_size": 65536, "idempotent": False, "acks": "1",
        "delivery_timeout_ms": 9000, "client_id": CLIENT_ID})
    assert c.flush_timeout() == 39.0  # delivery timeout + the default request timeout
    assert parse_sink_options({"bootstrap": "h:1"}).producer == {"client_id": CLIENT_ID}
    assert {"acks", "linger_ms", "max_in_flight", "request_timeout_ms", "client_id",
            "auto_create_topics"} <= set(producer_options())


@pytest.mark.parametrize("options, message", [
    ({}, "option bootstrap is required"),
    ({"bootstrap": " "}, "option bootstrap is required"),
    ({"bootstrap": "h:1", "lingerms": "5", "path": "/x"}, "unknown option(s) lingerms, path"),
    ({"bootstrap": "h:1", "linger_ms": "soon"}, "option linger_ms must be a number, got 'soon'"),
    ({"bootstrap": "h:1", "batch_size": "1.5"}, "option batch_size must be an integer"),
    ({"bootstrap": "h:1", "idempotent": "yes"}, "option idempotent must be true or false"),
    ({"bootstrap": "h:1", "acks": "2"}, "acks must be 'all', 1 or 0"),
    ({"bootstrap": "h:1", "max_in_flight": "9"}, "at most 5 requests in flight"),
    ({"bootstrap": "h:1", "batch_size": "0"}, "batch_size must be a number in 1.."),
    ({"bootstrap": "h:1", "topic": "no spaces"}, "option topic: invalid topic name"),
    ({"bootstrap": "h:1,h:99999"}, "option bootstrap: bad bootstrap address 'h:99999'"),
    ({"bootstrap": "h:1", "request_timeout_ms": "0"}, "bad producer option: request_timeout_ms"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(SparkSinkError) as e:
        parse_sink_options(options)
    assert message in str(e.value)


def test_unknown_option_error_lists_the_known_ones():
    with pytest.raises(SparkSinkError, match="bootstrap, topic, transactional, "
                                             "transactional_id_prefix, transaction_timeout_ms "
                                             "and the Producer's settings: acks, "
                                             "auto_create_topics, batch_size"):
        parse_sink_options({"bootstrap": "h:1", "kafka.bootstrap.servers": "h:1"})


# -- columns (no Spark) ---------------------------------------------------------------------
def schema(**cols) -> StructType:
    return StructType([StructField(n, t) for n, t in cols.items()])


HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))
WITH_TOPIC = SinkConfig("h:1", "t")
NO_TOPIC = SinkConfig("h:1")


def test_schema_takes_the_kafka_sink_columns_and_ignores_others():
    check_schema(schema(value=BinaryType()), WITH_TOPIC)
    check_schema(schema(key=StringType(), value=StringType(), topic=StringType(),
                        partition=IntegerType(), headers=HEADERS, extra=LongType()), NO_TOPIC)
    strict = ArrayType(StructType([StructField("key", StringType(), False),
                                   StructField("value", BinaryType())]), False)
    check_schema(schema(value=BinaryType(), headers=strict), WITH_TOPIC)


@pytest.mark.parametrize("cols, config, message", [
    ({"key": BinaryType()}, WITH_TOPIC, "needs a value column (binary or string); the DataFrame has: key"),
    ({"value": LongType()}, WITH_TOPIC, "column value must be binary or string, not bigint"),
    ({"value": BinaryType(), "key": IntegerType()}, WITH_TOPIC, "column key must be binary or string, not int"),
    ({"value": BinaryType(), "partition": LongType()}, WITH_TOPIC, "column partition must be int, not bigint"),
    ({"value": BinaryType(), "topic": BinaryType()}, NO_TOPIC, "column topic must be string, not binary"),
    ({"value": BinaryType(), "headers": ArrayType(StringType())}, WITH_TOPIC,
     "column headers must be array<struct<key: string, value: binary>>, not array<string>"),
    ({"value": BinaryType(), "headers": ArrayType(StructType([StructField("key", StringType()),
                                                               StructField("value", StringType())]))},
     WITH_TOPIC, "column headers must be"),
    ({"value": BinaryType()}, NO_TOPIC, "no topic: set option topic or give the DataFrame a topic column"),
])
def test_schema_errors_name_the_column(cols, config, message):
    with pytest.raises(SparkSinkError) as e:
        check_schema(schema(**cols), config)
    assert message in str(e.value)


def batch(**cols) -> pa.RecordBatch:
    return pa.record_batch(list(cols.values()), names=list(cols))


def test_rows_convert_whole_columns():
    b = batch(value=pa.array(["a", "bé"]), key=pa.array([b"k", None]),
              headers=pa.array([[{"key": "h", "value": b"1"}, {"key": "g", "value": None}], None],
                               HEADERS_T),
              topic=pa.array(["x", "y"]), partition=pa.array([1, None], pa.int32()))
    rows = to_rows(b, None)
    assert rows.topics == ["x", "y"] and rows.values == [b"a", "bé".encode()]
    assert rows.keys == [b"k", None] and rows.partitions == [1, None]
    assert rows.headers == [[("h", b"1"), ("g", None)], None]
    args = [list(a) for a in rows.args()]
    assert args == [["x", "y"], [b"a", "bé".encode()], [b"k", None],
                    [[("h", b"1"), ("g", None)], None], [1, None]]
    one = to_rows(batch(value=pa.array([b"v"] * 3, pa.large_binary()),
                        topic=pa.array(["x"] * 3, pa.large_string())), "over")
    assert one.topic == "over" and one.topics is None  # the option overrides the column
    assert [list(a) for a in one.args()] == [["over"] * 3, [b"v"] * 3, [None] * 3, [None] * 3,
                                             [None] * 3]
    same = to_rows(batch(value=pa.array([b"v"] * 2), topic=pa.array(["x", "x"])), None)
    assert same.topic == "x" and same.topics is None  # one topic in the batch: no list


def test_headers_of_a_sliced_column():
    col = pa.array([[{"key": "a", "value": b"1"}], [], [{"key": "b", "value": b"2"},
                                                         {"key": "c", "value": b"3"}]], HEADERS_T)
    rows = to_rows(batch(value=pa.array([b"x", b"y"]), headers=col.slice(1)), "t")
    assert rows.headers == [[], [("b", b"2"), ("c", b"3")]]
    bad = pa.array([[{"key": "a", "value": b"1"}], [{"key": None, "value": b"2"}],
                    [{"key": "b", "value": None}]], HEADERS_T)
    assert to_rows(batch(value=pa.array([b"x"]), headers=bad.slice(2)), "t").headers == [
        [("b", None)]]  # the null key lies outside the slice
    with pytest.raises(SparkSinkError, match=r"t\[round-robin\]: row 1 of an Arrow batch of 2: a "
                                             "header"):
        to_rows(batch(value=pa.array([b"x", b"y"]), headers=bad.slice(0, 2)), "t")


@pytest.mark.parametrize("cols, message", [
    ({"value": pa.array([b"a", None]), "key": pa.array([b"k", b"k"])},
     f"t[{partition_for_key(b'k', 3)}]: row 1 of an Arrow batch of 2: value is null"),
    ({"value": pa.array([b"a", None])}, "t[round-robin]: row 1 of an Arrow batch of 2: value is null"),
    ({"value": pa.array([None, b"a"]), "partition": pa.array([2, 0], pa.int32())},
     "t[2]: row 0 of an Arrow batch of 2: value is null"),
    ({"value": pa.array([b"a"]),
      "headers": pa.array([[{"key": None, "value": b"1"}]], HEADERS_T)},
     "t[round-robin]: row 0 of an Arrow batch of 1: a header (or its key) is null"),
    ({"value": pa.array([1], pa.int64())}, "column value must be binary or string, not int64"),
    ({"key": pa.array([b"k"])}, "the sink needs a value column (binary or string); the batch has key"),
])
def test_row_errors_name_topic_partition_and_row(cols, message):
    writer = TaskWriter(SinkConfig("h:1", "t"), lambda config: FakeProducer())
    with pytest.raises(SparkSinkError) as e:
        writer.write(batch(**cols))
    assert message in str(e.value)


def test_null_topic_is_an_error():
    with pytest.raises(SparkSinkError, match="row 1 of an Arrow batch of 2: topic is null"):
        to_rows(batch(value=pa.array([b"a", b"b"]), topic=pa.array(["x", None])), None)
    with pytest.raises(SparkSinkError, match="no topic: set option topic"):
        to_rows(batch(value=pa.array([b"a"])), None)


class FakeBatch:
    def __init__(self, topic: str, partition: int, done: bool, error) -> None:
        self.topic, self.partition, self.done, self.error = topic, partition, done, error


class FakeHandle(tuple):
    """A RecordHandle's shape: (producer batch, index)."""

    topic = property(lambda self: self[0].topic)
    partition = property(lambda self: self[0].partition)

    def done(self) -> bool:
        return self[0].done

    def exception(self, timeout=None):
        return self[0].error


class FakeProducer:
    """Two records per producer batch; ``fail_at`` refuses a send; ``bad``
    partitions fail delivery."""

    def __init__(self, fail_at=None, bad=(), done=True) -> None:
        self.sent, self.fail_at, self.bad, self.done = [], fail_at, bad, done
        self.batches, self.flushed, self.closed = [], None, None

    def partitions_for(self, topic):
        return 3

    def send(self, topic, value, key=None, headers=None, partition=None):
        if len(self.sent) == self.fail_at:
            raise UnknownTopicOrPartitionError(f"{topic}[{partition}]: the topic has 3 partition(s)")
        self.sent.append((topic, value, key, headers, partition))
        if len(self.sent) % 2:
            p = 0 if partition is None else partition
            self.batches.append(FakeBatch(topic, p, self.done,
                                          RequestTimedOutError("late") if p in self.bad else None))
        return FakeHandle((self.batches[-1], len(self.sent)))

    def flush(self, timeout):
        self.flushed = timeout
        for b in self.batches:
            b.done = True

    def close(self, timeout=None):
        self.closed = timeout


def test_task_sends_every_row_and_checks_one_handle_per_batch():
    fake = FakeProducer(done=False)
    writer = TaskWriter(SinkConfig("h:1", "t", {"delivery_timeout_ms": 1000}), lambda c: fake)
    writer.write(batch(value=pa.array([b"a", b"b", b"c"]), key=pa.array(["k1", None, "k3"])))
    writer.write(batch(value=pa.array([b"d"]), key=pa.array(["k4"])))
    writer.write(batch(value=pa.array([], pa.binary())))
    assert fake.sent == [("t", b"a", b"k1", None, None), ("t", b"b", None, None, None),
                         ("t", b"c", b"k3", None, None), ("t", b"d", b"k4", None, None)]
    assert len(writer._pending) == 2  # two producer batches of 2 records, not 4 handles
    counts = writer.finish()
    assert fake.flushed == 31.0  # delivery_timeout_ms + request_timeout_ms
    assert counts == {"rows": 4, "bytes": 10, "batches": 2, "topics": {"t": 4}}
    writer.close(True)
    assert fake.closed is None and writer.producer is None


def test_a_refused_send_names_its_row_and_partition():
    fake = FakeProducer(fail_at=2)
    writer = TaskWriter(SinkConfig("h:1"), lambda c: fake)
    b = batch(value=pa.array([b"a", b"b", b"c"]), topic=pa.array(["x", "y", "y"]),
              partition=pa.array([0, 1, 7], pa.int32()))
    with pytest.raises(SparkSinkError, match=r"y\[7\]: row 2 of an Arrow batch of 3: "
                                             r"UNKNOWN_TOPIC_OR_PARTITION: y\[7\]"):
        writer.write(b)
    assert len(writer._pending) == 1  # the handles of the rows before it are kept, and checked
    writer.close(False)
    assert fake.closed == 0  # after a failure nothing more waits


def test_a_failed_delivery_fails_the_task_naming_topic_partition():
    fake = FakeProducer(bad=(1,))
    writer = TaskWriter(SinkConfig("h:1", "t"), lambda c: fake)
    with pytest.raises(SparkSinkError, match=r"t\[1\]: delivery failed: REQUEST_TIMED_OUT: late"):
        writer.write(batch(value=pa.array([b"a", b"b", b"c"]),
                           partition=pa.array([0, 0, 1], pa.int32())))
    never = FakeProducer(done=False)
    never.flush = lambda timeout: None  # the flush returned with a batch still unresolved
    writer = TaskWriter(SinkConfig("h:1", "t"), lambda c: never)
    writer.write(batch(value=pa.array([b"a"]), partition=pa.array([2], pa.int32())))
    with pytest.raises(SparkSinkError, match=r"t\[2\]: records not acknowledged within 150 s"):
        writer.finish()


# -- in Spark, with a real broker -------------------------------------------------------------
@pytest.fixture(scope="module")
def sink_broker(module_broker):
    return module_broker  # conftest's one broker for the module


def create(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap, **FAST) as admin:
        admin.create_topic(topic, partitions)


def read_back(bootstrap: str, topics: dict, n: int) -> list:
    """Every record of ``topics`` ({name: partitions}) as (topic, partition,
    key, value, headers), in offset order per partition."""
    with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([(t, p) for t, count in topics.items() for p in range(count)])
        got = consume(c, n)
    got.sort(key=lambda r: (r.topic, r.partition, r.offset))
    assert len(got) == n, f"read {len(got)} of {n} records"
    return [(r.topic, r.partition, r.key, r.value, list(r.headers)) for r in got]


def writer(df, bootstrap: str, **options):
    w = df.write.format("logbroker").mode("append").option("bootstrap", bootstrap)
    for name, value in {**FAST, **options}.items():
        w = w.option(name, str(value))
    return w


@pytest.mark.spark
@NEEDS_JAVA
def test_write_rows_with_every_column_read_back_exactly(spark, sink_broker):
    bs = sink_broker.bootstrap
    create(bs, "sink-a", 3)
    create(bs, "sink-b", 2)
    # every 5th row has no partition (keyed: the key's hash picks it); unkeyed rows name theirs
    rows = [(None if i % 4 == 0 and i % 5 else b"k%d" % i, b"v%d" % i,
             [("i", b"%d" % i), ("dup", None), ("dup", b"")] if i % 3 else [],
             "sink-a" if i % 2 else "sink-b", i % (3 if i % 2 else 2) if i % 5 else None)
            for i in range(60)]
    df = spark.createDataFrame(rows, "key binary, value binary, headers array<struct<key: string, "
                                     "value: binary>>, topic string, partition int").repartition(2)
    writer(df, bs).save()
    expected = [(topic, partition_for_key(key, 3 if topic == "sink-a" else 2)
                 if partition is None else partition, key, value, headers)
                for key, value, headers, topic, partition in rows]
    got = read_back(bs, {"sink-a": 3, "sink-b": 2}, 60)
    assert sorted(got, key=repr) == sorted(expected, key=repr)


@pytest.mark.spark
@NEEDS_JAVA
def test_topic_option_overrides_the_column_and_strings_are_utf8(spark, sink_broker):
    bs = sink_broker.bootstrap
    create(bs, "sink-over", 1)
    df = spark.createDataFrame([("k%d" % i, "välue-%d" % i, "elsewhere") for i in range(20)],
                               "key string, value string, topic string").coalesce(1)
    writer(df, bs, topic="sink-over").save()
    got = read_back(bs, {"sink-over": 1}, 20)
    assert got == [("sink-over", 0, b"k%d" % i, f"välue-{i}".encode(), [])
                   for i in range(20)]  # one task: its order is kept
    with Admin(bs, **FAST) as admin:
        topics = admin.list_topics()
    assert "sink-over" in topics and "elsewhere" not in topics


@pytest.mark.spark
@NEEDS_JAVA
def test_write_stream_available_now_into_a_topic(spark, sink_broker, tmp_path):
    bs = sink_broker.bootstrap
    create(bs, "sink-stream", 2)
    src = tmp_path / "in"
    src.mkdir()
    for f in range(3):
        (src / f"part-{f}.json").write_text("".join(
            json.dumps({"k": f"k{f}-{i}", "v": f"v{f}-{i}"}) + "\n" for i in range(10)))
    stream = (spark.readStream.schema("k string, v string").json(str(src))
              .selectExpr("k AS key", "v AS value"))
    query = (stream.writeStream.format("logbroker").option("bootstrap", bs)
             .option("topic", "sink-stream").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(90), "the AvailableNow query did not finish within 90 s"
    finally:
        query.stop()
    assert query.exception() is None
    got = read_back(bs, {"sink-stream": 2}, 30)
    expected = sorted((b"k%d-%d" % (f, i), b"v%d-%d" % (f, i)) for f in range(3) for i in range(10))
    assert sorted((k, v) for _, _, k, v, _ in got) == expected
    assert all(p == partition_for_key(k, 2) for _, p, k, _, _ in got)


@pytest.fixture(scope="module")
def err_topic(sink_broker) -> str:
    create(sink_broker.bootstrap, "sink-err", 2)
    return "sink-err"


@pytest.mark.spark
@NEEDS_JAVA
@pytest.mark.parametrize("rows, ddl, options, message", [
    ([(b"k",)], "key binary", {"topic": "sink-err"}, "needs a value column"),
    ([(1,)], "value int", {"topic": "sink-err"}, "column value must be binary or string, not int"),
    ([(b"v", 1)], "value binary, partition bigint", {"topic": "sink-err"},
     "column partition must be int, not bigint"),
    ([(b"v",)], "value binary", {"topic": "sink-err", "lingerms": "5"}, "unknown option(s) lingerms"),
    ([(b"v",)], "value binary", {"topic": "sink-err", "max_in_flight": "x"},
     "option max_in_flight must be an integer"),
    ([(b"v",)], "value binary", {}, "no topic: set option topic"),
    ([(b"v", 0), (None, 1)], "value binary, partition int", {"topic": "sink-err"},
     "sink-err[1]: row 1 of an Arrow batch of 2: value is null"),
    ([(b"v", 5)], "value binary, partition int", {"topic": "sink-err"},
     ("sink-err[5]: row 0 of an Arrow batch of 1: UNKNOWN_TOPIC_OR_PARTITION: sink-err[5]: the "
      "topic has 2 partition(s)")),
    ([(b"v", None)], "value binary, topic string", {}, "topic is null"),
    ([(b"v",)], "value binary", {"topic": "sink-missing", "auto_create_topics": "false",
                                 "max_block_ms": "1000"},
     "topic 'sink-missing': UNKNOWN_TOPIC_OR_PARTITION"),
])
def test_errors_name_the_column_option_or_topic_partition(spark, sink_broker, err_topic, rows,
                                                           ddl, options, message):
    df = spark.createDataFrame(rows, ddl).coalesce(1)
    with pytest.raises(Exception) as e:  # Spark wraps it: the Python error is in the message
        writer(df, sink_broker.bootstrap, **options).save()
    assert message in str(e.value), str(e.value)[-3000:]


@pytest.mark.spark
@NEEDS_JAVA
def test_overwrite_mode_is_refused(spark, sink_broker, err_topic):
    df = spark.createDataFrame([(b"v",)], "value binary")
    with pytest.raises(Exception) as e:
        (df.write.format("logbroker").option("bootstrap", sink_broker.bootstrap)
         .option("topic", err_topic).mode("overwrite").save())
    assert 'only appends to topics: use mode("append")' in str(e.value), str(e.value)[-3000:]


@pytest.mark.spark
@NEEDS_JAVA
def test_save_without_a_mode_appends_as_spark_kafka_sink(spark, sink_broker):
    """Spark refuses its default save mode (errorifexists) for a Python
    source; the JVM connector takes it and appends (Spark's Kafka sink does)."""
    from logbroker.spark import connector

    if not connector.on_classpath(spark):
        pytest.skip(connector.why_python())
    bs = sink_broker.bootstrap
    create(bs, "sink-plain", 1)
    df = spark.createDataFrame([(b"p%d" % i,) for i in range(5)], "value binary").coalesce(1)
    w = df.write.format("logbroker").option("bootstrap", bs).option("topic", "sink-plain")
    for name, value in FAST.items():
        w = w.option(name, str(value))
    w.save()
    w.save()  # appends again, never "already exists"
    got = read_back(bs, {"sink-plain": 1}, 10)
    assert [r[3] for r in got] == [b"p%d" % i for i in range(5)] * 2
