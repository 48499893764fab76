"""A group member's partition-ownership changes, applied where the application polls.

The membership loop (membership.py, on the client's loop) decides what the
member gains and loses; the application sees it inside ``poll()``, as with
Kafka's ConsumerRebalanceListener. The loop queues a ``Change`` and waits;
``poll`` (the thread that calls it for the sync consumer, the caller's task
for the asyncio one) applies it, in order:

- ``revoke``: commit the partitions' positions (with ``enable_auto_commit``),
  call ``on_revoke(partitions)``, then drop them (their buffered records are
  discarded; the next owner resumes at the committed offset);
- ``lost`` (the member was fenced: its generation is stale or it was
  expired): call ``on_lost(partitions)`` (default: ``on_revoke``), no
  commit (it would be refused), then drop them;
- ``assign``: add them (each starts at the group's committed offset, else
  ``auto_offset_reset``), then call ``on_assign(partitions)`` (which may seek).

Callbacks get a sorted list of ``(topic, partition)``. An exception from a
callback is raised by ``poll`` once the change is applied (the member stays
consistent); the asyncio consumer awaits callbacks that are coroutines.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Callable

REVOKE, LOST, ASSIGN = "revoke", "lost", "assign"


@dataclass(frozen=True)
class Change:
    kind: str  # REVOKE, LOST or ASSIGN
    partitions: frozenset


@dataclass(frozen=True)
class Listener:
    """The rebalance callbacks given to ``subscribe`` (each None or a callable)."""

    on_assign: "Callable | None" = None
    on_revoke: "Callable | None" = None
    on_lost: "Callable | None" = None

    def __post_init__(self) -> None:
        for name in ("on_assign", "on_revoke", "on_lost"):
            fn = getattr(self, name)
            if fn is not None and not callable(fn):
                raise TypeError(f"{name} must be callable or None, not {type(fn).__name__}")

    def callback(self, kind: str) -> "Callable | None":
        if kind == ASSIGN:
            return self.on_assign
        if kind == LOST:
            return self.on_lost or self.on_revoke
        return self.on_revoke

    def __bool__(self) -> bool:
        return any((self.on_assign, self.on_revoke, self.on_lost))


class ChangeQueue:
    """Changes from the loop to the polling side. ``notify`` wakes a waiting
    poll (loop side); ``schedule(fn, *args)`` runs ``fn`` on the loop (any
    thread)."""

    def __init__(self, notify, schedule) -> None:
        self._items: deque = deque()
        self._notify, self._schedule = notify, schedule

    async def apply(self, change: Change) -> None:
        """Queue ``change`` and wait until ``poll`` has applied it (loop side;
        blocks until the application polls)."""
        await self.post(change)

    def post(self, change: Change) -> asyncio.Future:
        """Queue ``change`` (loop side); the future resolves once applied."""
        fut = asyncio.get_running_loop().create_future()
        self._items.append((change, fut))
        self._notify()
        return fut

    def pending(self) -> bool:
        return bool(self._items)

    def take(self) -> "tuple[Change, asyncio.Future] | None":
        """The next change and its future (polling side), or None."""
        try:
            return self._items.popleft()
        except IndexError:
            return None

    def clear(self) -> None:
        """Forget the changes not applied yet (the membership ended; loop side)."""
        while (item := self.take()) is not None:
            _resolve(item[1])

    def done(self, fut: asyncio.Future) -> None:
        """The change of ``fut`` is applied (polling side, any thread)."""
        self._schedule(_resolve, fut)


def _resolve(fut: asyncio.Future) -> None:
    if not fut.done():
        fut.set_result(None)
