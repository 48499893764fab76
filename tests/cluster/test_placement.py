"""Placement and election rules (pure functions of cluster/placement.py),
and the etcd value codecs of cluster/state.py."""

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from logbroker.cluster.placement import after_failure, assign, elect, preferred, repair
from logbroker.cluster.state import (NO_LEADER, BrokerInfo, Keys, PartitionState, TopicState,
                                     broker_from, broker_value, default_min_isr, partition_from,
                                     partition_value, topic_from, topic_value)
from logbroker.errors import InvalidReplicationFactorError


def ps(replicas, leader, isr, epoch=3, version=11):
    return PartitionState("t", 0, tuple(replicas), leader, tuple(isr), epoch, version)


def test_assign_balances_leaders_and_replicas():
    placed = assign(6, 3, [1, 2, 3])
    assert all(len(set(r)) == 3 for r in placed)
    assert Counter(r[0] for r in placed) == {1: 2, 2: 2, 3: 2}
    assert Counter(b for r in placed for b in r) == {1: 6, 2: 6, 3: 6}


def test_assign_takes_existing_load_into_account():
    existing = [ps((1, 2), 1, (1, 2)), ps((1, 3), 1, (1, 3))]
    placed = assign(2, 2, [1, 2, 3], existing)
    assert [r[0] for r in placed] == [2, 3]  # broker 1 already leads two


def test_one_partition_topic_has_one_leader_broker():
    (replicas,) = assign(1, 3, [5, 7, 9])
    assert len(replicas) == 3 and replicas[0] in (5, 7, 9)


@pytest.mark.parametrize("rf,live", [(0, [1]), (4, [1, 2, 3]), (1, [])])
def test_assign_refuses_impossible_replication(rf, live):
    with pytest.raises(InvalidReplicationFactorError):
        assign(1, rf, live)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.sets(st.integers(0, 20), min_size=1, max_size=7))
def test_assign_properties(partitions, rf, live):
    if rf > len(live):
        with pytest.raises(InvalidReplicationFactorError):
            assign(partitions, rf, live)
        return
    placed = assign(partitions, rf, live)
    assert len(placed) == partitions
    assert all(len(r) == rf and len(set(r)) == rf and set(r) <= live for r in placed)
    leads = Counter(r[0] for r in placed)
    assert max(leads.values()) - min(leads.get(b, 0) for b in live) <= 1


def test_elect_prefers_replica_order_within_live_isr():
    st_ = ps((1, 2, 3), 1, (1, 2, 3))
    assert elect(st_, {2, 3}) == 2
    assert elect(st_, {3}) == 3
    assert elect(ps((1, 2, 3), 1, (1,)), {2, 3}) == NO_LEADER
    assert elect(ps((1, 2, 3), 1, (1,)), {2, 3}, unclean=True) == 2


def test_after_failure_moves_leadership_with_a_new_epoch():
    new = after_failure(ps((1, 2, 3), 1, (1, 2, 3)), {2, 3})
    assert (new.leader, new.isr, new.leader_epoch, new.version) == (2, (2, 3), 4, 11)


def test_after_failure_drops_dead_followers_only():
    new = after_failure(ps((1, 2, 3), 1, (1, 2, 3)), {1, 2})
    assert (new.leader, new.isr, new.leader_epoch) == (1, (1, 2), 3)
    assert after_failure(ps((1, 2, 3), 1, (1, 2)), {1, 2}) is None


def test_no_out_of_sync_leader_unless_unclean():
    lonely = ps((1, 2, 3), 1, (1,))
    dark = after_failure(lonely, {2, 3})
    assert (dark.leader, dark.isr, dark.leader_epoch) == (NO_LEADER, (1,), 4)
    assert after_failure(dark, {2, 3}) is None  # stays dark, no new epoch each round
    back = after_failure(dark, {1, 2, 3})
    assert (back.leader, back.isr, back.leader_epoch) == (1, (1,), 5)
    unclean = after_failure(lonely, {2, 3}, unclean=True)
    assert (unclean.leader, unclean.isr) == (2, (2,))


def test_preferred_only_when_in_sync_and_alive():
    st_ = ps((1, 2, 3), 2, (1, 2, 3))
    assert preferred(st_, {1, 2, 3}).leader == 1 and preferred(st_, {1, 2, 3}).leader_epoch == 4
    assert preferred(st_, {2, 3}) is None
    assert preferred(ps((1, 2, 3), 2, (2, 3)), {1, 2, 3}) is None
    assert preferred(ps((1, 2, 3), 1, (1, 2, 3)), {1, 2, 3}) is None


def test_values_round_trip_and_keys():
    b = BrokerInfo(3, "127.0.0.1", 9557, 123)
    assert broker_from(3, broker_value(b)) == b
    t = TopicState("orders", 4, 3, {"retention_ms": 1000, "min_insync_replicas": 2}, 9)
    assert topic_from("orders", topic_value(t), 9) == t
    assert t.log_overrides() == {"retention_ms": 1000} and t.min_insync_replicas == 2
    p = ps((1, 2, 3), 2, (2, 3))
    assert partition_from("t", 0, partition_value(p), 11) == p
    k = Keys("prod")
    assert k.partition("a.b", 7) == "/logbroker/prod/partitions/a.b/7"
    assert k.offset("g/x", "t", 1) == "/logbroker/prod/offsets/g/x/t/1"
    assert [default_min_isr(n) for n in (1, 2, 3, 5)] == [1, 1, 2, 2]


def test_a_leader_that_registered_again_gets_a_new_epoch():
    st_ = ps((1, 2, 3), 1, (1, 2, 3), epoch=3, version=11)
    assert repair(st_, {1: 5, 2: 6, 3: 7}) is None  # registered before the state: nothing
    again = repair(st_, {1: 12, 2: 6, 3: 7})  # broker 1 restarted after the state was written
    assert (again.leader, again.isr, again.leader_epoch) == (1, (1, 2, 3), 4)
    assert repair(again.with_(version=13), {1: 12, 2: 6, 3: 7}) is None  # once
    moved = repair(st_, {2: 12, 3: 7})  # broker 1 gone: the ordinary failover
    assert (moved.leader, moved.leader_epoch) == (2, 4)
