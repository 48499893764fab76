"""The Spark sink's ``transactional`` option (spark/sink.py, sink_rows.py;
docs/spark.md "Transactions"): the options checked on the driver, a task's
transaction on a fake producer (fast), then in the shared local[2]
SparkSession against a real broker: a transactional batch write read back
read_committed (Spark's reader and our Consumer), and a task that fails
mid-write: nothing of it for read_committed readers, its records aborted for
read_uncommitted ones, and the query run again with the same prefix commits."""

from __future__ import annotations

import os
import shutil

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa  # noqa: E402

from tests.support.fixtures import FAST, consume  # noqa: E402
from logbroker import Admin, Consumer  # noqa: E402
from logbroker.errors import ProducerFencedError  # noqa: E402
from logbroker.spark.sink import CLIENT_ID, parse_sink_options  # noqa: E402
from logbroker.spark.sink_rows import SinkConfig, SparkSinkError, TaskWriter  # noqa: E402

NEEDS_JAVA = pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                reason="Spark needs Java 17+ (no java on PATH, no JAVA_HOME)")


# -- options (no Spark) ---------------------------------------------------------------------
def test_transactional_options_make_a_per_task_transactional_id():
    c = parse_sink_options({"bootstrap": "h:1", "topic": "t", "Transactional": "TRUE",
                            "transactional_id_prefix": "etl-orders", "transaction_timeout_ms": "9000"})
    assert c == SinkConfig("h:1", "t", {"client_id": CLIENT_ID}, "etl-orders", 9000)
    assert c.transactional and c.producer_kwargs(3) == {
        "client_id": CLIENT_ID, "transactional_id": "etl-orders-3", "transaction_timeout_ms": 9000}
    plain = parse_sink_options({"bootstrap": "h:1", "transactional": "false"})
    assert not plain.transactional and plain.producer_kwargs(3) == {"client_id": CLIENT_ID}


@pytest.mark.parametrize("options, message", [
    ({"transactional": "true"}, "option transactional=true needs option transactional_id_prefix"),
    ({"transactional_id_prefix": "p"}, "option transactional_id_prefix needs option transactional=true"),
    ({"transactional": "false", "transaction_timeout_ms": "5"},
     "option transaction_timeout_ms needs option transactional=true"),
    ({"transactional": "yes", "transactional_id_prefix": "p"}, "option transactional must be true or false"),
    ({"transactional": "true", "transactional_id_prefix": "p", "acks": "1"},
     "option transactional: a transactional producer is idempotent"),
    ({"transactional": "true", "transactional_id_prefix": "p", "idempotent": "false"},
     "option transactional: a transactional producer is idempotent"),
    ({"transactional": "true", "transactional_id_prefix": "p\x01q"}, "printable characters"),
    ({"transactional": "true", "transactional_id_prefix": "p" * 240}, "printable characters"),
    ({"transactional": "true", "transactional_id_prefix": "p", "transaction_timeout_ms": "0"},
     "transaction_timeout_ms must be an int in 1..2147483647"),
])
def test_bad_transactional_options_are_named(options, message):
    with pytest.raises(SparkSinkError) as e:
        parse_sink_options({"bootstrap": "h:1", **options})
    assert message in str(e.value)


# -- a task's transaction (no Spark) ----------------------------------------------------------
class TxnProducer:
    """Records the transactional calls; every send's handle is done at once."""

    def __init__(self, fail_at=None) -> None:
        self.calls, self.sent, self.fail_at = [], 0, fail_at

    def init_transactions(self, timeout=None):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def partitions_for(self, topic):
        return 1

    def send(self, topic, value, key=None, headers=None, partition=None):
        if self.sent == self.fail_at:
            raise ProducerFencedError("fenced")
        self.sent += 1
        return Handle((object(), self.sent))

    def flush(self, timeout):
        self.calls.append("flush")

    def commit_transaction(self, timeout=None):
        self.calls.append("commit")

    def abort_transaction(self, timeout=None):
        self.calls.append("abort")

    def close(self, timeout=None):
        self.calls.append("close")


class Handle(tuple):
    topic, partition = "t", 0

    def done(self):
        return True

    def exception(self, timeout=None):
        return None


TXN = SinkConfig("h:1", "t", {}, "q", None)


