"""Spark reads transactions as Kafka's consumers do (issue 31): control
batches (markers) are never rows, in either isolation; with
``kafka.isolation.level`` read_committed, aborted transactions' records are
left out and reading stops at the last stable offset. Both engines over a
data dir written through the storage API (our format's transactional
batches, the broker's Kafka control batches), the pure filter alone, and a
bootstrap read (Python engine) of a live broker."""

from __future__ import annotations

import os
import shutil

import pytest

from logbroker.records import build_batch
from logbroker.records import format as fmt
from logbroker.records.txn_filter import BatchFilter
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

T0 = 1_700_000_000_000


def txn_batch(values, pid: int, epoch: int = 0, seq: int = 0) -> bytes:
    return build_batch([(v, None, (), T0 + i) for i, v in enumerate(values)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=True)


def write_log(path) -> dict:
    """One partition of topic ``tx``: plain records, committed and aborted
    transactions of two producers interleaved, and one left open. Returns
    the values each isolation must read."""
    store = Store.open(str(path), StorageConfig(log=LogConfig(segment_bytes=600), map_size=64 << 20))
    store.create_topic("tx", 1)
    lg = store.get_log("tx", 0)
    lg.append([build_batch([(b"plain-0", None, (), T0)])])
    lg.append([txn_batch([b"a1", b"a2"], pid=7)])                    # 7: committed
    lg.append([txn_batch([b"b1"], pid=8)])                           # 8: aborted
    lg.append([txn_batch([b"a3"], pid=7, seq=2)])
    lg.append_marker(7, 0, True, 0, 0)
    lg.append([build_batch([(b"plain-1", None, (), T0)])])
    lg.append([txn_batch([b"b2", b"b3"], pid=8, seq=1)])
    lg.append_marker(8, 0, False, 0, 0)
    lg.append([txn_batch([b"c1"], pid=9)])                           # 9: committed later
    lg.append([build_batch([(b"plain-2", None, (), T0)])])           # below 9's marker: unstable
    lg.append_marker(9, 0, True, 0, 0)
    lg.append([txn_batch([b"d1"], pid=10)])                          # 10: open at the end
    lg.append([build_batch([(b"plain-3", None, (), T0)])])
    lg.flush()
    store.close()
    every = [b"plain-0", b"a1", b"a2", b"b1", b"a3", b"plain-1", b"b2", b"b3", b"c1", b"plain-2",
             b"d1", b"plain-3"]
    committed = [b"plain-0", b"a1", b"a2", b"a3", b"plain-1", b"c1", b"plain-2"]
    return {"read_uncommitted": every, "read_committed": committed}


def test_the_filter_follows_kafkas_rule_batch_by_batch():
    def h(pid, base, count=1, transactional=True, control=False):
        attrs = (fmt.TRANSACTIONAL if transactional else 0) | (fmt.CONTROL if control else 0)
        return fmt.BatchHeader(base, 60, 0, 1, 0, attrs, count - 1, T0, T0, pid, 0, 0, count)

    f = BatchFilter([(8, 3)])
    seen = [f.skip_header(h(7, 1, 2)), f.skip_header(h(8, 3)),
            f.skip_header(h(-1, 4, transactional=False)), f.skip_header(h(7, 5, control=True)),
            f.skip_header(h(8, 6, 2)), f.skip_header(h(8, 8, control=True)), f.skip_header(h(8, 9))]
    assert seen == [False, True, False, True, True, True, False]
    late = BatchFilter(())
    assert not late.skip_header(h(5, 10))
    late.extend([(5, 12), (5, 12)])  # a Fetch answer brings it; the same pair twice counts once
    assert late.skip_header(h(5, 12)) and late.skip_header(h(5, 13, control=True))
    assert not late.skip_header(h(5, 14))
    uncommitted = BatchFilter(None)  # read_uncommitted: markers only
    assert [uncommitted.skip_header(h(8, 3)), uncommitted.skip_header(h(8, 4, control=True))] \
        == [False, True]


@pytest.fixture(scope="module")
def txn_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("spark-txn") / "data"
    return str(path), write_log(path)


def read(spark, data, engine, isolation=None):
    r = spark.read.format("logbroker").option("path", data).option("engine", engine) \
        .option("subscribe", "tx")
    if isolation:
        r = r.option("kafka.isolation.level", isolation)
    df = r.load()
    return [bytes(row.value) for row in df.orderBy("offset").collect()], df.count()


ENGINES = ("python", "jvm")


@pytest.mark.spark
@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_leave_markers_and_aborted_records_out(spark, txn_dir, engine):
    from logbroker.spark import connector

    if engine == "jvm" and not connector.on_classpath(spark):
        if os.environ.get("LOGBROKER_JVM_REQUIRED") == "1" or not shutil.which("java"):
            pytest.fail(f"the JVM connector is required here: {connector.why_python()}")
        pytest.skip(connector.why_python())
    data, want = txn_dir
    for isolation in (None, "read_committed"):  # None: read_uncommitted, Spark's default
        values, count = read(spark, data, engine, isolation)
        assert values == want[isolation or "read_uncommitted"], (engine, isolation)
        assert count == len(values), (engine, isolation)  # COUNT (headers only on the JVM) agrees


@pytest.mark.spark
def test_an_unknown_isolation_level_is_refused_before_any_task(spark, txn_dir):
    data, _ = txn_dir
    with pytest.raises(Exception, match="kafka.isolation.level must be read_uncommitted or "
                                        "read_committed"):
        read(spark, data, "python", "serializable")
