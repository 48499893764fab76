"""The consumer's one core, shared by ``logbroker.Consumer`` (sync) and
``logbroker.aio.Consumer``: argument checks, assignment, positions, commits
and the poll step, over a ``FetchBuffer`` and a ``Fetcher``.

Coroutines (``subscribe``, ``seek_to*``, ``position``, ``commit``,
``committed``, ``aclose``) run on the client's loop: the sync shell runs
them on its I/O thread, the asyncio shell awaits them. Plain methods run in
the caller's thread; ``schedule(fn, *args)`` (given by the shell) gets the
fetch loop poked from there. ``poll`` decodes in the caller's thread: the
shell calls ``poll_start`` once, then ``poll_step`` until it returns records,
waiting on its wake-up in between.

Positions are resolved lazily, as Kafka does: ``assign``, ``seek`` and
``seek_to_beginning`` / ``seek_to_end`` only change the client's state, and
the fetch loop starts with the first ``poll`` (or ``subscribe``), which
resolves every unknown position (committed offset, else the pending reset
or ``auto_offset_reset``) in one ListOffsets per leader; ``position()``
resolves one partition at once. After that, a change of assignment or
position wakes the running loop (abandoning a long poll in flight).
"""

from __future__ import annotations

import asyncio
import time
from typing import Iterable

from ...errors import ClientClosedError
from ...protocol import messages as m
from .. import validate
from .consumer_group import ConsumerGroup
from .fetch_buffer import FetchBuffer
from .fetcher import Fetcher
from ..group.rebalance import Listener
from ..net.routing import Router
from ..settings import ConsumerSettings, check_names, client_options
from ..group.topic_filter import TopicFilter

# The methods both Consumer shells expose as they are: plain ones, and
# coroutines (run on the sync shell's I/O thread, awaited by the asyncio one).
DIRECT = ("assign", "seek", "subscription", "assignment", "highwater", "metrics")
REBALANCE = object()  # poll_step's answer: apply the group's changes (rebalance.py), then step again
COROUTINES = ("subscribe", "seek_to_beginning", "seek_to_end", "seek_to_timestamp", "commit",
              "committed")


class PollCall:
    """One ``poll()``: its record limit, deadline, and the wake-up generation
    seen before the last look at the buffer."""

    __slots__ = ("limit", "deadline", "seen")

    def __init__(self, limit: int, deadline: float) -> None:
        self.limit, self.deadline, self.seen = limit, deadline, 0


