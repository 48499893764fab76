"""CreatePartitions over either metadata (interface.py ``add_partitions``):
a topic's partition count raised, the existing partitions and their data
untouched (keys already written stay where they are; new records of a key
may hash elsewhere, as in Kafka). Within the partition budget (budget.py);
``validate_only`` runs every check and makes nothing.

- A single node (``add_local``): the new logs made as a creation makes
  them (storage/growth.py: up to ``AT_ONCE`` in this turn, more in slices
  in the I/O threads), published at once; replica assignments are refused
  (INVALID_REPLICA_ASSIGNMENT: one broker places everything).
- A cluster (``add_cluster``): the new partitions placed by
  cluster/placement.py (or as the client assigned them: one replica list
  per new partition, the topic's replication factor, live brokers, none
  named twice), their states written in etcd, then the topic's count by a
  compare-and-set on its version; every broker's watch opens its new
  replicas (cluster/node.py) and consumers see the count in Metadata.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from .. import limits
from ..cluster.placement import assign, given
from ..cluster.state import PartitionState, TopicState, partition_value, topic_value
from ..errors import (InvalidPartitionsError, InvalidReplicaAssignmentError,
                      UnknownTopicOrPartitionError)
from ..storage.growth import check_increase

TXN_OPS = 100  # etcd allows 128 operations per transaction


def _checked(name: str, present: "int | None", count: int) -> int:
    """How many partitions are added (the count checked against Kafka's rules)."""
    if present is None:
        raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
    if not 1 <= count <= limits.MAX_PARTITIONS:
        raise InvalidPartitionsError(f"topic {name!r}: partitions must be 1.."
                                     f"{limits.MAX_PARTITIONS}, got {count}")
    check_increase(name, present, count)
    return count - present


async def add_local(meta, name: str, count: int, assignments: tuple, validate_only: bool,
                    at_once: int, slice_size: int) -> None:
    """A single node's (metadata/local.py: up to ``at_once`` new partitions
    made in this turn, more ``slice_size`` at a time in its I/O threads);
    see the module docstring."""
    added = _checked(name, meta.topic_partitions(name), count)
    if assignments:
        raise InvalidReplicaAssignmentError("a single broker (no --etcd) places every partition "
                                            "itself: replica assignments need a cluster")
    release = meta.budget.hold(name, {meta.me: added}, meta._hosted)
    try:
        if validate_only:
            return
        grown = meta.store.begin_growth(name, count)
        if added <= at_once:  # a few ms: made in this turn
            _publish(meta.store, grown, grown.add, grown.added)
        else:
            await asyncio.shield(meta._track(_in_slices(meta, grown, slice_size)))
    finally:
        release()


def _publish(store, grown, make, *args) -> None:
    """``make(*args)`` then publish ``grown``'s new logs; on any failure
    what was made is removed."""
    try:
        make(*args)
        store.add_partitions(grown)
    except BaseException:
        grown.abandon()
        raise


async def _in_slices(meta, grown, size: int) -> None:
    """The new logs made ``size`` at a time in the I/O threads, the loop
    free meanwhile; published on the loop (a dict update)."""
    loop = asyncio.get_running_loop()

    async def make() -> None:
        for i in range(0, len(grown.added), size):
            await loop.run_in_executor(meta.executor, grown.add, grown.added[i:i + size])
    try:
        await make()
    except BaseException:
        await loop.run_in_executor(meta.executor, grown.abandon)
        raise
    _publish(meta.store, grown, lambda: None)


async def add_cluster(meta, name: str, count: int, assignments: tuple,
                      validate_only: bool) -> None:
    """A cluster's (metadata/cluster.py); see the module docstring."""
    node = meta.node
    node.check_available()
    view = node.view
    topic = view.topics.get(name)
    added = _checked(name, None if topic is None else topic.partitions, count)
    rf, old = topic.replication_factor, topic.partitions
    placed = given(assignments, added, rf, view.live) if assignments \
        else assign(added, rf, view.live, view.partitions.values())
    held = Counter(r for st in view.partitions.values() for r in st.replicas)
    with meta.budget.reserve(name, Counter(r for rs in placed for r in rs), held.__getitem__):
        if validate_only:
            return
        writes, expect = {}, {}
        for i, replicas in enumerate(placed):
            p = old + i
            key = node.keys.partition(name, p)
            stray = view.partitions.get((name, p))  # left by an earlier attempt that failed
            writes[key] = partition_value(PartitionState(name, p, replicas, replicas[0],
                                                         replicas, 0))
            expect[key] = stray.version if stray is not None else 0
        keys = list(writes)
        for i in range(0, len(keys), TXN_OPS):
            chunk = keys[i:i + TXN_OPS]
            if not await node.etcd.cas({k: writes[k] for k in chunk}, {k: expect[k] for k in chunk}):
                raise InvalidPartitionsError(f"topic {name!r} is being given partitions by "
                                             "another request; retry")
        grown = TopicState(name, count, rf, dict(topic.configs), topic_id=topic.topic_id)
        if not await node.etcd.cas({node.keys.topic(name): topic_value(grown)},
                                   {node.keys.topic(name): topic.version}):
            raise InvalidPartitionsError(f"topic {name!r} changed meanwhile; retry")
    await meta._until(lambda: (t := view.topics.get(name)) is not None
                      and t.partitions == count and len(view.partitions_of(name)) == count)
