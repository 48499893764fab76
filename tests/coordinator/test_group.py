"""The group state machine (coordinator/group.py) and the offsets topic's
records (coordinator/records.py): pure, sans-I/O, driven with an explicit clock."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings, strategies as st

from logbroker.coordinator.group import (COMPLETING, EMPTY, PREPARING, STABLE, Group,
                                         GroupLimits)
from logbroker.coordinator.records import (GroupRecord, OffsetRecord, StoredMember, encode,
                                           partition_for, read_batch)
from logbroker.errors import (FencedInstanceIdError, GroupMaxSizeReachedError,
                              IllegalGenerationError, InconsistentGroupProtocolError,
                              InvalidSessionTimeoutError, RebalanceInProgressError,
                              UnknownMemberIdError)
from logbroker.protocol import messages as m
from logbroker.storage.groups import CommittedOffset

LIMITS = GroupLimits(min_session_timeout_ms=100, max_session_timeout_ms=60_000, max_size=4,
                     initial_rebalance_delay_ms=0)


def join_req(member_id="", instance=None, protocols=(("range", b"m"),), session=1000,
             rebalance=5000) -> m.JoinGroup:
    return m.JoinGroup(group="g", session_timeout_ms=session, rebalance_timeout_ms=rebalance,
                       member_id=member_id, group_instance_id=instance, protocols=protocols,
                       client_id="app")


def answers(g: Group) -> dict:
    out = {(mid, kind): resp for mid, kind, resp in g.outbox}
    g.outbox.clear()
    return out


def stable_group(n: int, now: float = 0.0) -> tuple[Group, list[str]]:
    """A group of ``n`` members in Stable generation 1, its join completed at
    ``now`` (an initial delay of 10 ms gathers them)."""
    g = Group("g", dataclasses.replace(LIMITS, initial_rebalance_delay_ms=10))
    ids = []
    for _ in range(n):
        mid, _ = g.join(join_req(), "app", "h", now - 0.01)
        ids.append(mid)
    g.poll(now)
    joined = answers(g)
    assert g.state == COMPLETING and all((mid, "join") in joined for mid in ids)
    leader = joined[(ids[0], "join")].leader
    assert g.sync(m.SyncGroup(group="g", generation=g.generation, member_id=leader,
                              assignments=tuple((mid, mid.encode()) for mid in ids)), now) is None
    assert g.persist
    g.persist = False
    g.persisted(g.generation, True, now)
    assert answers(g)[(leader, "sync")].assignment == leader.encode()
    return g, ids


def test_a_first_member_leads_generation_one_and_gets_its_assignment():
    g = Group("g", LIMITS)
    mid, answer = g.join(join_req(), "app", "10.0.0.1:5", 0.0)
    assert answer is None  # parked: answered through the outbox
    got = answers(g)[(mid, "join")]
    assert (got.generation, got.leader, got.protocol) == (1, mid, "range")
    assert got.members == ((mid, None, b"m"),)
    assert g.sync(m.SyncGroup(group="g", generation=1, member_id=mid,
                              assignments=((mid, b"A"),)), 0.0) is None
    assert g.persist and g.record().members[0].assignment == b"A"
    g.persisted(1, True, 0.0)
    assert g.state == STABLE and answers(g)[(mid, "sync")].assignment == b"A"


def test_the_initial_delay_holds_the_first_join_back():
    g = Group("g", GroupLimits(initial_rebalance_delay_ms=1000))
    a, _ = g.join(join_req(), "app", "h", 0.0)
    b, _ = g.join(join_req(), "app", "h", 0.5)
    g.poll(0.9)
    assert g.state == PREPARING and not g.outbox
    g.poll(1.0)
    got = answers(g)
    assert g.generation == 1 and {k[0] for k in got} == {a, b}


def test_a_new_member_makes_the_others_rejoin_and_a_missing_one_is_dropped():
    g, (a, b) = stable_group(2)
    c, _ = g.join(join_req(), "app", "h", 0.5)
    assert g.state == PREPARING
    with pytest.raises(RebalanceInProgressError):
        g.heartbeat(m.Heartbeat(group="g", generation=1, member_id=a), 0.6)
    g.join(join_req(member_id=a), "app", "h", 0.7)
    assert not g.outbox  # b has not rejoined yet
    g.poll(0.5 + 5.0)  # b's rebalance timeout (5 s) passed: it is out
    got = answers(g)
    assert g.generation == 2 and set(g.members) == {a, c} and (b, "join") not in got


def test_an_unchanged_follower_rejoining_a_stable_group_gets_the_current_generation():
    g, (a, b) = stable_group(2)
    follower = b if g.leader == a else a
    mid, answer = g.join(join_req(member_id=follower), "app", "h", 0.5)
    assert answer.generation == 1 and answer.members == () and g.state == STABLE


def test_changed_metadata_starts_a_rebalance():
    g, (a, b) = stable_group(2)
    follower = b if g.leader == a else a
    _, answer = g.join(join_req(member_id=follower, protocols=(("range", b"new"),)), "app",
                       "h", 0.5)
    assert answer is None and g.state == PREPARING


def test_session_expiry_removes_a_silent_member():
    g, (a, b) = stable_group(2)
    g.heartbeat(m.Heartbeat(group="g", generation=1, member_id=a), 0.9)
    g.poll(1.0)  # b's session (1 s from 0.0) ended; a's runs to 1.9
    assert set(g.members) == {a} and g.state == PREPARING
    g.join(join_req(member_id=a), "app", "h", 1.1)
    assert answers(g)[(a, "join")].generation == 2


def test_next_deadline_is_the_earliest_session_end():
    g, (a, b) = stable_group(2)
    g.heartbeat(m.Heartbeat(group="g", generation=1, member_id=a), 0.5)
    assert g.next_deadline() == pytest.approx(1.0)


def test_a_leave_rebalances_at_once_and_the_last_leave_empties_the_group():
    g, (a, b) = stable_group(2)
    g.leave(a, None, 0.5)
    assert g.state == PREPARING
    g.join(join_req(member_id=b), "app", "h", 0.5)
    assert answers(g)[(b, "join")].generation == 2
    g.leave(b, None, 0.6)
    assert g.state == EMPTY and g.generation == 3 and g.persist


def test_stale_and_unknown_members_are_fenced_from_commits():
    g, (a, b) = stable_group(2)
    g.check_commit(1, a, None)
    with pytest.raises(IllegalGenerationError, match="stale"):
        g.check_commit(0, a, None)
    with pytest.raises(UnknownMemberIdError):
        g.check_commit(1, "nobody", None)
    with pytest.raises(UnknownMemberIdError, match="has members"):
        g.check_commit(-1, "", None)  # a commit without membership into a live group
    empty = Group("e", LIMITS)
    empty.check_commit(-1, "", None)  # accepted while the group has no members


def test_commits_wait_while_the_group_completes_a_rebalance():
    g = Group("g", LIMITS)
    mid, _ = g.join(join_req(), "app", "h", 0.0)
    answers(g)
    with pytest.raises(RebalanceInProgressError):
        g.check_commit(1, mid, None)


def test_a_static_member_back_in_a_stable_group_takes_its_place_without_a_rebalance():
    g = Group("g", LIMITS)
    mid, _ = g.join(join_req(instance="host-1"), "app", "h", 0.0)
    answers(g)
    g.sync(m.SyncGroup(group="g", generation=1, member_id=mid, group_instance_id="host-1",
                       assignments=((mid, b"P"),)), 0.0)
    g.persisted(1, True, 0.0)
    new, answer = g.join(join_req(instance="host-1"), "app", "h", 0.5)
    assert new != mid and answer.generation == 1 and g.state == STABLE and g.leader == new
    assert g.sync(m.SyncGroup(group="g", generation=1, member_id=new,
                              group_instance_id="host-1"), 0.6).assignment == b"P"
    with pytest.raises(FencedInstanceIdError):  # the old incarnation is fenced
        g.heartbeat(m.Heartbeat(group="g", generation=1, member_id=mid,
                                group_instance_id="host-1"), 0.7)


def test_join_checks():
    g, _ = stable_group(1)
    with pytest.raises(InvalidSessionTimeoutError):
        g.join(join_req(session=50), "app", "h", 0.0)
    with pytest.raises(InconsistentGroupProtocolError):
        g.join(join_req(protocols=(("roundrobin", b""),)), "app", "h", 0.0)
    with pytest.raises(UnknownMemberIdError):
        g.join(join_req(member_id="ghost"), "app", "h", 0.0)
    full, _ = stable_group(4)
    with pytest.raises(GroupMaxSizeReachedError):
        full.join(join_req(), "app", "h", 0.0)


def test_the_most_preferred_common_protocol_wins():
    g = Group("g", dataclasses.replace(LIMITS, initial_rebalance_delay_ms=10))
    g.join(join_req(protocols=(("range", b""), ("cooperative-sticky", b""))), "a", "h", 0.0)
    g.join(join_req(protocols=(("cooperative-sticky", b""), ("range", b""))), "b", "h", 0.0)
    g.join(join_req(protocols=(("cooperative-sticky", b""),)), "c", "h", 0.0)
    g.poll(0.01)
    assert g.state == COMPLETING and g.protocol == "cooperative-sticky"


def test_a_failed_write_of_the_generation_starts_over():
    g = Group("g", LIMITS)
    mid, _ = g.join(join_req(), "app", "h", 0.0)
    answers(g)
    g.sync(m.SyncGroup(group="g", generation=1, member_id=mid, assignments=((mid, b"A"),)), 0.0)
    g.persisted(1, False, 0.0)
    assert g.state == PREPARING
    assert isinstance(answers(g)[(mid, "sync")], RebalanceInProgressError)


def test_a_restored_group_gives_its_members_a_full_session():
    g, ids = stable_group(2)
    rec = g.record()
    back = Group("g", LIMITS)
    back.restore(rec, 100.0)
    assert back.state == STABLE and back.generation == 1 and set(back.members) == set(ids)
    back.heartbeat(m.Heartbeat(group="g", generation=1, member_id=ids[0]), 100.5)
    back.poll(100.99)
    assert set(back.members) == set(ids)


# -- records ----------------------------------------------------------------------------------------
def test_records_round_trip_through_a_batch():
    recs = [OffsetRecord("g", "orders", 3, 120, "meta", 17),
            OffsetRecord("g", "orders", 4, None),
            GroupRecord("g", 7, "consumer", "range", "m-1",
                        (StoredMember("m-1", "i-1", "app", "h:1", 1000, 5000, b"\x00A"),
                         StoredMember("m-2", None, "k", "h:2", 1000, 5000, b"\x00\x00", True))),
            GroupRecord("gone", None)]
    assert read_batch(encode(recs)) == recs


def test_a_member_written_before_the_kafka_flag_reads_as_ours():
    import msgpack

    from logbroker.records.builder import build_batch

    old = [3, "consumer", "range", "m-1", [["m-1", None, "app", "h:1", 1000, 5000, b"\x81"]]]
    got = read_batch(build_batch([(msgpack.packb(old), msgpack.packb([2, "g"]))]))
    assert got == [GroupRecord("g", 3, "consumer", "range", "m-1",
                               (StoredMember("m-1", None, "app", "h:1", 1000, 5000, b"\x81"),))]


def test_a_members_bytes_and_their_kind_are_kept_as_sent():
    """The Kafka listener's JoinGroup / SyncGroup are marked ``kafka_bytes``:
    the group keeps the bytes unchanged and says whose they are."""
    g = Group("g", dataclasses.replace(LIMITS, initial_rebalance_delay_ms=0))
    meta = b"\x00\x04anything"
    mid, answer = g.join(m.JoinGroup(group="g", protocol_type="connect", session_timeout_ms=1000,
                                     rebalance_timeout_ms=1000, protocols=(("p", meta),),
                                     kafka_bytes=True), "c", "h:1", 0.0)
    assert answer is None
    _, kind, joined = g.outbox.pop()
    assert kind == "join" and joined.members == ((mid, None, meta),)
    assert joined.member_kafka == (True,)
    g.sync(m.SyncGroup(group="g", generation=1, member_id=mid, assignments=((mid, b"\x07"),),
                       kafka_bytes=True), 0.1)
    assert g.record().members[0].assignment == b"\x07" and g.record().members[0].kafka


def test_an_unreadable_record_is_skipped_not_fatal():
    from logbroker.records.builder import build_batch

    data = build_batch([(b"\x90", b"\xc1"), (None, b"\x92\x09\xa1g")])  # bad msgpack, unknown kind
    assert read_batch(data) == []


@given(st.text(min_size=1, max_size=50), st.integers(1, 1000))
@settings(max_examples=50, deadline=None)
def test_partition_for_is_stable_and_in_range(group, n):
    p = partition_for(group, n)
    assert 0 <= p < n and p == partition_for(group, n)


def test_partition_for_is_fixed_across_versions():
    """Changing the hash would move every group to another partition: their
    offsets would be lost on upgrade. These values are the contract."""
    assert [partition_for(g, 16) for g in ("billing", "audit", "g")] == [8, 6, 8]
    assert [partition_for(g, 50) for g in ("billing", "audit", "g")] == [6, 48, 14]


def test_applied_offsets_and_tombstones():
    g = Group("g", LIMITS)
    g.apply("t", 0, CommittedOffset(5))
    g.apply("t", 1, CommittedOffset(6))
    g.apply("t", 0, None)
    assert g.offsets == {("t", 1): CommittedOffset(6)}
