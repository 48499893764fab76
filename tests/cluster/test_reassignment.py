"""Unit tests of partition reassignment's pure rules (cluster/reassignment.py),
its state in etcd (state.py, checks.py) and the reassignment throttle
(cluster/replication_throttle.py)."""

from __future__ import annotations

import pytest

from logbroker.cluster import reassignment as ra
from logbroker.cluster.checks import BadValue
from logbroker.cluster.replication_throttle import Throttle
from logbroker.cluster.state import NO_LEADER, PartitionState, pack, partition_from, partition_value
from logbroker.errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError

LIVE = {1, 2, 3, 4}


def st(replicas, leader, isr, epoch=3, adding=(), removing=()):
    return PartitionState("t", 0, tuple(replicas), leader, tuple(isr), epoch, 7, tuple(adding),
                          tuple(removing))


def test_a_move_adds_the_targets_first_and_keeps_the_leader_until_they_are_in_sync():
    new = ra.start(st((1, 2), 1, (1, 2)), (2, 3), LIVE)
    assert (new.replicas, new.adding, new.removing) == ((2, 3, 1), (3,), (1,))
    assert (new.leader, new.leader_epoch, new.isr, new.target) == (1, 3, (1, 2), (2, 3))
    assert ra.advance(new, LIVE) is None  # 3 not in sync yet
    done = ra.advance(new.with_(isr=(1, 2, 3)), LIVE)
    assert (done.replicas, done.isr, done.adding, done.removing) == ((2, 3), (2, 3), (), ())
    assert (done.leader, done.leader_epoch) == (2, 4)  # the first target in sync, a new epoch


def test_a_finished_move_whose_leader_stays_keeps_its_epoch():
    new = ra.start(st((1, 2, 3), 2, (1, 2, 3)), (2, 4), LIVE)
    done = ra.advance(new.with_(isr=(1, 2, 3, 4)), LIVE)
    assert (done.replicas, done.leader, done.leader_epoch, done.isr) == ((2, 4), 2, 3, (2, 4))


def test_the_new_leader_must_be_alive_else_the_move_waits():
    moving = ra.start(st((1,), 1, (1,)), (2, 3), LIVE).with_(isr=(1, 2, 3))
    assert ra.advance(moving, {1, 3}).leader == 3
    assert ra.advance(moving, {1}) is None


def test_cancel_reverts_to_the_original_replicas_and_a_new_target_replaces_a_move():
    moving = ra.start(st((1, 2), 1, (1, 2)), (3, 4), LIVE).with_(isr=(1, 2, 3))
    back = ra.cancel(moving, LIVE)
    assert (back.replicas, back.isr, back.leader, back.reassigning) == ((1, 2), (1, 2), 1, False)
    again = ra.start(moving, (4, 2), LIVE)  # planned from the original [1, 2]: 3 leaves at once
    assert (again.replicas, again.adding, again.removing, again.isr) \
        == ((4, 2, 1), (4,), (1,), (1, 2))
    with pytest.raises(NoReassignmentInProgressError):
        ra.cancel(st((1, 2), 1, (1, 2)), LIVE)


def test_a_target_equal_to_the_replicas_moves_nothing():
    same = st((1, 2), 1, (1, 2))
    assert ra.start(same, (1, 2), LIVE) == same


@pytest.mark.parametrize("target", [(), (1, 1), (1, 9), tuple(range(1, 70))])
def test_bad_targets_are_invalid_replica_assignments(target):
    with pytest.raises(InvalidReplicaAssignmentError):
        ra.check_target(target, set(range(1, 80)) - {9})


def test_the_state_round_trips_through_etcd_and_bad_moves_are_refused():
    moving = ra.start(st((1, 2), 1, (1, 2)), (2, 3), LIVE)
    assert partition_from("t", 0, partition_value(moving), 7) == moving
    plain = st((1, 2), 1, (1, 2))
    assert b"adding" not in partition_value(plain)  # older brokers' values, byte for byte
    assert partition_from("t", 0, partition_value(plain), 7) == plain
    base = {"replicas": [1, 2], "leader": 1, "isr": [1, 2], "leader_epoch": 0}
    for bad in ({"adding": [3]}, {"adding": [1], "removing": [1]}, {"removing": [1, 2]},
                {"adding": [1, 1]}, {"removing": "1"}):
        with pytest.raises(BadValue):
            partition_from("t", 0, pack({**base, **bad}), 1)


def test_the_throttle_lets_through_about_its_rate():
    t = Throttle(1000)
    now, fetched = 100.0, 0
    while now < 110.0:  # ten seconds of fetches every 10 ms
        if t.ready(now):
            n = t.cap(1 << 20)
            t.spend(n, now)
            fetched += n
        now += 0.01
    assert 9_000 <= fetched <= 12_000
    assert t.wait(now) > 0 or t.ready(now)
    free = Throttle(0)
    assert free.ready(0) and free.cap(123) == 123 and free.wait(0) == 0


def test_the_view_indexes_moving_partitions_and_counts_each_brokers_replicas():
    from logbroker.cluster.etcd import Event
    from logbroker.cluster.state import Keys, TopicState, topic_value
    from logbroker.cluster.view import ClusterView

    keys = Keys("c")
    view = ClusterView(keys)
    view.apply(Event(keys.topic("t"), topic_value(TopicState("t", 2, 2)), 1))
    for p in range(2):
        view.apply(Event(keys.partition("t", p), partition_value(st((1, 2), 1, (1, 2))), 2 + p))
    assert (view.moving, view.held[1], view.held[2], view.held[3]) == (set(), 2, 2, 0)
    moving = ra.start(st((1, 2), 1, (1, 2)), (2, 3), LIVE)
    view.apply(Event(keys.partition("t", 0), partition_value(moving), 5))
    assert (view.moving, view.held[1], view.held[3]) == ({("t", 0)}, 2, 1)
    done = ra.advance(moving.with_(isr=(1, 2, 3)), LIVE)
    view.apply(Event(keys.partition("t", 0), partition_value(done), 6))
    assert (view.moving, view.held[1], view.held[3]) == (set(), 1, 1)
    view.apply(Event(keys.partition("t", 1), None, 7))
    assert (view.held[1], view.held[2]) == (0, 1)


def test_unclean_election_never_picks_a_replica_a_move_is_adding():
    from logbroker.cluster.placement import elect

    moving = ra.start(st((1, 2), 1, (1,)), (3, 2), LIVE)  # 3 adding, 2 out of sync
    assert elect(moving, {3, 2}, unclean=True) == 2
    assert elect(moving, {3}, unclean=True) == NO_LEADER


def test_the_throttle_setting_is_checked():
    from logbroker.broker.config import BrokerConfig
    from logbroker.errors import InvalidConfigError

    assert BrokerConfig(data_dir="/nonexistent").reassignment_throttle_bytes_per_s == 0
    for bad in (-1, 1.5, "fast"):
        with pytest.raises(InvalidConfigError, match="reassignment_throttle_bytes_per_s"):
            BrokerConfig(data_dir="/nonexistent", reassignment_throttle_bytes_per_s=bad)
