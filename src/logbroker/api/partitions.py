"""CreatePartitions: each topic's partition count raised through the
metadata interface (metadata/partitions.py: a single node's LMDB, or etcd
in a cluster). The partitions one request adds, in all, are bounded by
``max_partitions_per_request`` (POLICY_VIOLATION, the whole request), as
CreateTopics' are; each topic's refusal is its own answer, logged at
debug level."""

from __future__ import annotations

import logging

from ..errors import LogbrokerError, PolicyViolationError, UnknownTopicOrPartitionError
from ..errors import code_and_message as _err
from ..limits import MAX_PARTITIONS, check_topic_name
from ..protocol import messages as m
from ..protocol.parts import TopicResult

log = logging.getLogger("logbroker.topics")


def _asked(counts: dict, topics) -> int:
    """The partitions ``topics`` would add, in all (unknown topics and
    counts out of range add none: their own check refuses them)."""
    total = 0
    for name, count, _ in topics:
        present = counts.get(name)
        if present is not None and isinstance(count, int) and count <= MAX_PARTITIONS:
            total += max(0, count - present)
    return total


async def create_partitions(svc, req: m.CreatePartitions,
                            session) -> m.CreatePartitionsResponse:
    """Each topic in turn: its name, not internal, its new count above the
    present one (INVALID_PARTITIONS), assignments as the metadata allows
    (INVALID_REPLICA_ASSIGNMENT); ``validate_only`` makes nothing. More
    entries or new partitions in all than ``max_partitions_per_request``
    (every entry adds one at least): POLICY_VIOLATION, nothing done."""
    meta = svc.meta
    limit = svc.config.max_partitions_per_request
    counts = meta.topic_counts()  # one read for the whole request
    asked = max(len(req.topics), _asked(counts, req.topics))
    if asked > limit:
        exc = PolicyViolationError(f"CreatePartitions asks for {asked} new partitions in all; "
                                   f"max_partitions_per_request is {limit}")
        log.debug("CreatePartitions refused: %s", exc.message)
        return m.CreatePartitionsResponse(*_err(exc))
    out = []
    for name, count, assignments in req.topics:
        try:
            check_topic_name(name)
            if name not in counts:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            await meta.add_partitions(name, count, tuple(assignments), req.validate_only)
            out.append(TopicResult(name, 0, ""))
            if not req.validate_only:
                log.info("topic %s now has %d partitions", name, count)
        except LogbrokerError as exc:
            log.debug("CreatePartitions of %s refused: %s", name, exc.message)
            out.append(TopicResult(name, *_err(exc)))
    return m.CreatePartitionsResponse(topics=tuple(out))
