"""The consumer's group side, used by ``ConsumerCore``: its membership
(membership.py, when ``subscribe`` is called with a ``group``), its offsets
through the coordinator (group_offsets.py), auto-commit, and the steps of
applying a rebalance change in the polling thread (rebalance.py).

Auto-commit (``enable_auto_commit``, a subscribed member only, as Kafka):
every ``auto_commit_interval_ms``, at the start of a ``poll``, the positions
of the owned partitions (what earlier polls returned) are committed in the
background (a failure is logged); and before partitions are revoked or the
consumer closes, their positions are committed and waited for. An
``assign()`` consumer never auto-commits.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...errors import IllegalGenerationError, LogbrokerError, UnknownMemberIdError
from ..group import offsets as group_offsets
from ..group.coordinator import Coordinators
from .fetch_buffer import FetchBuffer
from .fetcher import Fetcher
from ..group.offsets import NO_MEMBER, Identity
from ..group.membership import GroupMembership
from ..group.rebalance import ASSIGN, REVOKE, Change, ChangeQueue, Listener
from ..net.routing import Router
from ..settings import ConsumerSettings
from ..group.topic_filter import TopicFilter

log = logging.getLogger("logbroker.client.group")


class ConsumerGroup:
    def __init__(self, settings: ConsumerSettings, router: Router, buffer: FetchBuffer,
                 fetcher: Fetcher, notify, schedule) -> None:
        self.settings, self.buffer, self.fetcher = settings, buffer, fetcher
        self.coordinators = fetcher.offsets = Coordinators(router)
        self.changes = ChangeQueue(notify, schedule)
        self.member = None if settings.group is None else GroupMembership(
            settings, router, self.coordinators, self.changes, notify)
        self.listener = Listener()
        self._schedule = schedule
        self._next_auto_commit = 0.0
        self._auto_task: "asyncio.Task | None" = None

    @property
    def managed(self) -> bool:
        """The membership decides the assignment (``subscribe`` with a group)."""
        return self.member is not None and bool(self.member.filter)

    # -- subscription (loop) -------------------------------------------------------------------
    def subscribe(self, topic_filter: TopicFilter, listener: Listener) -> None:
        """Join (or rejoin with) ``topic_filter``; requires a group."""
        self.listener = listener
        self.member.last_poll = time.monotonic()
        self._next_auto_commit = time.monotonic() + self.settings.auto_commit_interval_ms / 1000
        self.member.subscribe(topic_filter)

    async def stop(self, leave: bool = True) -> None:
        """Leave the group (if a member) and end the membership's tasks."""
        if self.member is not None and self.member.active:
            self.member.filter = TopicFilter()
            await self.member.stop(leave)
        self.changes.clear()

    # -- offsets (loop) ------------------------------------------------------------------------
    def identity(self) -> Identity:
        return self.member.identity() if self.managed else NO_MEMBER

    async def commit(self, entries: tuple) -> None:
        """Commit ``entries`` as this member (or without membership); a
        fenced member rejoins (group_offsets.commit says what is raised)."""
        who = self.identity()
        try:
            await group_offsets.commit(self.coordinators, self.settings.group, entries, who)
        except (IllegalGenerationError, UnknownMemberIdError) as exc:
            member = self.member
            if who.member_id and member is not None and member.generation == who.generation:
                member.reset(member_id=isinstance(exc, UnknownMemberIdError))
            raise

    def _auto_commit(self, entries: tuple) -> None:
        if self._auto_task is None or self._auto_task.done():
            self._auto_task = asyncio.ensure_future(self._commit_logged(entries, "auto-commit"))

    async def _commit_logged(self, entries: tuple, what: str) -> None:
        try:
            await self.commit(entries)
        except LogbrokerError as exc:
            log.warning("group %r: %s failed: %s", self.settings.group, what, exc)

    def committing(self, entries: tuple, what: str):
        """A coroutine committing ``entries``, errors logged (revocation, close)."""
        return self._commit_logged(entries, what)

    # -- the polling side (caller's thread) ----------------------------------------------------
    def polled(self) -> None:
        """At the start of every ``poll``: restart the poll-interval clock,
        rejoin after a poll timeout, auto-commit when due."""
        member = self.member
        if member is None or not self.managed:
            return
        member.polled()
        if member.poll_expired:
            self._schedule(member.resume)
        now = time.monotonic()
        if self.settings.enable_auto_commit and now >= self._next_auto_commit:
            self._next_auto_commit = now + self.settings.auto_commit_interval_ms / 1000
            entries = self.positions()
            if entries:
                self._schedule(self._auto_commit, entries)

    def positions(self, partitions=None) -> tuple:
        """Commit entries for the positions of ``partitions`` (default: all assigned)."""
        with self.buffer.lock:
            states = self.buffer.states
            wanted = states if partitions is None else [tp for tp in partitions if tp in states]
            return tuple((t, p, states[(t, p)].position, "") for t, p in wanted
                         if states[(t, p)].position is not None)

    def before(self, change: Change) -> tuple:
        """First step of applying ``change``: adds assigned partitions;
        returns the entries to commit first (a revocation with auto-commit)."""
        if change.kind == ASSIGN:
            with self.buffer.lock:
                kept = list(self.buffer.states)
            self.buffer.assign(kept + sorted(change.partitions - set(kept)))
            return ()
        if change.kind == REVOKE and self.settings.enable_auto_commit:
            return self.positions(sorted(change.partitions))
        return ()

    def after(self, change: Change) -> None:
        """Last step: drops revoked or lost partitions (and their buffered
        records), and gets the fetcher going."""
        if change.kind != ASSIGN:
            with self.buffer.lock:
                kept = [tp for tp in self.buffer.states if tp not in change.partitions]
            self.buffer.assign(kept)
        self._schedule(self.fetcher.poke, True)

    async def aclose(self) -> None:
        await self.stop(leave=False)
        await self.coordinators.aclose()
