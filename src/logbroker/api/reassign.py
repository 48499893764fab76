"""Partition reassignment: AlterReassignments and ListReassignments over
the metadata interface (metadata/reassignments.py; the rules in
cluster/reassignment.py).

Each partition of an AlterReassignments gets its own answer; its topic
name, partition number and replica ids are checked here first, and a
request naming more than ``MAX_PARTS`` partitions (each one is an etcd
compare-and-set) or one partition twice is refused whole
(INVALID_REQUEST). Every refusal, whole or per partition, is logged at
debug level by the answering pump (net/refusals.py).
"""

from __future__ import annotations

import asyncio

from .. import limits
from ..errors import InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.reassign_messages import Reassigned
from .edge import check_partition_key

MAX_PARTS = 10_000  # partitions one AlterReassignments may name
YIELD_EVERY = 64  # parts handled between two turns of the loop


def _check_parts(parts) -> None:
    if len(parts) > MAX_PARTS:
        raise InvalidRequestError(f"{len(parts)} partitions in one reassignment request; at most "
                                  f"{MAX_PARTS}")
    keys = {(p.topic, p.partition) for p in parts}
    if len(keys) != len(parts):
        raise InvalidRequestError("a reassignment request names a partition twice")


async def alter_reassignments(svc, req: m.AlterReassignments,
                              session) -> m.AlterReassignmentsResponse:
    """Start or cancel each partition's move, in request order."""
    try:
        svc.meta.check_available()
        _check_parts(req.parts)
    except LogbrokerError as exc:
        return m.AlterReassignmentsResponse(*_err(exc))
    out = []
    for i, (topic, partition, replicas) in enumerate(req.parts):
        if i % YIELD_EVERY == YIELD_EVERY - 1:
            await asyncio.sleep(0)  # refusals raise without awaiting: let the loop run
        try:
            check_partition_key(topic, partition)
            for r in replicas or ():
                limits.check_int(r, "a replica (a broker id)", 0, limits.MAX_INT32)
            await svc.meta.reassign(topic, partition, replicas)
            out.append(Reassigned(topic, partition, 0, ""))
        except LogbrokerError as exc:
            out.append(Reassigned(topic, partition, *_err(exc)))
    return m.AlterReassignmentsResponse(parts=tuple(out))


async def list_reassignments(svc, req: m.ListReassignments,
                             session) -> m.ListReassignmentsResponse:
    """The moves in progress among the named topics (None: all)."""
    try:
        svc.meta.check_available()
        wanted = None
        if req.topics is not None:
            if len(req.topics) > MAX_PARTS:
                raise InvalidRequestError(f"{len(req.topics)} topics; at most {MAX_PARTS}")
            wanted = {}
            for topic, partitions in req.topics:
                limits.check_topic_name(topic)
                wanted[topic] = None if partitions is None else frozenset(partitions)
    except LogbrokerError as exc:
        return m.ListReassignmentsResponse(*_err(exc))
    return m.ListReassignmentsResponse(parts=tuple(svc.meta.reassignments(wanted)))
