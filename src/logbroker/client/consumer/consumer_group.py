"""The consumer's group side, used by ``ConsumerCore``: its membership
(group/membership.py, when ``subscribe`` is called with a ``group``), its
offsets through the coordinator (group/offsets.py), auto-commit, and the two
sequences both shells run as they are (waiting.Steps): ``applying`` the
rebalance changes where the application polls (group/rebalance.py), and
``leaving`` the group on close.

Failures, the same in both shells: an explicit ``commit()`` raises; the
commit before a revocation, the commit on close, an auto-commit and leaving
the group on close are logged and the rebalance or the close goes on (as
Kafka's consumer and aiokafka do); a rebalance callback's exception is
raised by ``poll`` once every change is applied; ``on_revoke``'s while
closing is logged.

Auto-commit (``enable_auto_commit``, a subscribed member only, as Kafka):
every ``auto_commit_interval_ms``, at the start of a ``poll``, the positions
of the owned partitions (what earlier polls returned) that moved since this
consumer last committed them are committed in the background (a failure is
logged; an idle consumer writes nothing, where Kafka's commits them all
again); and before partitions are revoked or the consumer closes, their
positions are committed and waited for. An ``assign()`` consumer never
auto-commits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Generator

from ...errors import IllegalGenerationError, LogbrokerError, UnknownMemberIdError
from ..group import offsets as group_offsets
from ..group.coordinator import Coordinators
from ..group.membership import GroupMembership
from ..group.offsets import NO_MEMBER, Identity
from ..group.rebalance import ASSIGN, REVOKE, Change, ChangeQueue, Listener
from ..group.topic_filter import TopicFilter
from ..net.routing import Router
from ..settings import ConsumerSettings
from ..waiting import Call
from .fetch_buffer import FetchBuffer
from .fetcher import Fetcher

log = logging.getLogger("logbroker.client.group")


class ConsumerGroup:
    def __init__(self, settings: ConsumerSettings, router: Router, buffer: FetchBuffer,
                 fetcher: Fetcher, notify, schedule) -> None:
        self.settings, self.buffer, self.fetcher = settings, buffer, fetcher
        self.coordinators = Coordinators(router)
        fetcher.use_coordinators(self.coordinators)
        self.changes = ChangeQueue(notify, schedule)
        self.member = None if settings.group is None else GroupMembership(
            settings, router, self.coordinators, self.changes, notify)
        self.listener = Listener()
        self._schedule = schedule
        self._next_auto_commit = 0.0
        self._auto_task: "asyncio.Task | None" = None
        self._committed: dict = {}  # (topic, partition) -> offset this consumer last committed

    @property
    def managed(self) -> bool:
        """The membership decides the assignment (``subscribe`` with a group)."""
        return self.member is not None and bool(self.member.filter)

    # -- subscription (loop) -------------------------------------------------------------------
    def subscribe(self, topic_filter: TopicFilter, listener: Listener) -> None:
        """Join (or rejoin with) ``topic_filter``; requires a group."""
        self.listener = listener
        self.member.polled()
        self._next_auto_commit = time.monotonic() + self.settings.auto_commit_interval_ms / 1000
        self.member.subscribe(topic_filter)

    async def stop(self, leave: bool = True) -> None:
        """Leave the group (if a member) and end the membership's tasks."""
        if self.member is not None and self.member.active:
            self.member.unsubscribe()
            await self.member.stop(leave)
        self.changes.clear()

    def unsubscribe_now(self) -> None:
        """``assign()`` ends the subscription (caller's thread): the changes
        not applied yet are dropped, the member leaves in the background."""
        if self.managed or self.changes.pending():
            self.member.unsubscribe()
            while (item := self.changes.take()) is not None:
                self.changes.done(item[1])
            self._schedule(_spawn, self.stop)

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
        self._committed.update(((t, p), off) for t, p, off, _ in entries)

    def _auto_commit(self, entries: tuple) -> None:
        if self._auto_task is None or self._auto_task.done():
            self._auto_task = asyncio.ensure_future(self._commit_logged(entries, "auto-commit"))

    async def _commit_logged(self, entries: tuple, what: str) -> None:
        try:
            await self.commit(entries)
        except LogbrokerError as exc:
            log.warning("group %r: %s failed: %s", self.settings.group, what, exc)

    # -- the sequences both shells run (waiting.Steps) -----------------------------------------
    def applying(self) -> Generator:
        """Apply the queued partition changes in the polling thread, in
        order: a revocation commits the partitions' positions first
        (``enable_auto_commit``; a failure is logged), calls its callback,
        then drops them; an assignment adds them, then calls its callback.
        Raises the first callback's exception once every change is applied."""
        error = None
        while (item := self.changes.take()) is not None:
            change, done = item
            try:
                entries = self.before(change)
                if entries:
                    yield from self._logged(self.commit(entries), "commit before revoking")
                fn = self.listener.callback(change.kind)
                if fn is not None:
                    try:
                        yield Call(fn, (sorted(change.partitions),))
                    except Exception as exc:  # noqa: BLE001 - the application's: raised below
                        error = error or exc
                self.after(change)
            finally:
                self.changes.done(done)
        if error is not None:
            raise error

    def leaving(self) -> Generator:
        """``close()``'s steps for a subscribed member (none otherwise): commit
        its positions (``enable_auto_commit``), call ``on_revoke`` with its
        partitions (static members too: Kafka's onLeavePrepare), leave the
        group (a static member sends no LeaveGroup). A failure of any step is
        logged and the next one runs: closing never raises for them."""
        if not self.managed:
            return
        if self.settings.enable_auto_commit:
            yield from self._logged(self.commit(self.positions()), "commit on close")
        owned = sorted(self.buffer.states)
        fn = self.listener.on_revoke
        if owned and fn is not None:
            try:
                yield Call(fn, (owned,))
            except Exception:  # noqa: BLE001 - the application's: closing goes on
                log.exception("group %r: on_revoke while closing", self.settings.group)
        yield from self._logged(self.stop(leave=True), "leaving on close")

    def _logged(self, coro, what: str) -> Generator:
        """The step ``coro``, its failure logged (the shell's bound on the wait too)."""
        try:
            yield coro
        except (LogbrokerError, TimeoutError) as exc:
            log.warning("group %r: %s failed: %s", self.settings.group, what, exc)

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
            last = self._committed
            entries = tuple(e for e in self.positions() if last.get((e[0], e[1])) != e[2])
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
        records, and what this consumer committed of them: another member
        may commit them now), and gets the fetcher going."""
        if change.kind != ASSIGN:
            with self.buffer.lock:
                kept = [tp for tp in self.buffer.states if tp not in change.partitions]
            self.buffer.assign(kept)
            self._committed = {tp: off for tp, off in self._committed.items()
                               if tp not in change.partitions}
        self._schedule(self.fetcher.poke, True)

    async def aclose(self) -> None:
        await self.stop(leave=False)
        await self.coordinators.aclose()


def _spawn(make) -> None:
    """Start the coroutine ``make()`` as a task (on the client's loop)."""
    asyncio.ensure_future(make())
