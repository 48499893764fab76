"""A group member's heartbeats, and its max_poll_interval_ms watch.

One task per member on the client's loop: ``GroupMembership`` (membership.py)
starts ``heartbeat_loop(member)`` with itself, and this module reads its
generation and settings and reports through its methods (``poll_overdue``,
``leave_for_poll_timeout``, ``heartbeat_failed``), never importing it. Every
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

(``GroupMembership.heartbeat_failed`` applies these.) An answer for an
older generation than the member's is ignored. When the application has
not called ``poll`` within ``max_poll_interval_ms`` the member leaves the
group at once (its partitions go to the others) and rejoins at the next
``poll``, as Kafka's consumer does. Never raises: it logs and carries on.
"""

from __future__ import annotations

import asyncio
import logging

from ...errors import LogbrokerError
from ...protocol import messages as m

log = logging.getLogger("logbroker.client.group")


async def heartbeat_loop(member) -> None:
    """Beat for ``member`` (a ``GroupMembership``) until cancelled (see the
    module docstring)."""
    s = member.settings
    interval = s.heartbeat_interval_ms / 1000
    timeout = min(member.router.options.request_timeout, s.session_timeout_ms / 1000)
    while True:
        await asyncio.sleep(interval)
        try:
            if member.poll_overdue():
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
                member.heartbeat_failed(exc, gen, mid)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug must not stop the heartbeats
            log.exception("group %r: heartbeat loop", member.group)
