"""Adding partitions to a single node's topic (CreatePartitions), in slices
as a creation makes them (storage/creation.py), never half visible:

- begin (``begin_growth``): the topic exists, is not being grown already,
  and the new count is above its present one (INVALID_PARTITIONS); a
  marker row ``growing/<name>`` = (old count, new count) is written;
- ``TopicGrowth.add(partitions)``: one slice of new logs, kept aside (any
  thread);
- finish (``Store.add_partitions`` -> ``TopicGrowth.publish``): the
  topic's row with the new count and the marker's removal in one commit,
  then the new logs join the store at once; the existing partitions and
  their data are untouched. A topic deleted meanwhile: the new logs are
  removed, UNKNOWN_TOPIC_OR_PARTITION;
- abandon (a failure): the new logs' files and rows and the marker removed.

A crash leaves the marker: the next open removes the partitions from the
old count on (``roll_back``) before loading anything; the client was never
told they exist.
"""

from __future__ import annotations

import logging
import os
import shutil

import msgpack

from ..errors import InvalidPartitionsError, UnknownTopicOrPartitionError
from .creation import discard, forget, make_logs
from .segment import fsync_dir
from .topics import TopicConfig

log = logging.getLogger(__name__)
MARKER_PREFIX = b"growing/"


class TopicGrowth:
    """A topic being grown: its config before (``old``) and after
    (``topic``), and the new logs made so far (not in the store yet)."""

    def __init__(self, store, old: TopicConfig, topic: TopicConfig) -> None:
        self.store, self.old, self.topic = store, old, topic
        self.logs: list = []

    @property
    def added(self) -> range:
        return range(self.old.partitions, self.topic.partitions)

    def add(self, partitions) -> None:
        """Make the logs of ``partitions`` (a slice of ``added``; any thread)."""
        self.logs += make_logs(self.store, self.topic, list(partitions))

    def publish(self, logs: dict) -> TopicConfig:
        """Under the store's lock: the new count and the marker's removal in
        one commit, then the new logs into ``logs`` (the store's map)."""
        store, name = self.store, self.topic.name
        assert len(self.logs) == len(self.added), "every new partition is made before publishing"
        current = store.topics.get(name)
        if current is None or current.partitions != self.old.partitions:
            raise UnknownTopicOrPartitionError(f"topic {name!r} was deleted or changed while "
                                               "partitions were added")
        grown = TopicConfig(name, self.topic.partitions, current.overrides, current.topic_id)
        with store.meta.write() as txn:
            store.topics.put(grown, txn)
            txn.delete(MARKER_PREFIX + name.encode(), db=store.meta.db("meta"))
        for lg in self.logs:
            logs[(name, lg.partition)] = lg
        return grown

    def abandon(self) -> None:
        """Remove what the slices made, and the marker."""
        name = self.topic.name
        discard(self.store, self.logs, [f"{name}-{p}" for p in self.added])
        fsync_dir(self.store.path)
        with self.store.meta.write() as txn:
            txn.delete(MARKER_PREFIX + name.encode(), db=self.store.meta.db("meta"))


def begin_growth(store, name: str, count: int) -> TopicGrowth:
    """Start growing topic ``name`` to ``count`` partitions (the caller
    holds the store's lock, ``Store.begin_growth``): UNKNOWN_TOPIC_OR_PARTITION
    for a topic that does not exist (or is being created or grown),
    INVALID_PARTITIONS for a count not above the present one."""
    old = store.topics.get(name)
    if old is None or store.creating(name):
        raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
    check_increase(name, old.partitions, count)
    meta = store.meta
    with meta.write() as txn:
        key = MARKER_PREFIX + name.encode()
        if txn.get(key, db=meta.db("meta")) is not None:
            raise InvalidPartitionsError(f"topic {name!r} is already being given partitions")
        txn.put(key, msgpack.packb([old.partitions, count]), db=meta.db("meta"))
    return TopicGrowth(store, old, TopicConfig(name, count, old.overrides, old.topic_id))


def check_increase(name: str, present: int, count: int) -> None:
    """Kafka's rule: partitions are only added (INVALID_PARTITIONS)."""
    if count <= present:
        raise InvalidPartitionsError(f"topic {name!r} has {present} partition(s): the new "
                                     f"count must be larger, got {count}")


def roll_back(store) -> None:
    """At open, before any log loads: remove the partitions a crash left
    half added (their marker is still there), directories and rows."""
    meta = store.meta
    with meta.read() as txn:
        cur = txn.cursor(db=meta.db("meta"))
        found = [(k[len(MARKER_PREFIX):].decode(), *msgpack.unpackb(v))
                 for k, v in cur if k.startswith(MARKER_PREFIX)] if cur.set_range(MARKER_PREFIX) \
            else []
    for name, old, new in found:
        log.warning("topic %s was being given partitions %d..%d when the broker stopped: they "
                    "are removed (the client was never told they exist)", name, old, new - 1)
        names = [f"{name}-{p}" for p in range(old, new)]
        for entry in names:
            shutil.rmtree(os.path.join(store.path, entry), ignore_errors=True)
        forget(store, names)
        fsync_dir(store.path)
        with meta.write() as txn:
            txn.delete(MARKER_PREFIX + name.encode(), db=meta.db("meta"))
