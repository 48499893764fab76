"""A group member's heartbeats, and its max_poll_interval_ms watch.

One task per member on the client's loop (membership.py starts it). Every
``heartbeat_interval_ms`` while the member has a generation (after its
JoinGroup answered) it sends Heartbeat on a connection of its own to the
coordinator, so neither a Fetch long poll nor a JoinGroup held by the
coordinator ever delays it. Answers:

- REBALANCE_IN_PROGRESS: rejoin (a cooperative member keeps its partitions);
- ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: the member was fenced or expired:
  it rejoins (member id "" for UNKNOWN_MEMBER_ID) and its partitions are
  lost (``on_lost``);
- FENCED_INSTANCE_ID: another process took this ``group_instance_id``:
  fatal, ``poll`` raises it;
- a moved or unreachable coordinator: found again at the next beat.

An answer for an older generation than the member's is ignored. When the
application has not called ``poll`` within ``max_poll_interval_ms`` the
member leaves the group at once (its partitions go to the others) and
rejoins at the next ``poll``, as Kafka's consumer does. Never raises: it
logs and carries on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING

from ...errors import (FencedInstanceIdError, IllegalGenerationError, LogbrokerError,
                      RebalanceInProgressError, UnknownMemberIdError)
from ...protocol import messages as m
from .coordinator import refinds

if TYPE_CHECKING:
    from .membership import GroupMembership

log = logging.getLogger("logbroker.client.group")


async def heartbeat_loop(member: "GroupMembership") -> None:
    """Beat until cancelled (see the module docstring)."""
    s = member.settings
    interval = s.heartbeat_interval_ms / 1000
    timeout = min(member.router.options.request_timeout, s.session_timeout_ms / 1000)
    while True:
        await asyncio.sleep(interval)
        try:
            if _poll_overdue(member):
                await member.leave_for_poll_timeout()
                continue
            if member.state not in ("completing", "stable") or not member.member_id:
                continue
            gen, mid = member.generation, member.member_id
            try:
                await member.coordinators.call(member.group, m.Heartbeat(
                    group=member.group, generation=gen, member_id=mid,
                    group_instance_id=s.group_instance_id), purpose="heartbeat",
                    timeout=timeout, retry=False)
            except LogbrokerError as exc:
                answered(member, exc, gen, mid)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug must not stop the heartbeats
            log.exception("group %r: heartbeat loop", member.group)


def _poll_overdue(member: "GroupMembership") -> bool:
    limit = member.settings.max_poll_interval_ms / 1000
    return bool(member.member_id) and not member.poll_expired \
        and time.monotonic() - member.last_poll > limit


def answered(member: "GroupMembership", exc: LogbrokerError, gen: int, mid: str) -> None:
    """A heartbeat of generation ``gen`` failed with ``exc``."""
    if gen != member.generation or mid != member.member_id:
        return  # an answer about a generation the member has left behind
    if isinstance(exc, RebalanceInProgressError):
        member.request_rejoin("the coordinator started a rebalance")
    elif isinstance(exc, UnknownMemberIdError):
        log.warning("group %r: the coordinator does not know member %s any more (%s): "
                    "its partitions are lost, rejoining", member.group, mid, exc.message)
        member.reset(member_id=True)
    elif isinstance(exc, IllegalGenerationError):
        log.warning("group %r: generation %d is stale (%s): its partitions are lost, "
                    "rejoining", member.group, gen, exc.message)
        member.reset(member_id=False)
    elif isinstance(exc, FencedInstanceIdError):
        member.fatal = exc
        member.notify()
        member.reset(member_id=True)
    elif refinds(exc):
        log.info("group %r: heartbeat: %s (finding the coordinator again)", member.group, exc)
    else:
        log.warning("group %r: heartbeat: %s", member.group, exc)
