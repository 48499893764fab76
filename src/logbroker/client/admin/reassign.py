"""Partition reassignment for the admin client (``Admin.reassign_partitions``,
``Admin.list_partition_reassignments``; docs/cluster.md, "Reassigning
partitions"): arguments checked before anything is sent, one request to
any broker, the answers as values of results.py."""

from __future__ import annotations

from ...errors import InvalidReplicaAssignmentError
from ...protocol import messages as m
from ...protocol.reassign_messages import Reassignment, WantedTopic
from .. import validate
from ..net.metadata import part_error
from .results import PartitionReassignment


def _moves(moves) -> tuple:
    """``{(topic, partition): [broker ids] or None}`` as request parts; a
    wrong type is TypeError, an empty list INVALID_REPLICA_ASSIGNMENT."""
    if not isinstance(moves, dict):
        raise TypeError(f"moves must be a dict {{(topic, partition): [broker ids] or None}}, "
                        f"not {type(moves).__name__}")
    parts = []
    for key, replicas in moves.items():
        topic, partition = validate.topic_partition(key)
        if replicas is not None:
            replicas = tuple(validate.count(r, "a replica (a broker id)", 0)
                             for r in validate.iterable(replicas, "replicas"))
            if not replicas:
                raise InvalidReplicaAssignmentError(
                    f"{topic}[{partition}]: an empty replica list (None cancels a move)")
        parts.append(Reassignment(topic, partition, replicas))
    return tuple(parts)


async def reassign_partitions(router, moves, raise_errors: bool) -> dict:
    """``Admin.reassign_partitions``: one AlterReassignments, sent once."""
    parts = _moves(moves)
    resp = await router.call_any(m.AlterReassignments(parts=parts), retry=False)
    out = {(t, p): part_error(err, msg, t, p) if err else None for t, p, err, msg in resp.parts}
    router.invalidate()  # replicas and leaders change: route by the new ones
    first = next((exc for exc in out.values() if exc is not None), None)
    if raise_errors and first is not None:
        raise first
    return out


async def list_partition_reassignments(router, topics) -> dict:
    """``Admin.list_partition_reassignments``: one ListReassignments."""
    wanted = None if topics is None else tuple(WantedTopic(t, None)
                                               for t in validate.topics(topics))
    resp = await router.call_any(m.ListReassignments(topics=wanted))
    return {(t, p): PartitionReassignment(t, p, tuple(replicas), tuple(adding), tuple(removing))
            for t, p, replicas, adding, removing in resp.parts}
