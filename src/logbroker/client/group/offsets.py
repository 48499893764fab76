"""A group's committed offsets: commit and fetch through its coordinator.

Shared by the consumer (with or without membership) and the admin client.
A member's commit names its generation, member id and instance id; the
coordinator refuses a stale one (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID) and
applies nothing, and answers REBALANCE_IN_PROGRESS while the group waits
for the leader's assignment. A commit without membership (generation -1,
member id "") is accepted only while the group has no members.
"""

from __future__ import annotations

from typing import NamedTuple

from ...errors import (IllegalGenerationError, LogbrokerError, RebalanceInProgressError,
                       UnknownMemberIdError)
from ...protocol import messages as m
from ..net.metadata import part_error
from .coordinator import Coordinators

FENCED = (IllegalGenerationError, UnknownMemberIdError)


class Identity(NamedTuple):
    """Who commits: a member's generation, member id and instance id, or
    ``NO_MEMBER`` (an ``assign()`` consumer, the admin client)."""

    generation: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None


NO_MEMBER = Identity()


class GroupMetadata(NamedTuple):
    """A consumer's ``group_metadata()``, for a transactional producer's
    ``send_offsets_to_transaction``: its group and membership (generation
    -1, member id "": not a member; the group coordinator then checks
    nothing of it)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None


def fenced_error(exc: LogbrokerError, group: str, who: Identity) -> LogbrokerError:
    """The clear error a stale member's commit raises (same class as the broker's)."""
    if isinstance(exc, RebalanceInProgressError):
        return RebalanceInProgressError(
            f"group {group!r} is rebalancing: nothing was committed; poll() to complete the "
            "rebalance, then commit again")
    return type(exc)(
        f"commit refused: this member's generation {who.generation} (member id "
        f"{who.member_id!r}) of group {group!r} is stale, the group rebalanced without it; "
        f"nothing was committed and the consumer rejoins the group ({exc.message})")


async def commit(coordinators: Coordinators, group: str, entries: tuple,
                 who: Identity = NO_MEMBER) -> None:
    """Store ``entries`` ``(topic, partition, offset, metadata)`` for
    ``group`` atomically, blocking until durable (retried on a lost
    connection or a moved coordinator until ``request_timeout``). Raises
    the top-level error, else the first partition's error; a member's
    ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS as
    ``fenced_error`` says."""
    msg = m.CommitOffsets(group=group, offsets=entries, generation=who.generation,
                          member_id=who.member_id, group_instance_id=who.group_instance_id)
    try:
        resp = await coordinators.call(group, msg)
    except (*FENCED, RebalanceInProgressError) as exc:
        raise fenced_error(exc, group, who) if who.member_id else exc from None
    for topic, partition, err, message in resp.parts:
        if err:
            exc = part_error(err, message, topic, partition)
            if who.member_id and isinstance(exc, (*FENCED, RebalanceInProgressError)):
                raise fenced_error(exc, group, who)
            raise exc


async def fetch(coordinators: Coordinators, group: str, parts: "tuple | None",
                retry: bool = True) -> dict:
    """``{(topic, partition): (offset, metadata, commit_ms)}`` (offset -1:
    nothing committed) for ``parts`` (None: every committed partition).
    Raises as ``Coordinators.call`` (once without ``retry``)."""
    resp = await coordinators.call(group, m.FetchOffsets(group=group, parts=parts), retry=retry)
    out = {}
    for topic, partition, off, meta, ms in resp.parts:
        out[(topic, partition)] = (off, meta, ms)
    return out

