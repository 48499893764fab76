"""Topic administration: CreateTopics, DeleteTopics, DescribeTopics, each
topic's name, count and settings checked here, the change made by the
metadata interface (a single node's LMDB, or etcd in a cluster)."""

from __future__ import annotations

import logging

from .. import limits
from ..errors import LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import TopicDescription, TopicResult
from ..limits import listed

log = logging.getLogger("logbroker.topics")


async def create_topics(svc, req: m.CreateTopics, session) -> m.CreateTopicsResponse:
    """Each topic checked and created in turn (a topic's partitions are made
    in slices, the loop free meanwhile: metadata/local.py); a request over
    ``max_partitions_per_request`` is refused whole (POLICY_VIOLATION)."""
    try:
        limits.check_request_partitions(req.topics, svc.config.max_partitions_per_request)
    except LogbrokerError as exc:
        log.debug("CreateTopics refused: %s", exc.message)
        return m.CreateTopicsResponse(*_err(exc))
    out = []
    for name, partitions, configs in req.topics:
        try:
            name, partitions, configs = limits.check_new_topic(name, partitions, configs)
            await svc.meta.create_topic(name, partitions, dict(configs))
            out.append(TopicResult(name, 0, ""))
        except LogbrokerError as exc:
            log.debug("CreateTopics of %r refused: %s", name, exc.message)
            out.append(TopicResult(name, *_err(exc)))
    return m.CreateTopicsResponse(topics=tuple(out))


async def delete_topics(svc, req: m.DeleteTopics, session) -> m.DeleteTopicsResponse:
    out = []
    for name in req.topics:
        try:
            await svc.meta.delete_topic(limits.check_topic_name(name))
            out.append(TopicResult(name, 0, ""))
        except LogbrokerError as exc:
            out.append(TopicResult(name, *_err(exc)))
    return m.DeleteTopicsResponse(topics=tuple(out))


def describe_topics(svc, req: m.DescribeTopics, session) -> m.DescribeTopicsResponse:
    """Per topic its effective settings and per partition its offsets, size
    and segments; an offline or missing partition carries its error and
    reason (PARTITION_OFFLINE with the damage it found, ...)."""
    meta = svc.meta
    names = req.topics if req.topics is not None else listed(meta.topic_names())
    out = []
    for name in names:
        try:
            configs, parts = meta.describe_topic(limits.check_topic_name(name))
        except LogbrokerError as exc:
            out.append(TopicDescription(name, *_err(exc), {}, ()))
            continue
        out.append(TopicDescription(name, 0, "", configs, parts))
    return m.DescribeTopicsResponse(topics=tuple(out))
