"""Consumer groups on a real 3-broker cluster (real etcd): members share the
partitions and read every record exactly once; killing the group's
coordinator loses no committed offset and the group carries on through the
new coordinator (the leader of the group's offsets partition after failover).
"""

from __future__ import annotations

import pytest

from tests.support.fixtures import FAST, wait_until
from tests.support.cluster import Cluster
from logbroker import Admin, Producer
from logbroker.coordinator.records import TOPIC, partition_for
from logbroker.protocol import messages as m
from tests.support.consumer_group import Member, killed_member_resumes, spin

TOPIC_NAME, PARTITIONS = "orders", 6


@pytest.fixture
def gcluster(tmp_path, etcd):
    c = Cluster(tmp_path, etcd.url, config={"group_initial_rebalance_delay_ms": 300})
    try:
        yield c.start()
    finally:
        c.close()


def produce(bootstrap: str, start: int, count: int) -> None:
    with Producer(bootstrap, acks="all", linger_ms=2, **FAST) as p:
        handles = [p.send(TOPIC_NAME, str(i).encode(), key=str(i).encode())
                   for i in range(start, start + count)]
        for h in handles:
            h.result(timeout=30)


def coordinator_of(c: Cluster, group: str) -> int:
    def found():
        for i in c.live():
            r = c.call(i, m.FindCoordinator(group=group))
            if r.error == 0:
                return r.broker_id
        return None
    return wait_until(found, 20, "a coordinator")


def test_members_share_a_cluster_topic_and_survive_the_coordinator(gcluster):
    c = gcluster
    c.create(TOPIC_NAME, PARTITIONS, replication_factor=3)
    members = [Member(c.bootstrap, "billing", [TOPIC_NAME], session_timeout_ms=3_000,
                      enable_auto_commit=False) for _ in range(3)]
    try:
        spin(members, lambda: all(len(mb.owned()) == 2 for mb in members), 40,
             "each of 3 members owning 2 partitions")
        owned = [mb.owned() for mb in members]
        assert set().union(*owned) == {(TOPIC_NAME, p) for p in range(PARTITIONS)}
        produce(c.bootstrap, 0, 600)
        seen = lambda: sum(len(mb.records) for mb in members)  # noqa: E731
        spin(members, lambda: seen() >= 600, 60, "600 records read")
        values = [r.value for mb in members for r in mb.records]
        assert sorted(values) == sorted(str(i).encode() for i in range(600))  # exactly once
        for mb in members:
            mb.consumer.commit()
        with Admin(c.bootstrap, **FAST) as admin:
            acked = admin.fetch_offsets("billing")
        assert sum(o.offset for o in acked.values()) == 600

        co = coordinator_of(c, "billing")
        leaders = c.state(TOPIC, partition_for("billing", 16))
        assert leaders[0] == co  # the coordinator leads the group's offsets partition
        c.brokers[co].kill()
        new = wait_until(lambda: coordinator_of(c, "billing") != co and coordinator_of(c, "billing"),
                         30, "a new coordinator")
        live = ",".join(c.brokers[i].bootstrap for i in c.live())
        with Admin(live, **FAST) as admin:
            after = wait_until(lambda: _fetch(admin), 30, "offsets from the new coordinator")
        assert {tp: o.offset for tp, o in after.items()} == \
            {tp: o.offset for tp, o in acked.items()}  # no committed offset lost
        assert new != co

        # the group carries on: the new coordinator knows its members (restored
        # from the log) or they rejoin; records produced now are all read
        produce(live, 600, 120)
        spin(members, lambda: seen() >= 720, 60, "120 more records read after the failover")
        later = sorted(int(r.value) for mb in members for r in mb.records if int(r.value) >= 600)
        assert sorted(set(later)) == list(range(600, 720))
        for mb in members:
            mb.consumer.commit()
        with Admin(live, **FAST) as admin:
            assert sum(o.offset for o in admin.fetch_offsets("billing").values()) == 720
            desc = admin.describe_groups(["billing"])["billing"]
        assert desc.state == "Stable" and len(desc.members) == 3
    finally:
        for mb in members:
            mb.consumer.close()


def _fetch(admin):
    try:
        return admin.fetch_offsets("billing") or None
    except Exception:  # noqa: BLE001 - retried until the bounded wait ends
        return None


def test_no_acknowledged_commit_is_lost_when_the_coordinator_dies_mid_stream(gcluster):
    """Commits of rising offsets stream to the coordinator while it is killed:
    after failover the group's offset is at least the last acknowledged one
    (acks wait for the offsets partition's ISR), never an older value."""
    import threading

    c = gcluster
    c.create(TOPIC_NAME, 1, replication_factor=3)
    co = coordinator_of(c, "stream")
    acked, stop = [0], threading.Event()

    def commit_loop():
        with Admin(c.bootstrap, **{**FAST, "request_timeout_ms": 3_000}) as admin:
            offset = 0
            while not stop.is_set() and offset < 100_000:
                offset += 1
                try:
                    admin.commit_offsets("stream", {(TOPIC_NAME, 0): offset})
                    acked[0] = offset
                except Exception:  # noqa: BLE001 - refused or timed out: not acknowledged
                    pass

    worker = threading.Thread(target=commit_loop)
    worker.start()
    try:
        wait_until(lambda: acked[0] >= 50, 20, "50 commits acknowledged")
        c.brokers[co].kill()
        at_kill = acked[0]
        wait_until(lambda: acked[0] >= at_kill + 20, 30, "commits acknowledged by the new coordinator")
    finally:
        stop.set()
        worker.join(30)
    assert not worker.is_alive()
    live = ",".join(c.brokers[i].bootstrap for i in c.live())
    with Admin(live, **FAST) as admin:
        final = admin.fetch_offsets("stream")[(TOPIC_NAME, 0)].offset
    assert final >= acked[0]  # the last acknowledged commit survived (later ones may too)
    assert coordinator_of(c, "stream") != co


def test_a_killed_member_resumes_from_its_last_commit_on_a_cluster(gcluster):
    killed_member_resumes(gcluster.bootstrap)
