"""Partition reassignment (Kafka's KIP-455): pure rules over a partition's state.

A reassignment gives a partition a *target* replica list. Its state in
etcd then holds every replica of both lists (``replicas`` = the target,
then the original replicas that are not in it), ``adding`` (targets that
were not replicas) and ``removing`` (replicas that are not targets):

1. ``start``: the new replicas are replicas at once, so their brokers make
   a log and follow the leader (cluster/follower.py, throttled by
   ``reassignment_throttle_bytes_per_s``); the leader counts them toward
   its HW only once they reach it and join the ISR (cluster/replicas.py).
2. ``advance`` (the controller, every round): once every target is in the
   ISR, one compare-and-set finishes the move: the replicas become the
   target, the ISR shrinks to its targets, and a leader that is not a
   target hands over to the first target that is alive and in sync (a new
   leader epoch). Removed replicas see they are no longer replicas: they
   stop following and delete their copy (cluster/node.py).
3. ``cancel`` (a null target): back to the original replicas (every
   replica but the adding ones), the same way.

A new target while a move is in progress replaces it: it is planned from
the original replicas, and replicas the first move was adding that the new
target drops leave at once. Every state change is a compare-and-set on the
partition's revision (the caller's), so the controller and the brokers'
ISR changes never overwrite one another; a broker killed mid-move resumes
from etcd: the state says what is left to do.
"""

from __future__ import annotations

from ..errors import InvalidReplicaAssignmentError, NoReassignmentInProgressError
from .checks import MAX_REPLICAS
from .state import NO_LEADER, PartitionState


def check_target(target, registered) -> tuple[int, ...]:
    """The target as a tuple; INVALID_REPLICA_ASSIGNMENT for an empty list,
    more than ``MAX_REPLICAS``, a broker twice, or a broker that is not
    registered (``registered``: the live broker ids)."""
    target = tuple(target)
    if not 1 <= len(target) <= MAX_REPLICAS:
        raise InvalidReplicaAssignmentError(
            f"a target replica list holds 1..{MAX_REPLICAS} brokers, not {len(target)} "
            "(a null list cancels a reassignment)")
    if len(set(target)) != len(target):
        raise InvalidReplicaAssignmentError(f"the replicas {list(target)} name a broker twice")
    unknown = sorted(set(target) - set(registered))
    if unknown:
        raise InvalidReplicaAssignmentError(
            f"broker(s) {unknown} of the replicas {list(target)} are not registered "
            f"(registered: {sorted(registered)})")
    return target


def original(st: PartitionState) -> tuple[int, ...]:
    """The replicas before the move in progress (the replicas when none is)."""
    return tuple(r for r in st.replicas if r not in st.adding)


def start(st: PartitionState, target: tuple[int, ...], live) -> PartitionState:
    """The state moving ``st`` toward ``target`` (checked by ``check_target``)."""
    before = original(st)
    adding = tuple(r for r in target if r not in before)
    removing = tuple(r for r in before if r not in target)
    new = st.with_(replicas=(*target, *removing), adding=adding, removing=removing)
    return _lead(new, st.isr, live)


def cancel(st: PartitionState, live) -> PartitionState:
    """Back to the original replicas; NO_REASSIGNMENT_IN_PROGRESS when
    nothing is moving."""
    if not st.reassigning:
        raise NoReassignmentInProgressError(
            f"{st.topic}-{st.partition} is not being reassigned")
    return _lead(st.with_(replicas=original(st), adding=(), removing=()), st.isr, live)


def advance(st: PartitionState, live) -> "PartitionState | None":
    """The finished move once every target is in the ISR and a target can
    lead; None while it waits (or when nothing is moving)."""
    if not st.reassigning:
        return None
    target = st.target
    if not set(target) <= set(st.isr):
        return None
    new = _lead(st.with_(replicas=target, adding=(), removing=()), st.isr, live)
    return None if new.leader == NO_LEADER and st.leader != NO_LEADER else new


def in_sync(st: PartitionState) -> tuple[int, ...]:
    """The targets already in the ISR (a move's progress)."""
    return tuple(r for r in st.target if r in st.isr)


def _lead(new: PartitionState, isr, live) -> PartitionState:
    """``new`` with its ISR narrowed to its replicas and, when its leader
    is no longer a replica, the first replica alive and in sync leading in
    a new epoch (none: no leader until the controller finds one)."""
    isr = tuple(r for r in isr if r in new.replicas)
    if new.leader in new.replicas or new.leader == NO_LEADER:
        return new.with_(isr=isr)
    leader = next((r for r in new.replicas if r in isr and r in live), NO_LEADER)
    return new.with_(isr=isr, leader=leader, leader_epoch=new.leader_epoch + 1)
