"""A group's coordinator: finding it, and sending it the group's requests.

Every request about one group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
CommitOffsets, FetchOffsets, DescribeGroups, DeleteGroups) goes to the
broker that coordinates the group; FindCoordinator, sent to any broker,
names it. The answer is cached per group until a request to it fails with
NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS or
a lost connection; then the coordinator is found again, after a backoff
(50 ms doubling to 1 s, jittered). On a single node the broker coordinates
every group.

Links: one per (coordinator, purpose). A broker answers one connection's
requests in order, and a JoinGroup is held for a whole rebalance, so a
member's JoinGroup/SyncGroup ("join"), its heartbeats ("heartbeat") and its
commits and offset lookups ("") each have a connection of their own; none
shares the consumer's Fetch long polls.
"""

from __future__ import annotations

import asyncio
import time
from typing import Iterable

from ...errors import (BrokerUnavailableError, CoordinatorLoadInProgressError,
                       CoordinatorNotAvailableError, LogbrokerError, NotCoordinatorError,
                       RequestTimedOutError)
from ...protocol import messages as m
from ..net.backoff import Backoff
from ..net.link import BrokerLink
from ..net.routing import Router

# the coordinator moved, is not there yet, or cannot be reached: find it again
REFIND = (NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError,
          BrokerUnavailableError, RequestTimedOutError)


def refinds(exc: BaseException) -> bool:
    """Whether ``exc`` means "find the group's coordinator again"."""
    return isinstance(exc, REFIND)


class Coordinators:
    """The coordinators of the groups a client talks to (loop-bound)."""

    def __init__(self, router: Router, key_type: int = 0) -> None:
        """``key_type``: what the names are (FindCoordinator's key type): 0
        consumer groups, 1 transactional ids (their transaction coordinators)."""
        self.router, self.key_type = router, key_type
        self._known: dict[str, tuple[int, str, int]] = {}  # group -> (broker id, host, port)
        self._links: dict[tuple, BrokerLink] = {}

    def known(self, group: str) -> "tuple[int, str, int] | None":
        return self._known.get(group)

    def forget(self, group: str) -> None:
        """The coordinator of ``group`` is in doubt: the next call finds it again."""
        self._known.pop(group, None)

    async def find(self, group: str, timeout: "float | None" = None) -> tuple[int, str, int]:
        """``(broker id, host, port)`` of ``group``'s coordinator (cached).
        Blocks for one FindCoordinator, retried until ``timeout`` (default
        ``request_timeout``) while the answer is retriable; raises its error."""
        coord = self._known.get(group)
        if coord is None:
            resp = await self.router.call_any(m.FindCoordinator(group=group,
                                                                    key_type=self.key_type), timeout)
            coord = self._known[group] = (resp.broker_id, resp.host, resp.port)
        return coord

    def link(self, coord: tuple[int, str, int], purpose: str = "") -> BrokerLink:
        key = (*coord, purpose)
        link = self._links.get(key)
        if link is None:
            addr = (coord[1], coord[2])
            link = self._links[key] = BrokerLink(
                self.router.options, lambda: [self.router.reachable(addr)],
                f"coordinator {coord[0]}")
        return link

    async def call(self, group: str, message: m.Message, *, purpose: str = "",
                   timeout: "float | None" = None, retry: bool = True) -> m.Response:
        """Send ``message`` to ``group``'s coordinator and return the answer
        within ``timeout`` s (default ``request_timeout``). A coordinator
        error or a lost connection makes it find the coordinator again and,
        with ``retry``, send again after a backoff until the deadline.
        Raises the answer's top-level error as its registered exception,
        ``BrokerUnavailableError`` or ``RequestTimedOutError``."""
        timeout = self.router.options.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        opts = self.router.options
        backoff = Backoff(opts.reconnect_backoff, opts.reconnect_backoff_max)
        while True:
            left = max(deadline - time.monotonic(), 0.001)
            try:
                coord = await self.find(group, left)
                link = self.link(coord, purpose)
                return await link.call(message, max(deadline - time.monotonic(), 0.001),
                                       retry=False)
            except LogbrokerError as exc:
                if not refinds(exc):
                    raise
                self.forget(group)
                if not retry or time.monotonic() + backoff.delay(backoff.attempts + 1) >= deadline:
                    raise
            await asyncio.sleep(backoff.next())

    async def by_coordinator(self, groups: Iterable[str],
                             timeout: "float | None" = None) -> dict[tuple, list[str]]:
        """``{coordinator: [group, ...]}`` for ``groups`` (found concurrently)."""
        names = list(dict.fromkeys(groups))
        found = await asyncio.gather(*(self.find(g, timeout) for g in names))
        out: dict[tuple, list[str]] = {}
        for group, coord in zip(names, found):
            out.setdefault(coord, []).append(group)
        return out

    async def aclose(self) -> None:
        for link in list(self._links.values()):
            await link.aclose()