def test_a_task_writes_in_one_transaction_and_aborts_on_a_failure():
    batch = pa.record_batch({"value": pa.array([b"a", b"b"])})
    fake = TxnProducer()
    writer = TaskWriter(TXN, lambda c: fake, task_id=4)
    writer.write(batch)
    writer.write(batch)
    assert writer.finish()["rows"] == 4
    writer.close(True)
    assert fake.calls == ["init", "begin", "flush", "commit", "close"]
    fake = TxnProducer(fail_at=3)
    writer = TaskWriter(TXN, lambda c: fake, task_id=4)
    writer.write(batch)
    with pytest.raises(SparkSinkError, match="row 1 of an Arrow batch of 2: PRODUCER_FENCED"):
        writer.write(batch)
    writer.close(False)
    assert fake.calls == ["init", "begin", "abort", "close"]
    empty = TaskWriter(TXN, lambda c: TxnProducer(), task_id=0)
    assert empty.finish()["rows"] == 0  # no row: no producer, no transaction
    empty.close(True)


# -- in Spark, with a real broker -------------------------------------------------------------
def read(bootstrap: str, topic: str, partitions: int, isolation: str, n: int) -> list:
    """The values of ``topic`` read from the start in ``isolation`` (exactly ``n``, or fails)."""
    with Consumer(bootstrap, auto_offset_reset="earliest", isolation_level=isolation,
                  **FAST) as c:
        c.assign([(topic, p) for p in range(partitions)])
        got = consume(c, n)
        assert not c.poll(0.3), "more records than expected"
    assert len(got) == n, f"read {len(got)} of {n} records ({isolation})"
    return [r.value for r in got]


def writer(df, bootstrap: str, prefix: str, **options):
    w = (df.write.format("logbroker").mode("append").option("bootstrap", bootstrap)
         .option("transactional", "true").option("transactional_id_prefix", prefix))
    for name, value in {**FAST, **options}.items():
        w = w.option(name, str(value))
    return w


@pytest.mark.spark
@NEEDS_JAVA
def test_a_transactional_write_is_read_back_read_committed(spark, module_broker):
    bs = module_broker.bootstrap
    with Admin(bs, **FAST) as admin:
        admin.create_topic("sink-txn", 2)
        df = spark.createDataFrame([(b"k%d" % i, b"v%d" % i) for i in range(40)],
                                   "key binary, value binary")  # local[2]: two tasks
        writer(df, bs, "q-ok", topic="sink-txn").save()
        states = admin.describe_transactions(["q-ok-0", "q-ok-1"])
    assert {tid: d.state in ("PrepareCommit", "CompleteCommit") for tid, d in states.items()} \
        == {"q-ok-0": True, "q-ok-1": True}  # one transaction per task, committed
    expected = sorted(b"v%d" % i for i in range(40))
    assert sorted(read(bs, "sink-txn", 2, "read_committed", 40)) == expected
    rows = (spark.read.format("logbroker").option("bootstrap", bs).option("subscribe", "sink-txn")
            .option("engine", "python")
            .option("kafka.isolation.level", "read_committed").load().select("value").collect())
    assert sorted(bytes(r.value) for r in rows) == expected  # the markers are never rows


@pytest.mark.spark
@NEEDS_JAVA
def test_a_task_failing_mid_write_leaves_nothing_for_read_committed_readers(spark, module_broker):
    """The task's last rows name a topic that does not exist (auto-creation off): the
    task has sent its first Arrow batches when it fails on that one (after
    ``max_block_ms``, while the first records are acknowledged)."""
    bs = module_broker.bootstrap
    with Admin(bs, **FAST) as admin:
        admin.create_topic("sink-txn-fail", 1)
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    before = spark.conf.get(key)
    spark.conf.set(key, "100")  # the task gets batches of 100 rows
    try:
        rows = [(b"v%d" % i, "sink-txn-fail" if i < 250 else "sink-txn-missing") for i in range(300)]
        df = spark.createDataFrame(rows, "value binary, topic string").coalesce(1)
        with pytest.raises(Exception) as e:
            writer(df, bs, "q-fail", auto_create_topics="false", max_block_ms=1000).save()
        assert "topic 'sink-txn-missing': UNKNOWN_TOPIC_OR_PARTITION" in str(e.value), \
            str(e.value)[-3000:]
    finally:
        spark.conf.set(key, before)
    aborted = read(bs, "sink-txn-fail", 1, "read_uncommitted", 200)  # the first two batches
    assert aborted == [b"v%d" % i for i in range(200)]
    assert read(bs, "sink-txn-fail", 1, "read_committed", 0) == []
    # the query again with the same prefix: its task fences the failed attempt's id, commits
    again = spark.createDataFrame([(b"again",)], "value binary").coalesce(1)
    writer(again, bs, "q-fail", topic="sink-txn-fail").save()
    assert read(bs, "sink-txn-fail", 1, "read_committed", 1) == [b"again"]
