"""Creating (and removing) many partitions in slices, so that a topic of
thousands of partitions never holds the broker's event loop for long
(docs/security.md, "Partition limits").

``make_logs(store, topic, partitions)``: the new logs of one slice, in two
LMDB transactions (their ids; their first checkpoints) and one fsync of
the data dir (the new directories' entries), none per partition: a
partition's empty segment file is made durable in its directory by its
first flush (Segment.flush), and until then a power cut may lose it: the
LMDB rows record the partition and ``Store._missing_dirs`` makes it again
at the next open. No descriptor stays open: a segment opens at its first
append or read. Safe in a worker thread: the logs are
nobody's yet.

A single node's CreateTopics (``Store.begin_topic`` .. ``finish_topic``):

- begin: the marker row ``creating/<name>`` (LMDB ``meta`` table). The
  topic has no ``topics`` row and no log in the store yet: clients see an
  unknown topic (retriable), creating it again is TOPIC_ALREADY_EXISTS;
- ``TopicCreation.add(partitions)``: one slice, kept aside;
- finish: the topic row written and the marker removed in one transaction,
  then every log joins the store: the topic appears whole, at once;
- abandon (a failure): what the slices made is removed, the marker too.

A crash leaves the marker: the next open removes the half-made topic
(``roll_back``) before loading anything; its creator was never told it
exists. Deletion (``Store.begin_delete``) writes the same marker as it
removes the topic's row, so a deletion a crash interrupted is finished at
the next open the same way.
"""

from __future__ import annotations

import logging
import os
import shutil

import msgpack

from .log import Log
from .segment import fsync_dir
from .topics import TopicConfig

log = logging.getLogger(__name__)
MARKER_PREFIX = b"creating/"


class TopicCreation:
    """A single node's topic being created (``Store.begin_topic``): its
    config and the logs its slices made so far (not in the store yet)."""

    def __init__(self, store, topic: TopicConfig) -> None:
        self.store, self.topic = store, topic
        self.logs: list[Log] = []

    def add(self, partitions) -> None:
        """Make the logs of ``partitions`` (a slice; any thread)."""
        self.logs += make_logs(self.store, self.topic, list(partitions))


def make_logs(store, topic: TopicConfig, partitions: list) -> list[Log]:
    """New logs of ``topic`` for ``partitions``, not yet in ``store``'s map.
    A partition whose directory or id is left from an earlier life (a
    crash) is loaded as any log is; the others are made fresh. On failure
    nothing of the slice is left."""
    names = [f"{topic.name}-{p}" for p in partitions]
    ids = store.meta.partition_ids(names)
    config = topic.log_config(store.config.log)
    made: list[Log] = []
    try:
        fresh = []
        for p, name in zip(partitions, names):
            directory = os.path.join(store.path, name)
            pid, new = ids[name]
            if new and not os.path.exists(directory):
                lg = Log.fresh(directory, topic.name, p, pid, config=config, meta=store.meta,
                               files=store.files, auto_hw=store.auto_hw, journal=store.journal)
                fresh.append(lg)
            else:
                lg = Log.open(directory, topic.name, p, config=config, meta=store.meta,
                              files=store.files, clean=False, auto_hw=store.auto_hw,
                              journal=store.journal)
            made.append(lg)
        if fresh:
            fsync_dir(store.path)  # the new directories' entries, one fsync for the slice
        Log.checkpoint_many(fresh)
    except BaseException:
        discard(store, made or [], names)
        raise
    return made


def discard(store, logs: list[Log], names: "list[str] | None" = None) -> None:
    """Remove the files and LMDB rows of logs never published (best effort)."""
    for lg in logs:
        try:
            lg.release()
            lg.remove_files()
        except OSError as exc:
            log.warning("removing %s failed: %s", lg.name, exc)
    forget(store, names if names is not None else [lg.name for lg in logs])


def forget(store, names: list[str]) -> None:
    """Drop the LMDB rows of partitions ``names``, one transaction."""
    meta = store.meta
    with meta.write() as txn:
        for name in names:
            pid = txn.get(name.encode(), db=meta.db("parts"))
            if pid is not None:
                meta.forget_partition(txn, name, int.from_bytes(pid, "big"))


def put_marker(meta, topic: TopicConfig, txn=None) -> None:
    """Mark ``topic``'s partitions as no topic's (being created or deleted),
    in ``txn`` when given."""
    if txn is None:
        with meta.write() as txn:
            return put_marker(meta, topic, txn)
    txn.put(MARKER_PREFIX + topic.name.encode(), msgpack.packb(topic.partitions),
            db=meta.db("meta"))


def drop_marker(txn, meta, name: str) -> None:
    txn.delete(MARKER_PREFIX + name.encode(), db=meta.db("meta"))


def roll_back(store) -> None:
    """At open, before any log loads: remove every topic whose creation a
    crash interrupted (its marker is still there), directories and rows."""
    meta = store.meta
    with meta.read() as txn:
        cur = txn.cursor(db=meta.db("meta"))
        found = [(k[len(MARKER_PREFIX):].decode(), msgpack.unpackb(v))
                 for k, v in cur if k.startswith(MARKER_PREFIX)] if cur.set_range(MARKER_PREFIX) \
            else []
    for name, count in found:
        log.warning("topic %s was being created or deleted (%d partitions) when the broker "
                    "stopped: what is left of it is removed (a creation's client was never "
                    "told it exists)", name, count)
        names = [f"{name}-{p}" for p in range(count)]
        for entry in names:
            shutil.rmtree(os.path.join(store.path, entry), ignore_errors=True)
        forget(store, names)
        fsync_dir(store.path)  # the removals durable before the marker goes
        with meta.write() as txn:
            drop_marker(txn, meta, name)
