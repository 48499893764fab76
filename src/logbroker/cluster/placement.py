"""Where replicas and leaders go: pure functions over the cluster's view.

- ``assign``: replicas of a new topic's partitions, spread so that every
  live broker leads about as many partitions as the others and holds about
  as many replicas; a partition's first replica is its preferred leader.
- ``given``: replica lists a client chose (CreateTopics' manual assignment,
  CreatePartitions' assignments), checked as Kafka checks them.
- ``elect``: the leader after a failure: the first replica (in replica
  order, so the preferred one wins ties) that is alive and in the ISR; an
  alive out-of-sync replica only if the topic opted into unclean election
  (never one a reassignment is still adding: it may hold nothing yet).
- ``after_failure`` / ``repair`` / ``preferred``: the partition's next
  state, or None when nothing changes.
"""

from __future__ import annotations

from typing import Iterable

from ..errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from .state import NO_LEADER, PartitionState


def assign(partitions: int, replication_factor: int, live: Iterable[int],
           existing: Iterable[PartitionState] = ()) -> list[tuple[int, ...]]:
    """Replica lists for ``partitions`` new partitions (first = leader)."""
    brokers = sorted(set(live))
    if not 1 <= replication_factor <= len(brokers):
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} needs 1..{len(brokers)} (live brokers: "
            f"{', '.join(map(str, brokers)) or 'none'})")
    leads = {b: 0 for b in brokers}
    holds = {b: 0 for b in brokers}
    for st in existing:
        for r in st.replicas:
            if r in holds:
                holds[r] += 1
        if st.replicas and st.replicas[0] in leads:
            leads[st.replicas[0]] += 1
    out = []
    for _ in range(partitions):
        leader = min(brokers, key=lambda b: (leads[b], holds[b], b))
        start = brokers.index(leader)
        ring = brokers[start + 1:] + brokers[:start]
        followers = sorted(ring, key=lambda b: (holds[b], ring.index(b)))[:replication_factor - 1]
        replicas = (leader, *followers)
        leads[leader] += 1
        for r in replicas:
            holds[r] += 1
        out.append(replicas)
    return out


def given(lists, count: int, rf: "int | None", live: Iterable[int]) -> list[tuple[int, ...]]:
    """A client's replica lists for ``count`` partitions, checked: one list
    per partition, each of ``rf`` distinct brokers (None: the first list's
    length, the same for every list), every broker live (registered);
    INVALID_REPLICA_ASSIGNMENT naming the rule otherwise."""
    if len(lists) != count:
        raise InvalidReplicaAssignmentError(f"{len(lists)} replica list(s) for {count} "
                                            "partition(s): give one assignment per partition")
    if rf is None:
        rf = len(lists[0]) if lists else 0
    alive = set(live)
    out = []
    for i, replicas in enumerate(lists):
        replicas = tuple(replicas)
        if not replicas:
            raise InvalidReplicaAssignmentError(f"replica list {i} is empty")
        if len(replicas) != rf or len(set(replicas)) != rf:
            raise InvalidReplicaAssignmentError(
                f"replica list {i} names {len(set(replicas))} distinct broker(s) in "
                f"{len(replicas)}; every list must name {rf} distinct brokers (the "
                "replication factor)")
        gone = sorted(set(replicas) - alive)
        if gone:
            raise InvalidReplicaAssignmentError(f"replica list {i} names broker(s) {gone}, not "
                                                "live (registered) in the cluster")
        out.append(replicas)
    return out


def elect(st: PartitionState, live: set[int], unclean: bool = False) -> int:
    """The replica that should lead, or NO_LEADER."""
    for r in st.replicas:
        if r in live and r in st.isr:
            return r
    if unclean:
        for r in st.replicas:
            if r in live and r not in st.adding:  # a replica a move is adding may hold nothing yet
                return r
    return NO_LEADER


def after_failure(st: PartitionState, live: set[int], unclean: bool = False) -> "PartitionState | None":
    """The controller's repair of a partition: a dead (or missing) leader is
    replaced from the ISR with a new epoch; dead followers leave the ISR.
    With no eligible replica the partition has no leader and keeps its ISR
    (those are the replicas that may lead when they return). None: no change."""
    if st.leader in live:
        isr = tuple(r for r in st.isr if r in live)
        return None if isr == st.isr else st.with_(isr=isr)
    new = elect(st, live, unclean)
    if new == NO_LEADER:
        return None if st.leader == NO_LEADER else st.with_(leader=NO_LEADER,
                                                            leader_epoch=st.leader_epoch + 1)
    if new in st.isr:
        isr = tuple(r for r in st.isr if r in live)
    else:  # unclean: the new leader's log is the truth now
        isr = (new,)
    return st.with_(leader=new, isr=isr, leader_epoch=st.leader_epoch + 1)


def preferred(st: PartitionState, live: set[int]) -> "PartitionState | None":
    """Leadership back to the preferred replica, if it is alive and in sync."""
    want = st.preferred_leader
    if st.leader == want or want not in live or want not in st.isr:
        return None
    return st.with_(leader=want, leader_epoch=st.leader_epoch + 1)


def repair(st: PartitionState, registered: dict[int, int],
           unclean: bool = False) -> "PartitionState | None":
    """The controller's decision for one partition: ``after_failure`` over
    the live brokers (``registered``: id -> etcd revision of its current
    registration), and a new epoch for a leader that registered again after
    the partition's state was written: it restarted (perhaps so fast that
    its leave was never seen), and its log after the restart must never
    pass for the old epoch's."""
    new = after_failure(st, set(registered), unclean)
    if new is None and registered.get(st.leader, 0) > st.version:
        new = st.with_(leader_epoch=st.leader_epoch + 1)
    return new
