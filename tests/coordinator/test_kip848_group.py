"""Unit tests of consumer-protocol groups (KIP-848), sans-I/O:
coordinator/consumer_group.py, assignors_server.py, subscriptions.py and the
group's record in the offsets log (consumer_records.py via records.py)."""

from __future__ import annotations

import time

import pytest

from logbroker.coordinator.assignors_server import assign
from logbroker.coordinator.consumer_group import Beat, ConsumerGroup, apply_consumer_record
from logbroker.coordinator.group import GroupLimits
from logbroker.coordinator.records import encode, read_batch
from logbroker.errors import (FencedMemberEpochError, InconsistentGroupProtocolError,
                              InvalidRegularExpressionError,
                              InvalidRequestError, StaleMemberEpochError, UnknownMemberIdError,
                              UnreleasedInstanceIdError, UnsupportedAssignorError)

LIMITS = GroupLimits(consumer_session_timeout_ms=10_000, consumer_heartbeat_interval_ms=500)


class Topics:
    def __init__(self, **counts) -> None:
        self.counts = counts

    def count(self, name):
        return self.counts.get(name)

    def names(self):
        return list(self.counts)


T = Topics(orders=4, clicks=2, __internal=3)


def parts(answer) -> dict:
    return {t: sorted(ps) for t, ps in (answer or {}).items()}


def join(g, mid, now=0.0, topics=("orders",), **kw):
    return g.beat(Beat(mid, 0, rebalance_timeout_ms=5_000, names=tuple(topics), **kw), T, now)


# -- assignors ------------------------------------------------------------------------------------
def test_uniform_balances_and_keeps_what_members_hold():
    members = {"a": ["orders"], "b": ["orders"]}
    first = assign("uniform", members, {"orders": 4}, {})
    assert sorted(len(v["orders"]) for v in first.values()) == [2, 2]
    assert first["a"]["orders"] | first["b"]["orders"] == set(range(4))
    members["c"] = ["orders"]
    second = assign("uniform", members, {"orders": 4}, first)
    assert sorted(len(v.get("orders", ())) for v in second.values()) == [1, 1, 2]
    for m in "ab":  # sticky: nobody gets a partition another old member had
        assert second[m]["orders"] <= first[m]["orders"]
    assert set().union(*(v.get("orders", set()) for v in second.values())) == set(range(4))


def test_uniform_stays_complete_balanced_and_sticky_as_members_come_and_go():
    import random

    rng = random.Random(848)
    for _ in range(30):
        topics = {f"t{i}": rng.randint(1, 12) for i in range(rng.randint(1, 4))}
        names = sorted(topics)
        members = {f"m{i}": names for i in range(rng.randint(1, 9))}
        current: dict = {}
        for step in range(4):
            got = assign("uniform", members, topics, current)
            pairs = [(t, p) for a in got.values() for t, ps in a.items() for p in ps]
            assert sorted(pairs) == sorted((t, p) for t in names for p in range(topics[t]))
            counts = [sum(len(ps) for ps in a.values()) for a in got.values()]
            assert max(counts) - min(counts) <= 1
            for mid in set(current) & set(got):  # a member keeps min(what it had, its share)
                had = {(t, p) for t, ps in current[mid].items() for p in ps}
                kept = had & {(t, p) for t, ps in got[mid].items() for p in ps}
                assert len(kept) >= min(len(had), min(counts))
            current = got
            if step % 2 or len(members) == 1:
                members = {**members, f"n{step}": names}
            else:
                members.pop(sorted(members)[0])


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers():
    got = assign("uniform", {"a": ["orders"], "b": ["orders", "clicks"]},
                 {"orders": 4, "clicks": 2}, {})
    assert "clicks" not in got["a"] and got["b"]["clicks"] == {0, 1}
    assert got["a"]["orders"] | got["b"].get("orders", set()) == set(range(4))
    assert len(got["a"]["orders"]) == 3  # b holds both clicks: 3 + 3


def test_range_gives_contiguous_ranges_in_member_order():
    got = assign("range", {"b": ["orders"], "a": ["orders"], "c": ["orders"]}, {"orders": 4}, {})
    assert (got["a"]["orders"], got["b"]["orders"], got["c"]["orders"]) == ({0, 1}, {2}, {3})


# -- reconciliation -----------------------------------------------------------------------------
def test_a_partition_moves_only_after_its_old_owner_released_it():
    g = ConsumerGroup("g", LIMITS)
    a = join(g, "a")
    assert (a.member_epoch, parts(a.assignment)) == (1, {"orders": [0, 1, 2, 3]})
    b = join(g, "b", 1.0)
    assert b.member_epoch == 2 and parts(b.assignment) == {}  # a still owns them all
    owned_all = {"orders": frozenset(range(4))}
    a2 = g.beat(Beat("a", 1, owned=owned_all), T, 1.1)
    kept = parts(a2.assignment)["orders"]
    assert a2.member_epoch == 1 and len(kept) == 2  # revoke first, same epoch
    assert g.state == "Reconciling"
    b2 = g.beat(Beat("b", 2, owned={}), T, 1.2)
    assert parts(b2.assignment) == {}  # not released yet
    a3 = g.beat(Beat("a", 1, owned={"orders": frozenset(kept)}), T, 1.3)
    assert a3.member_epoch == 2
    b3 = g.beat(Beat("b", 2, owned={}), T, 1.4)
    assert sorted(parts(b3.assignment)["orders"] + kept) == [0, 1, 2, 3]
    assert g.state == "Stable" and g.group_epoch == g.assignment_epoch == 2


