"""The clients against a fake multi-broker cluster (test_client_routing_fake.py):
requests go to each partition's leader, one request per broker; leader
changes, lost brokers and routing errors are retried after a metadata
refresh without duplicates or reordering; refreshes are paced; the bootstrap
list is walked past dead brokers; the asyncio twins do the same."""

from __future__ import annotations

import asyncio
import time

import pytest

from fixtures import FAST, closed_port, consume, wait_until
from logbroker import Admin, Consumer, Producer, aio
from logbroker.errors import (ClusterUnavailableError, LeaderNotAvailableError,
                              NotEnoughReplicasAfterAppendError, NotEnoughReplicasError,
                              NotLeaderError, RequestTimedOutError)
from logbroker.protocol import messages as m
from test_client_routing_fake import FakeCluster

FAST_RETRY = dict(FAST, retry_backoff_ms=20)


@pytest.fixture
def fc():
    with FakeCluster(3) as cluster:
        cluster.create("t", 3)  # partition p led by broker p
        yield cluster


def by_broker(sent) -> dict:
    """{broker: set of partitions it got requests for}."""
    out: dict = {}
    for broker, parts in sent:
        out.setdefault(broker, set()).update(p for _, p in parts)
    return out


def test_producer_sends_each_partition_to_its_leader_one_request_per_broker(fc):
    with Producer(fc.bootstrap(1), linger_ms=50, **FAST) as p:  # one broker named: the rest found
        handles = [p.send("t", b"%d" % i, partition=i % 3) for i in range(300)]
        p.flush()
        assert [h.result(10).offset for h in handles] == [i // 3 for i in range(300)]
    assert by_broker(fc.sent(m.Produce)) == {0: {0}, 1: {1}, 2: {2}}
    for part in range(3):
        assert fc.values("t", part) == [b"%d" % i for i in range(part, 300, 3)]


@pytest.mark.parametrize("error", [NotLeaderError, NotEnoughReplicasError])
def test_a_routing_error_refreshes_the_metadata_and_resends(fc, error):
    with Producer(fc.bootstrap(0), **FAST_RETRY) as p:
        p.partitions_for("t")  # partition 0 is led by broker 0
        refreshes = p._core.router.refreshes
        if error is NotLeaderError:
            fc.move(("t", 0), 2)  # the client does not know: broker 0 answers NOT_LEADER
        else:
            fc.fail(0, m.Produce, error.code)  # broker 0 refuses once, nothing written
        assert p.send("t", b"x", partition=0).result(10).offset == 0
        assert p._core.router.refreshes > refreshes
    assert fc.values("t", 0) == [b"x"]
    assert [b for b, _ in fc.sent(m.Produce)] == ([0, 2] if error is NotLeaderError else [0, 0])


def test_written_but_unacknowledged_batches_are_deduplicated_at_the_new_leader(fc):
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND: the old leader wrote the batch; the
    retry carries the same producer id and sequence to the new leader, which
    answers with the original offset."""
    with Producer(fc.bootstrap(), **FAST_RETRY) as p:
        assert p.send("t", b"a", partition=0).result(10).offset == 0
        fc.fail(0, m.Produce, NotEnoughReplicasAfterAppendError.code, written=True)
        handle = p.send("t", b"b", partition=0)
        wait_until(lambda: fc.values("t", 0) == [b"a", b"b"], 10, "the written batch")
        fc.move(("t", 0), 1)
        assert handle.result(10).offset == 1
        assert p.send("t", b"c", partition=0).result(10).offset == 2
    assert fc.values("t", 0) == [b"a", b"b", b"c"]
    produced = [b for b, parts in fc.sent(m.Produce) if ("t", 0) in parts]
    assert produced[-2:] == [1, 1]  # the retry and the next record went to the new leader


def test_leader_moves_under_load_keep_order_and_lose_or_duplicate_nothing(fc):
    n = 6_000
    with Producer(fc.bootstrap(), batch_size=2_000, **FAST_RETRY) as p:
        handles = []
        for i in range(n):
            handles.append(p.send("t", b"%d" % i, partition=i % 3))
            if i in (1_500, 3_000, 4_500):
                for part in range(3):
                    fc.move(("t", part), (part + i // 1_500) % 3)
        p.flush(30)
        offsets = [h.result(10).offset for h in handles]
    for part in range(3):
        assert offsets[part::3] == list(range(n // 3))
        assert fc.values("t", part) == [b"%d" % i for i in range(part, n, 3)]


def test_a_dead_leader_is_left_for_the_new_one(fc):
    with Producer(fc.bootstrap(), **FAST_RETRY) as p, \
            Consumer(fc.bootstrap(), auto_offset_reset="earliest", **FAST) as c:
        c.assign([("t", 0), ("t", 1)])
        assert p.send("t", b"before", partition=0).result(10).offset == 0
        assert [r.value for r in consume(c, 1)] == [b"before"]
        fc.kill(0)
        handle = p.send("t", b"after", partition=0)  # the connection is gone: refresh, wait
        time.sleep(0.3)
        fc.move(("t", 0), 2)  # what the controller does once broker 0's lease expires
        assert handle.result(10).offset == 1
        assert [r.value for r in consume(c, 1)] == [b"after"]
    assert fc.values("t", 0) == [b"before", b"after"]


def test_consumer_fetches_from_every_leader_and_follows_a_move(fc):
    with Producer(fc.bootstrap(), **FAST) as p:
        for i in range(30):
            p.send("t", b"%d" % i, partition=i % 3)
    with Consumer(fc.bootstrap(2), auto_offset_reset="earliest", **FAST) as c:
        c.assign([("t", part) for part in range(3)])
        assert len(consume(c, 30)) == 30
        assert by_broker(fc.sent(m.Fetch)) == {0: {0}, 1: {1}, 2: {2}}
        assert by_broker(fc.sent(m.ListOffsets)) == {0: {0}, 1: {1}, 2: {2}}
        fc.move(("t", 1), 0)
        with Producer(fc.bootstrap(), **FAST) as p:
            p.send("t", b"moved", partition=1).result(10)
        assert [r.value for r in consume(c, 1)] == [b"moved"]
    assert 1 in by_broker([s for s in fc.sent(m.Fetch) if s[0] == 0])[0]


def test_consumer_position_waits_out_an_election(fc):
    fc.move(("t", 0), -1)
    with Consumer(fc.bootstrap(), auto_offset_reset="earliest", **FAST) as c:
        c.assign([("t", 0)])
        fc.loop.call_later(0.5, lambda: fc.state[("t", 0)].__setitem__(0, 1))  # elected
        assert c.position("t", 0) == 0


def test_admin_list_offsets_asks_each_leader_and_follows_a_move(fc):
    with Admin(fc.bootstrap(0), **FAST) as a:
        assert set(a.list_offsets("t")) == {("t", 0), ("t", 1), ("t", 2)}
        assert by_broker(fc.sent(m.ListOffsets)) == {0: {0}, 1: {1}, 2: {2}}
        fc.move(("t", 2), 1)
        assert a.list_offsets([("t", 2)])[("t", 2)].offset == 0
        fc.move(("t", 2), -1)  # no leader: retried until the request's deadline
    with Admin(fc.bootstrap(0), request_timeout_ms=600, connect_timeout_ms=600) as a:
        t = time.monotonic()
        with pytest.raises(LeaderNotAvailableError, match=r"t\[2\]"):
            a.list_offsets([("t", 2)])
        assert time.monotonic() - t < 3


def test_refreshes_are_paced_while_a_partition_has_no_leader(fc):
    fc.move(("t", 0), -1)
    with Producer(fc.bootstrap(), **FAST_RETRY) as p:
        handle = p.send("t", b"waits", partition=0)
        router = p._core.router
        start = router.refreshes
        time.sleep(1.0)
        assert 2 <= router.refreshes - start <= 12  # 50 ms doubling to 1 s, jittered
        assert not handle.done()
        fc.move(("t", 0), 1)
        assert handle.result(10).offset == 0


def test_no_leader_until_the_delivery_timeout_fails_the_record(fc):
    fc.move(("t", 0), -1)
    with Producer(fc.bootstrap(), delivery_timeout_ms=500, **FAST_RETRY) as p:
        handle = p.send("t", b"never", partition=0)
        with pytest.raises(RequestTimedOutError, match="delivery_timeout_ms"):
            handle.result(10)


def test_bootstrap_walks_past_dead_brokers(fc):
    dead = f"127.0.0.1:{closed_port()}"
    with Producer(f"{dead},{fc.bootstrap(1)}", **FAST) as p:
        assert p.send("t", b"x", partition=2).result(10).offset == 0
    with Admin(f"{dead},{fc.bootstrap(2)}", **FAST) as a:
        assert a.list_topics() == {"t": 3}
    fc.kill(1)
    with Admin(fc.bootstrap(1, 0), **FAST) as a:  # the first named broker is down
        assert [b.live for b in a.describe_cluster().brokers] == [True, False, True]


def test_control_requests_fail_over_to_another_live_broker(fc):
    with Admin(fc.bootstrap(0), **FAST) as a:
        assert a.list_topics() == {"t": 3}  # learns brokers 1 and 2
        fc.kill(0)
        assert a.list_topics() == {"t": 3}
        a.commit_offsets("g", {("t", 1): 5})
        assert a.fetch_offsets("g", [("t", 1)])[("t", 1)].offset == 5


def test_a_broker_cut_off_from_etcd_is_left_for_another(fc):
    fc.fail(0, m.Metadata, ClusterUnavailableError.code, times=1_000)
    with Admin(fc.bootstrap(0, 1), **FAST) as a:
        t = time.monotonic()
        assert a.list_topics() == {"t": 3}
        assert time.monotonic() - t < 2
    assert [b for b, _ in fc.sent(m.Metadata)][:2] == [0, 1]


def test_describe_cluster_and_elect_leaders(fc):
    fc.move(("t", 0), 1)
    with Admin(fc.bootstrap(), **FAST) as a:
        desc = a.describe_cluster()
        assert (desc.cluster, desc.controller, len(desc.brokers)) == ("fake", 0, 3)
        p0 = desc.partitions[0]
        assert (p0.leader, p0.leader_epoch, p0.replicas, p0.preferred_leader) == (1, 1, (0, 1, 2), 0)
        results = a.elect_leaders(["t"])
        assert results[("t", 0)].leader == 0 and results[("t", 0)].error is None
        assert a.describe_cluster(["t"]).partitions[0].leader == 0
        assert a.create_topic("r", 2, replication_factor=3, configs={"min_insync_replicas": 2})
        assert fc.configs["r"] == {"min_insync_replicas": 2, "replication_factor": 3}


def test_describe_topics_takes_each_partition_from_its_leader(fc):
    with Producer(fc.bootstrap(), **FAST) as p:
        for i in range(6):
            p.send("t", b"%d" % i, partition=i % 3 if i < 5 else 2).result(10)
    fc.move(("t", 1), -1)  # no leader: the first broker's answer (an error) stays
    with Admin(fc.bootstrap(0), **FAST) as a:
        parts = a.describe_topics(["t"])["t"].partitions
    assert [(pi.leader, pi.log_end, pi.error) for pi in parts] == [(0, 2, 0), (-1, -1, 6),
                                                                    (2, 2, 0)]
    asked = [b for b, name, _ in fc.requests if name == "DescribeTopics"]
    assert sorted(asked) == [0, 2]  # any broker (0), then the other leader (2)


def test_asyncio_clients_route_and_follow_a_move(fc):
    async def main():
        async with aio.Producer(fc.bootstrap(2), **FAST_RETRY) as p:
            metas = [await p.send_and_wait("t", b"%d" % i, partition=i % 3) for i in range(6)]
            assert [md.offset for md in metas] == [0, 0, 0, 1, 1, 1]
            fc.move(("t", 0), 1)
            assert (await p.send_and_wait("t", b"moved", partition=0)).offset == 2
        async with aio.Consumer(fc.bootstrap(1), auto_offset_reset="earliest", **FAST) as c:
            c.assign([("t", 0)])
            got = []
            while len(got) < 3:
                got += await c.poll(1.0)
            assert [r.value for r in got] == [b"0", b"3", b"moved"]
        async with aio.Admin(fc.bootstrap(0), **FAST) as a:
            assert (await a.describe_cluster(["t"])).partitions[0].leader == 1

    asyncio.run(asyncio.wait_for(main(), 60))
    assert by_broker(fc.sent(m.Produce)) == {0: {0}, 1: {0, 1}, 2: {2}}
