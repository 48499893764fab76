"""The consumer's I/O side: one long-poll Fetch in flight per leader broker.

Runs on the client's loop. A *main loop* resolves positions that are
unknown (committed offset of the group, else ``auto_offset_reset`` via
ListOffsets to the leaders), refreshes subscribed topics' partitions, and
starts a *fetch session* (fetch_session.py) for every broker that leads an
assigned partition with a position. Each session keeps one Fetch in flight
to its broker, for the partitions that broker leads, on a connection of its
own (a long poll delays everything behind it on its connection), buffers
the answer and fetches again at once (prefetch) until ``prefetch_bytes`` are
buffered or it leads nothing fetchable any more; then it ends and wakes the
main loop. So the brokers are polled concurrently and a slow long poll on
one never delays another's data. A partition is in at most one session's
request at a time.

A leader change (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, ... or a
lost connection) marks the metadata stale; the session refreshes it (paced
by the router), and the partition moves to its new leader's session at the
next round. The consumer never gives up: connection failures are kept in
``error`` for ``poll()`` to raise if no data arrives within its timeout;
the loops keep retrying with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...errors import (BrokerUnavailableError, LogbrokerError, OffsetOutOfRangeError,
                       RequestTimedOutError, TooManyConnectionsError)
from ...protocol import gc_pause
from ..group import offsets as group_offsets
from ..group.coordinator import Coordinators
from ..group.topic_filter import TopicFilter
from ..net.backoff import Backoff
from ..net.cluster_meta import reroutes
from ..net.link import cancel_and_wait
from ..net.metadata import list_offsets, part_error
from ..net.routing import Router
from ..net.throttle import Throttles
from ..settings import ConsumerSettings
from ..validate import SPECS
from .fetch_buffer import FetchBuffer, PartitionState
from .fetch_session import FetchSession
from .session_book import SessionBook

log = logging.getLogger("logbroker.client")
_CONNECTION = (BrokerUnavailableError, RequestTimedOutError, TooManyConnectionsError)


class Fetcher:
    def __init__(self, settings: ConsumerSettings, buffer: FetchBuffer, router: Router,
                 notify) -> None:
        self.settings, self.buffer, self.router = settings, buffer, router
        self.notify = notify  # data or an error arrived (called on the loop)
        self.error: "LogbrokerError | None" = None  # a broker is unreachable
        self.fatal: "LogbrokerError | None" = None  # a refused request, raised once by poll
        self.topic_filter = TopicFilter()  # what subscribe() named
        self.managed = False  # the group membership decides the assignment
        self._offsets: "Coordinators | None" = None  # committed offsets' route (use_coordinators)
        self.sessions: dict[int, FetchSession] = {}  # broker id -> its fetch session
        self._books: dict[int, SessionBook] = {}  # broker id -> what its fetch session holds
        self._where: dict[tuple[str, int], int] = {}  # partition -> the broker whose book wants it
        self._leaders_seen = -1  # the routing cache's version the books follow
        self._unrouted: dict[tuple[str, int], None] = {}  # fetchable, no leader known yet
        self._resolving: dict = {}  # state -> (gen, future): its position is being asked for
        self.abandoned = 0  # fetches in flight given up (their connection dropped) by a restart
        self.sessions_started = 0  # FetchSessions started (one per broker while there is room)
        self.visits = 0  # partition states distribute looked at (its cost: O(changed))
        self.throttles = Throttles()  # brokers whose quota throttle runs (fetch_session.py)
        self._topics_seen: dict[str, int] = {}
        self._next_metadata = 0.0
        self._wakeup = asyncio.Event()
        self._task: "asyncio.Task | None" = None
        self.waiting = True  # no fetch planned: poke() needed for more data

    def use_coordinators(self, coordinators: Coordinators) -> None:
        """Ask ``coordinators`` for the group's committed offsets (the group side's)."""
        self._offsets = coordinators

    def book(self, broker: int) -> SessionBook:
        """Our side of ``broker``'s fetch session (session_book.py), kept
        across fetch sessions' tasks (the broker keeps it on the connection)."""
        book = self._books.get(broker)
        if book is None:
            book = self._books[broker] = SessionBook()
        return book

    def backoff(self) -> Backoff:
        opts = self.router.options
        return Backoff(opts.reconnect_backoff, opts.reconnect_backoff_max)

    def poke(self, restart: bool = False) -> None:
        """Something changed (assignment, seek, buffer space): fetch again
        (loop). With ``restart`` the long polls in flight are abandoned
        (their connections dropped) so the new positions are fetched at once
        rather than after up to ``fetch_max_wait_ms``."""
        if restart:
            for session in [s for s in self.sessions.values() if s.in_flight]:
                self.abandoned += 1
                session.abandon()
        self.wake()
        if self._task is None or self._task.done():
            self.waiting = False
            self._task = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        self._wakeup.set()

    async def _run(self) -> None:
        backoff = self.backoff()
        while True:
            self._wakeup.clear()
            try:
                await self._refresh_subscription()
                await self.resolve_positions()
                look_again = await self._spread()
                backoff.reset()
            except _CONNECTION as exc:
                self.unreachable(exc)
                await asyncio.sleep(backoff.next())
                continue
            except LogbrokerError as exc:
                self.reached()
                if not exc.retriable:  # e.g. a refused group name: poll raises it once
                    log.warning("consumer fetch loop: %s", exc)
                    self.refused(exc)
                await asyncio.sleep(backoff.next())
                continue
            # waiting: a poll that frees buffer space must wake us, also while a
            # session long-polls caught-up partitions (the others' sessions ended
            # on a full buffer and only this loop starts them again)
            self.waiting = not self.sessions or self.buffer.buffered >= self.buffer.prefetch_bytes
            if self.topic_filter and not self.managed:
                due = self._next_metadata - time.monotonic()
                look_again = due if look_again is None else min(look_again, due)
            try:
                async with asyncio.timeout(None if look_again is None else max(look_again, 0)):
                    await self._wakeup.wait()
            except TimeoutError:
                pass
            self.waiting = False

    async def _spread(self) -> "float | None":
        """Bring the books up to date (``distribute``) and start a session
        for each broker that leads a fetchable partition; returns when to
        look again (some partition has no leader yet) or None. Before any
        leader is known (a consumer's start) the assignment's topics are
        asked for first: the states are then distributed once, not once
        unrouted and again, every one, when the answer moves the leaders."""
        cache = self.router.cache
        if cache.stale and not cache.leaders and self.buffer.states:
            with self.buffer.lock:
                topics = {tp[0] for tp in self.buffer.states}
            self.router.track(topics)
            await self.router.refresh(force=True, retry=False)
        unrouted = self.distribute()
        if unrouted or cache.doubted:
            self.router.track({tp[0] for tp in unrouted})
            await self.router.refresh(force=bool(unrouted), retry=False)
            unrouted = self.distribute()
        if self.buffer.full:  # a session would end at once: a poll that frees space wakes us
            return self.router.options.reconnect_backoff_max if unrouted else None
        for broker, book in self._books.items():
            if book.wanted and broker not in self.sessions:
                self.sessions[broker] = FetchSession(self, broker)
                self.sessions_started += 1
        return self.router.options.reconnect_backoff_max if unrouted else None

    def distribute(self) -> list:
        """Tell each broker's book (session_book.py) what changed among the
        partitions it should fetch: the states marked changed (fetch_buffer.py),
        or every state when the leaders moved. A fetchable partition goes to
        its leader's book; one moving between brokers is fetched again from
        its position (a new generation: what the old leader still sends is
        dropped, never read twice). Returns the fetchable partitions without
        a leader (kept until one is known: the main loop refreshes the
        metadata for them). O(partitions changed); loop. The cyclic GC is
        paused meanwhile (protocol/gc_pause.py): an assignment's first call
        makes tuples for every partition."""
        gc_pause.pause()
        try:
            return self._distribute()
        finally:
            gc_pause.resume()

    def _distribute(self) -> list:
        cache, buffer = self.router.cache, self.buffer
        leaders, size = cache.leaders, self.settings.max_partition_fetch_bytes
        unrouted, where, books = self._unrouted, self._where, self._books
        with buffer.lock:
            states = buffer.states
            changed = buffer.take_changed()
            if cache.version != self._leaders_seen:  # leaders moved: every partition again
                self._leaders_seen = cache.version
                changed = list(dict.fromkeys(changed + list(states.values())))
                for tp in [tp for tp in where if tp not in states]:
                    books[where.pop(tp)].unwant(tp)
                for tp in [tp for tp in unrouted if tp not in states]:
                    del unrouted[tp]
            self.visits += len(changed)
            for st in changed:
                tp = (st.topic, st.partition)
                fetchable = st.fetchable and states.get(tp) is st
                leader = leaders.get(tp) if fetchable else None
                was = where.get(tp)
                if fetchable and leader is None:
                    unrouted[tp] = None
                else:
                    unrouted.pop(tp, None)
                if was is not None and was != leader:
                    books[was].unwant(tp)
                    del where[tp]
                    if leader is not None:  # moved: drop what the old leader sends
                        st.refetch()
                        buffer.changed.pop(st, None)
                if leader is not None:
                    self.book(leader).want(tp, (st.topic, st.partition, st.fetch_pos, size), st.gen)
                    where[tp] = leader
        return list(unrouted)

    # -- what the fetch sessions report (fetch_session.py) -------------------------------------
    def forget(self, session: FetchSession) -> None:
        """``session`` ended (or was abandoned)."""
        if self.sessions.get(session.broker) is session:
            del self.sessions[session.broker]

    def unreachable(self, exc: LogbrokerError) -> None:
        """No broker answered: ``poll`` raises ``exc`` if no data arrives in time."""
        self.error = exc
        self.notify()

    def refused(self, exc: LogbrokerError) -> None:
        """A broker refused a whole request (not retriable): ``poll`` raises it once."""
        self.fatal = exc
        self.notify()

    def take_fatal(self) -> "LogbrokerError | None":
        """The refusal kept for ``poll`` to raise (once), or None."""
        fatal, self.fatal = self.fatal, None
        return fatal

    def reached(self) -> None:
        """A broker answered: an earlier ``unreachable`` is over."""
        self.error = None

    def part_failed(self, st: PartitionState, code: int, message: str) -> bool:
        """A partition's error in a Fetch answer; True if it calls for a
        metadata refresh (the partition moved)."""
        exc = part_error(code, message, st.topic, st.partition)
        with self.buffer.lock:
            if isinstance(exc, OffsetOutOfRangeError) and self.settings.auto_offset_reset != "none":
                log.info("%s: resetting to %s", exc, self.settings.auto_offset_reset)
                st.seek(None)
                st.reset = self.settings.auto_offset_reset
            elif not exc.retriable:
                self.buffer.failed(st, exc)
        if reroutes(exc):
            self.router.invalidate([(st.topic, st.partition)])
            return True
        return False

    # -- positions --------------------------------------------------------------------------------
    async def resolve_positions(self, only: "list[PartitionState] | None" = None,
                                retry: bool = False) -> None:
        """Give every assigned partition (or those in ``only``) without a
        position one: the group's committed offset, else its pending reset
        (``seek_to_beginning`` / ``seek_to_end``) or ``auto_offset_reset``.
        A partition another caller is resolving already (the fetch loop and
        ``position()``) is not asked for twice: this waits for that answer,
        and asks itself only if it did not come. Raises connection and
        routing errors: of one attempt (the fetch loop tries again), or with
        ``retry`` after ``request_timeout`` (a caller that blocks)."""
        while True:
            gc_pause.pause()  # an assignment's first pass makes a tuple a partition (distribute's)
            try:
                with self.buffer.lock:
                    todo = [(st, st.gen) for st in only if st.position is None
                            and st.error is None] \
                        if only else [(st, st.gen) for st in self.buffer.without_position()]
            finally:
                gc_pause.resume()
            if not todo:
                return
            resolving = self._resolving
            if not resolving:  # nobody else resolving (10,000 states: two passes fewer)
                theirs, mine = (), todo
            else:
                theirs = {resolving[st][1] for st, gen in todo
                          if st in resolving and resolving[st][0] == gen}
                mine = [(st, gen) for st, gen in todo
                        if st not in resolving or resolving[st][0] != gen]
            if mine and not only and self.settings.group is None:
                self._settle(mine, {}, None)  # no request: each by its first fetch, now
            elif mine:
                done = asyncio.get_running_loop().create_future()
                for st, gen in mine:
                    resolving[st] = (gen, done)
                try:
                    await self._resolve(mine, retry, by_fetch=not only)
                finally:
                    for st, _ in mine:
                        if resolving.get(st, (0, None))[1] is done:
                            del resolving[st]
                    done.set_result(None)
            if not theirs:
                return
            await asyncio.wait(theirs)  # then whatever they left unresolved is ours

    async def _resolve(self, todo: list, retry: bool, by_fetch: bool = False) -> None:
        """Resolve ``[(state, gen)]`` (see ``resolve_positions``); a state
        seeked meanwhile (another gen) keeps its new position. ``by_fetch``
        (the fetch loop's own resolving): a reset to either end is left to
        the first fetch (``PartitionState.fetch_from_end``), no ListOffsets;
        a caller that needs the position now (``position()``) asks ListOffsets."""
        committed = {}
        if self.settings.group is not None:
            wanted = [st for st, _ in todo if st.reset is None]
            if wanted:
                committed = await self.committed([(st.topic, st.partition) for st in wanted],
                                                 retry=retry)
        offsets, missing = {}, []
        for st, gen in todo:
            off = committed.get((st.topic, st.partition))
            if off is not None and off[0] >= 0:
                offsets[st] = off[0]
            else:
                missing.append(st)
        policy_missing = [st for st in missing if (st.reset or self.settings.auto_offset_reset)
                          != "none"]
        by_end = set()
        if by_fetch:
            by_end, policy_missing = set(policy_missing), []
        if policy_missing:
            spec = {st: SPECS[st.reset or self.settings.auto_offset_reset] for st in policy_missing}
            found = await self.list_offsets({(st.topic, st.partition): spec[st]
                                             for st in policy_missing}, retry=retry)
            for st in policy_missing:
                offsets[st] = found[(st.topic, st.partition)][0]
        self._settle(todo, offsets, by_end)

    def _settle(self, todo: list, offsets: dict, by_end: "set | None") -> None:
        """Give each ``(state, gen)`` of ``todo`` not seeked meanwhile its
        position: its offset in ``offsets``, else, in ``by_end`` (None: any
        whose reset policy is not "none"), the reset its first fetch
        resolves; else it fails (``auto_offset_reset='none'``)."""
        self.error = None  # the brokers answered (or none was asked)
        default = self.settings.auto_offset_reset
        with self.buffer.lock:
            for st, gen in todo:
                if st.gen != gen:
                    continue
                if st in offsets:
                    st.seek(offsets[st])
                elif (st.reset or default) != "none" if by_end is None else st in by_end:
                    st.fetch_from_end(SPECS[st.reset or default])
                else:
                    self.buffer.failed(st, OffsetOutOfRangeError(
                        f"{st.topic}[{st.partition}]: no committed offset and "
                        "auto_offset_reset='none'"))
                    self.notify()

    async def list_offsets(self, specs: dict, retry: bool = True) -> dict:
        """``{(topic, partition): spec}`` -> ``{(topic, partition): (offset,
        timestamp)}``, from each partition's leader; raises the first
        partition's error."""
        return await list_offsets(self.router, specs, retry=retry,
                                  isolation=self.settings.isolation)

    async def committed(self, tps, retry: bool = True) -> dict:
        """The group's committed ``(offset, metadata, commit_ms)`` per partition
        (offset -1: none), from its coordinator."""
        return await group_offsets.fetch(self._offsets, self.settings.group, tuple(tps), retry,
                                         require_stable=self.settings.isolation == 1)

    # -- subscriptions (without a group: every partition of the topics) ------------------------
    async def _refresh_subscription(self, force: bool = False) -> None:
        if self.managed or not self.topic_filter or \
                (not force and time.monotonic() < self._next_metadata):
            return
        pattern = self.topic_filter.pattern is not None
        resp = await self.router.metadata(None if pattern else self.topic_filter.names,
                                          retry=force)
        counts = {name: n for name, err, _, n in resp.topics if not err}
        names = self.topic_filter.match(counts)
        unknown = any(t not in counts for t in names)
        self._next_metadata = time.monotonic() + (
            0.5 if unknown else self.settings.metadata_max_age_ms / 1000)
        counts = {t: counts[t] for t in names if t in counts}
        if counts != self._topics_seen:
            self._topics_seen = counts
            self.buffer.assign([(t, p) for t in names for p in range(counts.get(t, 0))])

    def unsubscribe(self) -> None:
        """Follow no topics: the assignment is the application's (``assign``)."""
        self.topic_filter, self.managed = TopicFilter(), False

    async def subscribe(self, topic_filter: TopicFilter, managed: bool) -> None:
        """Follow ``topic_filter``: read every partition of its topics
        (blocks for one Metadata), or with ``managed`` only what the group
        membership assigns (nothing here)."""
        self.topic_filter, self.managed = topic_filter, managed
        self._topics_seen = {}
        if managed or not topic_filter:
            return
        await self._refresh_subscription(force=True)

    @property
    def subscription(self) -> "tuple | str":
        return self.topic_filter.describe()

    async def aclose(self) -> None:
        await cancel_and_wait(self._task)
        for session in list(self.sessions.values()):
            await cancel_and_wait(session.task)
        await self.router.aclose()
