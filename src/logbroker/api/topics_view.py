"""Topic admin requests: create, delete, describe."""

from __future__ import annotations

from .. import limits
from ..errors import InvalidReplicationFactorError, LogbrokerError, UnknownTopicOrPartitionError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from .edge import listed
from ..storage.store import Store


def create_topics(store: Store, req: m.CreateTopics) -> m.CreateTopicsResponse:
    out = []
    for name, partitions, configs in req.topics:
        try:
            limits.check_topic_name(name)
            limits.check_partition_count(partitions)
            configs = dict(limits.check_topic_configs(configs))
            if configs.pop("replication_factor", 1) != 1:
                raise InvalidReplicationFactorError("a single broker (no --etcd) has replication "
                                                    "factor 1")
            for key in ("min_insync_replicas", "unclean_leader_election"):
                configs.pop(key, None)
            store.create_topic(name, partitions, **configs)
            out.append((name, 0, ""))
        except LogbrokerError as exc:
            out.append((name, *_err(exc)))
    return m.CreateTopicsResponse(topics=tuple(out))


def delete_topics(store: Store, req: m.DeleteTopics) -> m.DeleteTopicsResponse:
    out = []
    for name in req.topics:
        try:
            store.delete_topic(limits.check_topic_name(name))
            out.append((name, 0, ""))
        except LogbrokerError as exc:
            out.append((name, *_err(exc)))
    return m.DeleteTopicsResponse(topics=tuple(out))


def describe_topics(store: Store, req: m.DescribeTopics) -> m.DescribeTopicsResponse:
    """Per topic its effective settings and per partition its offsets, size
    and segments; an offline or missing partition carries its error and
    reason (PARTITION_OFFLINE with the damage it found, ...)."""
    names = req.topics if req.topics is not None else listed(t.name for t in store.topics.list())
    out = []
    for name in names:
        try:
            topic = store.topics.get(limits.check_topic_name(name))
            if topic is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        except LogbrokerError as exc:
            out.append((name, *_err(exc), {}, ()))
            continue
        configs = topic.log_config(store.config.log).to_dict()
        configs["partitions"] = topic.partitions
        out.append((name, 0, "", configs, tuple(partition_row(store, name, p)
                                               for p in range(topic.partitions))))
    return m.DescribeTopicsResponse(topics=tuple(out))


def partition_row(store: Store, topic: str, p: int) -> tuple:
    """One DescribeTopics partition entry from the local log (or its error)."""
    try:
        lg = store.get_log(topic, p)
    except LogbrokerError as exc:
        return (p, -1, -1, -1, 0, 0, *_err(exc))
    error = (*_err(lg.offline),) if lg.offline is not None else (0, "")
    return (p, lg.log_start_offset, lg.log_end_offset, lg.high_watermark, lg.size_in_bytes(),
            len(lg.segments), *error)