def test_fencing_expiry_and_epochs_of_commits():
    g = ConsumerGroup("g", LIMITS)
    join(g, "a")
    with pytest.raises(FencedMemberEpochError):
        g.beat(Beat("a", 7), T, 0.5)
    with pytest.raises(UnknownMemberIdError):
        g.beat(Beat("nobody", 3), T, 0.5)
    g.check_commit(1, "a", None)
    join(g, "b", 1.0)
    g.beat(Beat("a", 1, owned={"orders": frozenset(range(4))}), T, 1.1)
    g.beat(Beat("a", 1, owned={"orders": frozenset(g.members["a"].assigned["orders"])}), T, 1.2)
    with pytest.raises(StaleMemberEpochError):
        g.check_commit(1, "a", None)  # a is at epoch 2 now
    with pytest.raises(UnknownMemberIdError):
        g.check_commit(-1, "", None)  # no commit without membership while members live
    g.poll(1.2 + 10.5)  # both sessions ended
    assert not g.members and g.state == "Empty"
    g.check_commit(-1, "", None)


def test_leave_frees_partitions_and_a_static_member_comes_back_to_its_own():
    g = ConsumerGroup("g", LIMITS)
    join(g, "a", instance_id="host-a")
    join(g, "b", 0.1)
    g.beat(Beat("a", 1, owned={"orders": frozenset(range(4))}), T, 0.2)
    a_parts = g.members["a"].assigned
    g.beat(Beat("a", 1, owned=a_parts), T, 0.3)
    g.beat(Beat("b", 2, owned={}), T, 0.4)
    epoch = g.group_epoch
    g.beat(Beat("a", -2, instance_id="host-a"), T, 0.5)  # static leave: held for the instance
    back = join(g, "a2", 0.7, instance_id="host-a")
    assert back.member_id == "a2" and back.assignment == a_parts and g.group_epoch == epoch
    g.beat(Beat("b", 2, owned=g.members["b"].assigned), T, 0.8)
    g.beat(Beat("b", -1), T, 0.9)  # b leaves: a2 may take everything
    g.beat(Beat("a2", 2, owned=a_parts), T, 1.0)
    assert parts(g.members["a2"].assigned) == {"orders": [0, 1, 2, 3]}


def test_a_live_static_member_holds_its_instance_id():
    g = ConsumerGroup("g", LIMITS)
    join(g, "a", instance_id="host-a")
    with pytest.raises(UnreleasedInstanceIdError):
        join(g, "a-again", 0.1, instance_id="host-a")


def test_bad_requests_are_refused_with_their_rule():
    g = ConsumerGroup("g", LIMITS)
    with pytest.raises(UnsupportedAssignorError):
        join(g, "a", assignor="sticky")
    with pytest.raises(InvalidRequestError, match="subscribed topics or a regex"):
        g.beat(Beat("a", 0, rebalance_timeout_ms=5_000), T, 0.0)
    with pytest.raises(InvalidRegularExpressionError, match="RE2"):
        g.beat(Beat("a", 0, rebalance_timeout_ms=5_000, regex="(orders"), T, 0.0)
    with pytest.raises(InconsistentGroupProtocolError):
        g.join(None, "c", "h", 0.0)


def test_a_regex_subscription_matches_in_linear_time():
    g = ConsumerGroup("g", LIMITS)
    answer = g.beat(Beat("a", 0, rebalance_timeout_ms=5_000, regex="o.*|c.*"), T, 0.0)
    assert set(parts(answer.assignment)) == {"orders", "clicks"}  # never __internal
    long_names = Topics(**{"a" * 249: 1})
    started = time.perf_counter()
    g2 = ConsumerGroup("g2", LIMITS)
    g2.beat(Beat("a", 0, rebalance_timeout_ms=5_000, regex="(a+)+$b"), long_names, 0.0)
    assert time.perf_counter() - started < 0.05  # backtracking would take years


def test_the_group_survives_its_record_in_the_offsets_log():
    g = ConsumerGroup("g", LIMITS)
    join(g, "a")
    join(g, "b", 0.1, topics=("orders", "clicks"))
    g.beat(Beat("a", 1, owned={"orders": frozenset(range(4))}), T, 0.2)
    (rec,) = read_batch(encode([g.record()]))
    groups = {}
    apply_consumer_record(groups, rec, LIMITS, 5.0)
    back = groups["g"]
    assert (back.group_epoch, back.assignment_epoch) == (g.group_epoch, g.assignment_epoch)
    for mid, mb in g.members.items():
        got = back.members[mid]
        assert (got.member_epoch, got.assigned, got.revoking, got.subscription) == \
            (mb.member_epoch, mb.assigned, mb.revoking, mb.subscription)
    assert back.target == g.target and back.topics == g.topics == {"orders": 4, "clicks": 2}
    (gone,) = read_batch(encode([type(rec)("g", None)]))
    apply_consumer_record(groups, gone, LIMITS, 6.0)
    assert groups == {}