class ConsumerCore:
    def __init__(self, bootstrap, group, client_id, request_timeout_ms, connect_timeout_ms,
                 settings: dict, *, wakeup, schedule) -> None:
        check_names(ConsumerSettings, settings, "Consumer")
        self.settings = ConsumerSettings(group=group, **settings)
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms, self.settings)
        self.buffer = FetchBuffer(self.settings.prefetch_bytes)
        self.wakeup = wakeup
        self.fetcher = Fetcher(self.settings, self.buffer, Router(self.options), wakeup.notify)
        self.group = ConsumerGroup(self.settings, self.fetcher.router, self.buffer, self.fetcher,
                                   wakeup.notify, schedule)
        self._schedule = schedule
        self.closed = False
        self.started = False  # the fetch loop runs: a poll or subscribe started it
        self.polls = self.records_polled = 0  # metrics(): bumped once per poll step

    def _poke(self, restart: bool = True) -> None:
        """Wake the fetch loop if it runs (a poll started it); ``restart``
        abandons a long poll in flight (after assign/seek, so the new
        positions are fetched at once). Before the first poll nothing is
        fetched: that poll starts the loop with the state as it is then."""
        if self.started:
            self._schedule(self.fetcher.poke, restart)

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("the consumer is closed")

    # -- assignment -------------------------------------------------------------------------------
    def assign(self, partitions: Iterable) -> None:
        """Read exactly these ``(topic, partition)`` pairs (replaces any
        subscription, and leaves the group if this consumer was a member);
        positions of partitions kept are kept."""
        self.check_open()
        tps = validate.topic_partitions(partitions)
        if self.group.managed or self.group.changes.pending():
            self.group.member.filter = TopicFilter()
            while (item := self.group.changes.take()) is not None:
                self.group.changes.done(item[1])
            self._schedule(_spawn, self.group.stop)
        self.fetcher.topic_filter, self.fetcher.managed = TopicFilter(), False
        self.buffer.assign(tps)
        self._poke()

    async def subscribe(self, topics=None, *, pattern=None, on_assign=None, on_revoke=None,
                        on_lost=None) -> None:
        """Follow ``topics`` (a name or a list of names) or ``pattern`` (a
        ``re`` pattern or its text, matching whole topic names; topics
        created later join at the next metadata refresh). With a ``group``
        the consumer joins it and reads the partitions the group assigns it
        (docs/client.md, Consumer groups): this returns at once, the join
        proceeds in the background, and ``on_assign`` / ``on_revoke`` /
        ``on_lost`` are called from ``poll`` with the partitions that change
        hands. Without a group it reads every partition of the topics
        (blocks for one Metadata request). An empty list unsubscribes (and
        leaves the group)."""
        self.check_open()
        topic_filter = TopicFilter.make(topics, pattern)
        listener = Listener(on_assign, on_revoke, on_lost)
        if self.settings.group is None:
            if listener:
                raise ValueError("on_assign / on_revoke / on_lost need a consumer group "
                                 "(Consumer(group=...))")
            await self.fetcher.subscribe(topic_filter, managed=False)
        elif not topic_filter:
            await self.group.stop(leave=True)
            await self.fetcher.subscribe(topic_filter, managed=False)
            self.buffer.assign([])
        else:
            if not self.group.managed:
                self.buffer.assign([])  # a manual assignment ends: the group decides
            await self.fetcher.subscribe(topic_filter, managed=True)
            self.group.subscribe(topic_filter, listener)
        self.started = True
        self.fetcher.poke(True)

    def subscription(self) -> "tuple | str":
        """The topics subscribed to, or the pattern's text (``()`` after ``assign``)."""
        return self.fetcher.subscription

    def assignment(self) -> set:
        """The partitions this consumer reads, as ``{(topic, partition)}``."""
        return set(self.buffer.states)

    def highwater(self, topic: str, partition: int) -> "int | None":
        """The high watermark the last fetch reported (None before one)."""
        hw = self.buffer.state(topic, partition).high_watermark
        return None if hw < 0 else hw

    def metrics(self) -> dict:
        """The consumer's counters (docs/metrics.md): ``records_consumed``
        (returned by polls), ``polls`` (that returned records),
        ``buffered_bytes`` (fetched, not yet polled), ``assigned`` (partitions),
        ``lag`` ({(topic, partition): high watermark of the last fetch answer
        minus the position}, for partitions with both known) and
        ``lag_total``, ``fetch_throttle_time_ms_avg`` / ``_max`` (the quota
        throttle the brokers' fetch answers carried: throttle.py). A plain
        dict; never blocks, any thread."""
        buffer = self.buffer
        with buffer.lock:
            states = list(buffer.states.values())
            buffered = buffer.buffered
        lag = {(st.topic, st.partition): max(st.high_watermark - st.position, 0) for st in states
               if st.high_watermark >= 0 and st.position is not None}
        return {"records_consumed": self.records_polled, "polls": self.polls,
                "buffered_bytes": buffered, "assigned": len(states), "lag": lag,
                "lag_total": sum(lag.values()), **self.fetcher.throttles.metrics("fetch")}

    # -- positions --------------------------------------------------------------------------------
    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Next ``poll`` returns records from ``offset`` (never blocks). An
        offset past the log end or below its start is handled by
        ``auto_offset_reset`` at the next fetch."""
        self.check_open()
        tp = validate.topic_partition((topic, partition))
        self.buffer.seek(*tp, validate.offset(offset))
        self._poke()

    def _targets(self, partitions) -> list:
        tps = list(self.buffer.states) if partitions is None \
            else validate.topic_partitions(partitions)
        for tp in tps:
            self.buffer.state(*tp)  # raises ValueError if not assigned
        return tps

    async def _seek_to(self, specs: dict) -> None:
        found = await self.fetcher.list_offsets(specs)
        ends = [tp for tp, (offset, _) in found.items() if offset < 0]
        if ends:  # no record that late: the end
            found.update(await self.fetcher.list_offsets({tp: m.LATEST for tp in ends}))
        for (topic, partition), (offset, _) in found.items():
            self.buffer.seek(topic, partition, offset)
        if self.started:
            self.fetcher.poke(True)

    def _reset_to(self, partitions, policy: str) -> None:
        self.buffer.reset(self._targets(partitions), policy)
        if self.started:
            self.fetcher.poke(True)

    async def seek_to_beginning(self, partitions: "Iterable | None" = None) -> None:
        """Seek (all assigned, or the given) partitions to their log start,
        lazily (Kafka's rule): no request here; the next ``poll`` or
        ``position()`` asks the leaders (one ListOffsets per leader for
        every partition to resolve)."""
        self._reset_to(partitions, "earliest")

    async def seek_to_end(self, partitions: "Iterable | None" = None) -> None:
        """Seek to the high watermark as of the next ``poll`` or
        ``position()`` (lazily, as ``seek_to_beginning``): records produced
        after that are read."""
        self._reset_to(partitions, "latest")

    async def seek_to_timestamp(self, timestamp_ms: int,
                                partitions: "Iterable | None" = None) -> None:
        """Seek to the earliest record with timestamp >= ``timestamp_ms``, or
        to the end where there is none. Blocks for one ListOffsets request
        per leader (two where some partition has no record that late)."""
        ts = validate.timestamp(timestamp_ms, "timestamp_ms")
        await self._seek_to({tp: ts for tp in self._targets(partitions)})

    def known_position(self, topic: str, partition: int) -> "int | None":
        """The position if known without asking the broker."""
        return self.buffer.state(*validate.topic_partition((topic, partition))).position

    async def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll`` returns; resolves it first
        (committed offset / reset policy) if unknown, which may block."""
        st = self.buffer.state(*validate.topic_partition((topic, partition)))
        if st.position is None:
            await self.fetcher.resolve_positions([st], retry=True)
            if st.error is not None:
                raise st.error
        return st.position

    # -- offsets of the group ---------------------------------------------------------------------
    def _group(self, what: str) -> str:
        if self.settings.group is None:
            raise ValueError(f"{what} needs a consumer group (Consumer(group=...))")
        return self.settings.group

    async def commit(self, offsets: "dict | None" = None) -> None:
        """Store offsets for the group: by default the position of every
        assigned partition (the next record to read), else ``{(topic,
        partition): offset or (offset, metadata)}``. Blocks until durable
        (at most ``request_timeout_ms``); raises the first partition's
        error. A member's commit carries its generation: when the group
        rebalanced without it, ``IllegalGenerationError`` /
        ``UnknownMemberIdError`` (nothing committed; the member rejoins);
        while the group waits for its leader's assignment,
        ``RebalanceInProgressError`` (poll, then commit again)."""
        self._group("commit")
        entries = self.group.positions() if offsets is None else validate.commit_entries(offsets)
        if entries:
            await self.group.commit(entries)

    async def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        """The group's committed offset of one partition (None if none), or
        with no arguments ``{(topic, partition): offset}`` for the assigned ones."""
        self._group("committed()")
        tps = [validate.topic_partition((topic, partition))] if topic is not None \
            else list(self.buffer.states)
        found = await self.fetcher.committed(tps) if tps else {}
        out = {tp: (v[0] if v[0] >= 0 else None) for tp, v in found.items()}
        return out.get(tps[0]) if topic is not None else out

    # -- polling ----------------------------------------------------------------------------------
    def poll_start(self, timeout, max_records) -> PollCall:
        """Check ``poll``'s arguments and ask for more data if none is coming."""
        self.check_open()
        wait = validate.seconds(timeout, "timeout")
        limit = self.settings.max_poll_records if max_records is None \
            else validate.count(max_records, "max_records")
        self.group.polled()
        self.started = True
        if self.fetcher.waiting:
            self._poke(False)
        return PollCall(limit, time.monotonic() + (wait or 0.0))

    def poll_step(self, call: PollCall) -> "list | None":
        """One non-blocking look: records, ``[]`` when the deadline passed,
        None to wait (on ``wakeup``, from ``call.seen``), ``REBALANCE`` to
        apply the group's partition changes first; raises what ``poll``
        raises."""
        call.seen = self.wakeup.gen
        if self.group.changes.pending():
            return REBALANCE
        fetcher, member = self.fetcher, self.group.member
        err = self.buffer.errors() or fetcher.fatal or (member and member.fatal)
        if err is not None:
            fetcher.fatal = None
            if member is not None:
                member.fatal = None
            raise err
        records = self.buffer.take(call.limit, self.settings.check_crcs)
        if records:
            self.polls += 1
            self.records_polled += len(records)
            if fetcher.waiting and self.buffer.buffered < self.settings.prefetch_bytes:
                self._poke(False)
            return records
        if call.deadline - time.monotonic() <= 0:
            error = fetcher.error
            if error is not None:
                raise type(error)(error.message)
            return []
        return None

    async def aclose(self) -> None:
        """Stop fetching and close the connections (no commit)."""
        self.closed = True
        await self.group.aclose()
        await self.fetcher.aclose()
        self.buffer.clear()


def _spawn(make) -> None:
    """Start the coroutine ``make()`` as a task (on the client's loop)."""
    asyncio.ensure_future(make())
