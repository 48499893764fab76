"""More group behaviour against a real single-node broker: the eager
assignors (range, roundrobin: every member revokes everything before a
rebalance), a member that stops polling for max_poll_interval_ms leaving
its partitions to the others, and offsets committed by an older version
(the LMDB table) carried into the offsets topic."""

from __future__ import annotations

import time

import pytest

from tests.support.fixtures import FAST, BrokerProcess, wait_until
from logbroker import Admin
from tests.support.consumer_group import Member, gbroker, produce, seen, spin, split_evenly  # noqa: F401


@pytest.mark.parametrize("assignor", ["range", "roundrobin"])
def test_an_eager_group_revokes_everything_then_splits_evenly(gbroker, assignor):  # noqa: F811
    b, topic, group = gbroker.bootstrap, f"eager-{assignor}", f"g-{assignor}"
    with Admin(b, **FAST) as admin:
        admin.create_topic(topic, 4)
    produce(b, topic, 25, 4)
    first = Member(b, group, [topic], partition_assignment_strategy=[assignor])
    members = [first]
    try:
        spin(members, lambda: len(first.owned()) == 4 and first.records, 15, "one member owning all")
        members.append(Member(b, group, [topic], partition_assignment_strategy=[assignor]))
        spin(members, lambda: split_evenly(members, 4) and len(seen(members)) >= 100, 15,
             "2 x 2 and every record read")
        # eager: the first member gave up all 4 before the split, not only 2
        revoked = [ps for kind, ps, _ in first.events if kind == "revoke"]
        assert revoked and set(revoked[0]) == {(topic, p) for p in range(4)}
        got = seen(members)
        assert sorted(set(got)) == [(p, o) for p in range(4) for o in range(25)]
        assert len(got) == len(set(got))  # revocations were committed: nothing read twice
        with Admin(b, **FAST) as admin:
            desc = admin.describe_groups([group])[group]
        assert desc.protocol == assignor and desc.state == "Stable"
    finally:
        for mb in members:
            mb.consumer.close()


def test_a_member_that_stops_polling_leaves_its_partitions(gbroker):  # noqa: F811
    b, topic, group = gbroker.bootstrap, "slow-poller", "g-slow"
    with Admin(b, **FAST) as admin:
        admin.create_topic(topic, 2)
    busy = Member(b, group, [topic], max_poll_interval_ms=1_500)
    idle = Member(b, group, [topic], max_poll_interval_ms=1_500)
    try:
        spin([busy, idle], lambda: split_evenly([busy, idle], 2), 15, "1 + 1")
        t0 = time.monotonic()
        # only `busy` polls now: `idle` exceeds max_poll_interval_ms and leaves
        spin([busy], lambda: len(busy.owned()) == 2, 15, "busy owning both")
        took = time.monotonic() - t0
        assert took >= 1.0, "a partition moved before max_poll_interval_ms passed"
        idle.poll()  # back: its partitions were lost and it rejoins
        assert any(kind == "lost" for kind, _, _ in idle.events)
        spin([busy, idle], lambda: split_evenly([busy, idle], 2), 15, "1 + 1 again")
    finally:
        busy.consumer.close()
        idle.consumer.close()


def test_offsets_of_an_older_version_move_into_the_offsets_topic(tmp_path):
    """A data dir whose offsets are in LMDB's groups table (before the
    coordinator): the first group request carries them into the log."""
    from logbroker.storage.groups import CommittedOffset
    from logbroker.storage.store import Store

    data = tmp_path / "data"
    with Store.open(str(data)) as store:
        store.create_topic("old", 2)
        store.groups.commit("legacy", {("old", 0): CommittedOffset(7, "m"), ("old", 1): 3})
    broker = BrokerProcess(data).start()
    try:
        with Admin(broker.bootstrap, **FAST) as admin:
            got = wait_until(lambda: admin.fetch_offsets("legacy") or None, 15, "offsets")
            assert {tp: (o.offset, o.metadata) for tp, o in got.items()} == \
                {("old", 0): (7, "m"), ("old", 1): (3, "")}
        broker.stop()
        with Store.open(str(data)) as store:
            assert store.groups.groups() == []  # moved, not copied
        broker.start()
        with Admin(broker.bootstrap, **FAST) as admin:  # read back from the log
            assert admin.fetch_offsets("legacy")[("old", 0)].offset == 7
    finally:
        broker.kill()
