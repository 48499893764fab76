"""The broker's edge: every name, size and number of a request is checked
here (with limits.py) before a handler passes it to storage.

``check_request(msg)`` checks a request's top-level fields and raises the
registry's error for the first bad one: the whole request fails with that
code. ``check_partition_key(topic, partition)`` checks one entry's topic and
partition: the handlers call it per entry, so a bad entry gets its own error
and the others are served.
"""

from __future__ import annotations

from typing import Callable

from .. import limits
from ..protocol import messages as m


def check_partition_key(topic: object, partition: object) -> None:
    """A topic name (INVALID_TOPIC) and a partition number (INVALID_REQUEST)."""
    limits.check_topic_name(topic)
    limits.check_partition(partition)


def _produce(req: m.Produce) -> None:
    limits.check_int(req.acks, "acks (-1 all, 0 or 1)", -1, 1)
    limits.check_int(req.timeout_ms, "timeout_ms", 0, limits.MAX_TIMEOUT_MS)
    _not_internal(topic for topic, _, _ in req.parts)


def _not_internal(names) -> None:
    limits.check_not_internal(set(names))


def _topic_admin(req) -> None:
    """CreateTopics' NewTopic parts, or DeleteTopics' names."""
    _not_internal(t if isinstance(t, str) else t.name for t in req.topics)


def _fetch(req: m.Fetch) -> None:
    limits.check_int(req.max_wait_ms, "max_wait_ms", 0, limits.MAX_TIMEOUT_MS)
    limits.check_int(req.min_bytes, "min_bytes", 0, limits.MAX_FETCH_BYTES)
    limits.check_int(req.max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)


def _group(req) -> None:
    limits.check_group_name(req.group)


def _replica_fetch(req: m.ReplicaFetch) -> None:
    _fetch(req)
    limits.check_int(req.replica_id, "replica_id", 0, limits.MAX_INT32)


def _epoch_query(req: m.OffsetForLeaderEpoch) -> None:
    """A follower's (its broker id) or a consumer's (-1)."""
    limits.check_int(req.replica_id, "replica_id (-1 a consumer, else a broker id)", -1,
                     limits.MAX_INT32)


def _topics(req) -> None:
    for name in req.topics or ():
        limits.check_topic_name(name)


_CHECKS: dict[type, Callable] = {m.Produce: _produce, m.Fetch: _fetch,
                                 m.CreateTopics: _topic_admin, m.DeleteTopics: _topic_admin,
                                 m.CommitOffsets: _group, m.FetchOffsets: _group,
                                 m.JoinGroup: _group, m.SyncGroup: _group, m.Heartbeat: _group,
                                 m.LeaveGroup: _group, m.FindCoordinator: _group,
                                 m.DeleteOffsets: _group,
                                 m.ReplicaFetch: _replica_fetch,
                                 m.OffsetForLeaderEpoch: _epoch_query,
                                 m.DescribeCluster: _topics, m.ElectLeaders: _topics,
                                 m.CreatePartitions: _topic_admin}


def check_request(msg: m.Message) -> None:
    """Raise the error of the first bad top-level field of ``msg``."""
    check = _CHECKS.get(type(msg))
    if check is not None:
        check(msg)
