"""Partition reassignment behind the metadata interface (interface.py):
``reassign`` and ``reassignments`` of both implementations.

In a cluster a reassignment is a compare-and-set of the partition's state
in etcd (cluster/reassignment.py has the rules, the controller finishes
the move); a lost compare-and-set (an ISR change got there first) is
retried on the newer state, a few times. A single node answers as Kafka's
single broker: a target of its own id alone is a no-op, any other
INVALID_REPLICA_ASSIGNMENT; nothing is ever in progress.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..cluster.reassignment import cancel, check_target, start
from ..errors import (InvalidReplicaAssignmentError, NoReassignmentInProgressError,
                      RequestTimedOutError, UnknownTopicOrPartitionError)
from ..protocol.reassign_messages import Moving

log = logging.getLogger("logbroker.broker")
CAS_TRIES = 5
VIEW_WAIT_S = 5.0


def _unknown(topic: str, partition: int) -> UnknownTopicOrPartitionError:
    return UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")


async def cluster_reassign(node, budget, topic: str, partition: int, target) -> None:
    """Start (``target``: broker ids) or cancel (None) the reassignment of
    one partition; returns once this broker's view shows it. A broker a
    move adds a replica to must stay within ``max_partitions_per_broker``
    (``budget``: POLICY_VIOLATION, as a creation)."""
    node.check_available()
    view = node.view
    for _ in range(CAS_TRIES):
        st = view.partitions.get((topic, partition))
        if topic not in view.topics or st is None:
            raise _unknown(topic, partition)
        live = view.live
        new = cancel(st, live) if target is None else start(st, check_target(target, live), live)
        if new == st:
            return
        need = {b: 1 for b in new.replicas if b not in st.replicas}
        with budget.reserve(f"{topic} (partition {partition} reassigned)", need,
                            view.held.__getitem__):
            if await node.cas_partition(st, new):
                log.info("%s-%d: %s: replicas %s -> %s (adding %s, removing %s)", topic,
                         partition, "reassignment cancelled" if target is None
                         else "reassigning", list(st.replicas), list(new.replicas), list(new.adding),
                         list(new.removing))
                await _seen(view, (topic, partition), st.version)  # counted by the view now
                return
        await _seen(view, (topic, partition), st.version)  # the newer state, then again
    raise RequestTimedOutError(f"{topic}-{partition} kept changing during {CAS_TRIES} tries; "
                               "retry")


async def _seen(view, key, version: int) -> None:
    """Until the view holds a state of ``key`` newer than ``version``
    (bounded by VIEW_WAIT_S)."""
    deadline = time.monotonic() + VIEW_WAIT_S
    while time.monotonic() < deadline:
        st = view.partitions.get(key)
        if st is None or st.version > version:
            return
        await asyncio.sleep(0.005)


def cluster_reassignments(view, wanted) -> list:
    """The partitions being reassigned (``Moving`` rows) among ``wanted``
    ({topic: partitions or None}; None: every topic), unknown ones left out
    as Kafka does."""
    rows = []
    for topic, partition in sorted(view.moving):  # the view's index: no walk of every partition
        st = view.partitions.get((topic, partition))
        if st is None or topic not in view.topics:
            continue
        if wanted is not None and (topic not in wanted or (
                wanted[topic] is not None and partition not in wanted[topic])):
            continue
        rows.append(Moving(topic, partition, st.replicas, st.adding, st.removing))
    return rows


def local_reassign(me: int, count, topic: str, partition: int, target) -> None:
    """A single node's answer (``count``: the topic's partition count or None)."""
    if count is None or not 0 <= partition < count:
        raise _unknown(topic, partition)
    if target is None:
        raise NoReassignmentInProgressError(f"{topic}-{partition} is not being reassigned")
    if tuple(target) != (me,):
        raise InvalidReplicaAssignmentError(
            f"a single node has one broker ({me}): {topic}-{partition}'s replicas can only be "
            f"[{me}], not {list(target)}")
