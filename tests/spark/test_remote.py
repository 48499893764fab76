"""The Spark source's ``bootstrap`` mode without Spark: planning over the
protocol (RemotePlanner) and a task's fetches (fetch_batches) against real
brokers, a leader killed mid-read included."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

from tests.support.fixtures import FAST, T0, consume  # noqa: E402
from logbroker import Consumer, Producer  # noqa: E402
from logbroker.spark import remote_read as remote
from logbroker.spark.options import SparkSourceError, parse_options  # noqa: E402
from logbroker.spark.planners import make_planner  # noqa: E402

SHARE_BROKER = True  # one broker for the module's broker tests (conftest's): topics of their own


def _produce(bootstrap: str, topic: str, partitions: int, per: int, batch: int = 25) -> None:
    """``per`` records per partition, in batches of ``batch`` (each waited for)."""
    from logbroker import Admin

    with Admin(bootstrap, **FAST) as admin:
        admin.create_topic(topic, partitions, exist_ok=True)
    with Producer(bootstrap, **FAST) as p:
        for first in range(0, per, batch):
            handles = [p.send(topic, b"v-%d-%d" % (part, i), key=b"k%d" % (i % 5),
                              headers=[("n", b"%d" % i)], partition=part, timestamp_ms=T0 + i * 10)
                       for i in range(first, min(per, first + batch)) for part in range(partitions)]
            for h in handles:
                h.result(timeout=30)


def _plan(**options) -> list:
    planner = make_planner(parse_options(options))
    try:
        return planner.plan()
    finally:
        planner.close()


def _records(splits) -> list[tuple]:
    out = []
    for split in splits:
        for header, batch in remote.fetch_batches(split):
            for rec in batch.records():
                if split.start <= rec.offset < split.end:
                    out.append((split.partition, rec.offset, rec.key, rec.value,
                                tuple((k, v) for k, v in rec.headers)))
    return sorted(out)


def test_bootstrap_plan_and_fetch_return_what_a_consumer_reads(broker):
    _produce(broker.bootstrap, "fetched", 2, 150)
    splits = _plan(bootstrap=broker.bootstrap, subscribe="fetched")
    assert [(s.partition, s.start, s.end, s.bootstrap) for s in splits] == \
        [(0, 0, 150, broker.bootstrap), (1, 0, 150, broker.bootstrap)]
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("fetched", 0), ("fetched", 1)])
        want = sorted((r.partition, r.offset, r.key, r.value, tuple(r.headers))
                      for r in consume(c, 300))
    assert len(want) == 300 and _records(splits) == want


def test_bootstrap_ranges_timestamps_and_min_partitions(broker):
    _produce(broker.bootstrap, "ranged", 1, 100)
    splits = _plan(bootstrap=broker.bootstrap, subscribe="ranged",
                   startingOffsets='{"ranged":{"0":10}}', endingOffsets='{"ranged":{"0":60}}',
                   minPartitions="3")
    assert len(splits) == 3 and (splits[0].start, splits[-1].end) == (10, 60)
    assert [r[1] for r in _records(splits)] == list(range(10, 60))
    by_time = _plan(bootstrap=broker.bootstrap, subscribe="ranged",
                    startingTimestamp=str(T0 + 455), endingTimestamp=str(T0 + 500))
    assert [(s.start, s.end) for s in by_time] == [(46, 50)]


def test_bootstrap_option_errors(broker, tmp_path):
    with pytest.raises(SparkSourceError, match="exactly one of"):
        parse_options({"subscribe": "t"})
    with pytest.raises(SparkSourceError, match="exactly one of"):
        parse_options({"path": str(tmp_path), "bootstrap": broker.bootstrap, "subscribe": "t"})
    with pytest.raises(SparkSourceError, match="unknown topic"):
        _plan(bootstrap=broker.bootstrap, subscribe="missing")


def test_leader_killed_mid_read_the_read_completes_with_the_right_records(cluster, monkeypatch):
    cluster.create("orders", 1, replication_factor=3, min_insync_replicas=2)
    _produce(cluster.bootstrap, "orders", 1, 400)
    splits = _plan(bootstrap=cluster.bootstrap, subscribe="orders")
    assert [(s.start, s.end) for s in splits] == [(0, 400)]
    monkeypatch.setattr(remote, "FETCH_BYTES", 2048)  # many fetches: the kill lands mid-read
    leader = cluster.state("orders", 0)[0]
    got, after_kill = [], 0
    for header, batch in remote.fetch_batches(splits[0]):
        got += [(r.offset, r.value) for r in batch.records()]
        if cluster.brokers[leader].alive():
            cluster.brokers[leader].kill()
        else:
            after_kill += 1
    assert after_kill >= 10  # the batches after the first came from the new leader
    assert cluster.state("orders", 0)[0] not in (leader, -1)
    assert got == [(i, b"v-0-%d" % i) for i in range(400)]


@pytest.mark.spark
def test_spark_reads_a_cluster_topic_the_same_by_bootstrap_and_by_path(spark, cluster):
    cluster.create("orders", 2, replication_factor=3, min_insync_replicas=2)
    _produce(cluster.bootstrap, "orders", 2, 120, batch=40)
    cols = "partition, offset, key, value, headers, timestamp"

    def rows(**options):
        df = spark.read.format("logbroker").options(subscribe="orders", includeHeaders="true",
                                                    **options).load()
        return sorted(tuple(r) for r in df.selectExpr(*cols.split(", ")).collect())

    remote_rows = rows(bootstrap=cluster.bootstrap)
    streamed = spark.readStream.format("logbroker").options(
        bootstrap=cluster.bootstrap, subscribe="orders", startingOffsets="earliest").load()
    query = streamed.writeStream.format("memory").queryName("cluster_stream") \
        .trigger(availableNow=True).start()
    try:
        assert query.awaitTermination(120), "the AvailableNow query did not end within 120 s"
        stream_count = spark.sql("select count(*) as n from cluster_stream").first().n
    finally:
        query.stop()
    leader = cluster.state("orders", 0)[0]
    assert cluster.brokers[leader].stop() == 0  # a clean stop checkpoints its high watermark
    local_rows = rows(path=cluster.brokers[leader].data_dir)
    assert len(remote_rows) == 240 and stream_count == 240
    assert remote_rows == local_rows


def test_a_bootstrap_stream_keeps_one_client_and_pickles_without_it(broker):
    import pickle

    from logbroker.spark.stream import LogbrokerStreamReader

    _produce(broker.bootstrap, "streamed", 2, 10)
    r = LogbrokerStreamReader({"bootstrap": broker.bootstrap, "subscribe": "streamed",
                               "startingOffsets": "earliest"})
    start = r.initialOffset()
    assert start == {"streamed": {"0": 0, "1": 0}}
    end = r.latestOffset(start, r.getDefaultReadLimit())
    assert end == {"streamed": {"0": 10, "1": 10}}
    client = r._remote.admin
    _produce(broker.bootstrap, "streamed", 2, 5)  # live high watermarks: no checkpoint to wait for
    later = r.latestOffset(end, r.getDefaultReadLimit())
    assert later == {"streamed": {"0": 15, "1": 15}} and r._remote.admin is client
    splits = [p.split for p in r.partitions(end, later)]
    assert [(s.partition, s.start, s.end) for s in splits] == [(0, 10, 15), (1, 10, 15)]
    task_copy = pickle.loads(pickle.dumps(r))
    assert task_copy._remote is None and task_copy.options.bootstrap == broker.bootstrap
    assert len(_records(splits)) == 10
    r.stop()
    assert r._remote is None
