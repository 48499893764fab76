"""The consumer's one core, shared by ``logbroker.Consumer`` (sync) and
``logbroker.aio.Consumer``: argument checks, assignment, positions, commits
and the poll step, over a ``FetchBuffer`` and a ``Fetcher``.

The public methods' contracts are the docstrings of ``logbroker.Consumer``
(consumer/sync.py); the asyncio shell (consumer/aio.py) keeps them too.
Coroutines (``subscribe``, ``seek_to*``, ``position``, ``commit``,
``committed``, ``aclose``) run on the client's loop: the sync shell runs
them on its I/O thread, the asyncio shell awaits them. Plain methods run in
the caller's thread; ``schedule(fn, *args)`` (given by the shell) gets the
fetch loop poked from there. ``poll`` decodes in the caller's thread: the
shell calls ``poll_start`` once, then ``poll_step`` until it returns records,
waiting on its wake-up in between. What both shells do on a rebalance and on
close is written once, as sequences of steps (``applying``, ``leaving``:
consumer_group.py) that each shell only performs (waiting.Steps).

Positions are resolved lazily, as Kafka does: ``assign``, ``seek`` and
``seek_to_beginning`` / ``seek_to_end`` only change the client's state, and
the fetch loop starts with the first ``poll`` (or ``subscribe``), which
resolves every unknown position (committed offset, else the pending reset
or ``auto_offset_reset``) in one ListOffsets per leader; ``position()``
resolves one partition at once. After that, a change of assignment or
position wakes the running loop (abandoning a long poll in flight).
"""

from __future__ import annotations

import time
from typing import Generator, Iterable

from ...errors import ClientClosedError
from ...protocol import messages as m
from .. import validate
from ..group.offsets import NO_MEMBER, GroupMetadata
from ..group.rebalance import Listener
from ..group.topic_filter import TopicFilter
from ..net.routing import Router
from ..settings import ConsumerSettings, check_names, client_options
from .consumer_group import ConsumerGroup
from .fetch_buffer import FetchBuffer
from .fetcher import Fetcher

REBALANCE = object()  # poll_step's answer: apply the group's changes (applying()), then step again


class PollCall:
    """One ``poll()``: its record limit, deadline, and the wake-up generation
    seen before the last look at the buffer."""

    __slots__ = ("limit", "deadline", "seen")

    def __init__(self, limit: int, deadline: float) -> None:
        self.limit, self.deadline, self.seen = limit, deadline, 0


class ConsumerCore:
    def __init__(self, bootstrap="127.0.0.1:9555", *, wakeup, schedule,
                 group: "str | None" = None, client_id: str = "logbroker-consumer",
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000,
                 **settings) -> None:
        """The core of ``Consumer(bootstrap, **settings)`` (both shells);
        ``wakeup`` is the shell's (waiting.py), ``schedule(fn, *args)`` runs
        ``fn`` on the client's loop from the caller's thread."""
        check_names(ConsumerSettings, settings, "Consumer")
        self.settings = ConsumerSettings(group=group, **settings)
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms, self.settings)
        self.buffer = FetchBuffer(self.settings.prefetch_bytes,
                                  self.settings.isolation_level == "read_committed")
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

    def mark_closed(self) -> None:
        """Refuse every call from now on and drop the buffered records (any
        thread; the first step of closing)."""
        self.closed = True
        self.buffer.clear()

    # -- assignment -------------------------------------------------------------------------------
    def assign(self, partitions: Iterable) -> None:
        """``Consumer.assign``: the group's subscription ends, the buffer follows ``partitions``."""
        self.check_open()
        tps = validate.topic_partitions(partitions)
        self.group.unsubscribe_now()
        self.fetcher.unsubscribe()
        self.buffer.assign(tps)
        self._poke()

    async def subscribe(self, topics=None, *, pattern=None, on_assign=None, on_revoke=None,
                        on_lost=None) -> None:
        """``Consumer.subscribe``: the fetcher follows the topics, with a group the membership joins."""
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
        """``Consumer.subscription``."""
        return self.fetcher.subscription

    def assignment(self) -> set:
        """``Consumer.assignment``."""
        return set(self.buffer.states)

    def highwater(self, topic: str, partition: int) -> "int | None":
        """``Consumer.highwater``."""
        hw = self.buffer.state(topic, partition).high_watermark
        return None if hw < 0 else hw

    def metrics(self) -> dict:
        """``Consumer.metrics`` (docs/metrics.md): read under the buffer's lock, any thread."""
        buffer = self.buffer
        with buffer.lock:
            states = list(buffer.states.values())
            buffered = buffer.buffered
        committed = buffer.read_committed  # lag up to the LSO (Kafka's read_committed lag)
        lag = {(st.topic, st.partition): max((st.last_stable_offset if committed else
                                              st.high_watermark) - st.position, 0)
               for st in states if st.high_watermark >= 0 and st.position is not None}
        return {"records_consumed": self.records_polled, "polls": self.polls,
                "buffered_bytes": buffered, "assigned": len(states), "lag": lag,
                "lag_total": sum(lag.values()), **self.fetcher.throttles.metrics("fetch")}

    def last_stable_offset(self, topic: str, partition: int) -> "int | None":
        """``Consumer.last_stable_offset``."""
        lso = self.buffer.state(topic, partition).last_stable_offset
        return None if lso < 0 else lso

    def group_metadata(self):
        """``Consumer.group_metadata``: the group and this member's current
        membership (generation -1, member id "" when not a member)."""
        group = self._group("group_metadata()")
        member = self.group.member
        who = member.identity() if member is not None else NO_MEMBER
        return GroupMetadata(group, who.generation, who.member_id, who.group_instance_id)

    # -- positions --------------------------------------------------------------------------------
    def seek(self, topic: str, partition: int, offset: int) -> None:
        """``Consumer.seek``: the buffer's position, the fetch loop restarted."""
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
        """``Consumer.seek_to_beginning``: a pending reset (no request)."""
        self._reset_to(partitions, "earliest")

    async def seek_to_end(self, partitions: "Iterable | None" = None) -> None:
        """``Consumer.seek_to_end``: a pending reset (no request)."""
        self._reset_to(partitions, "latest")

    async def seek_to_timestamp(self, timestamp_ms: int,
                                partitions: "Iterable | None" = None) -> None:
        """``Consumer.seek_to_timestamp``: ListOffsets per leader, then seeks."""
        ts = validate.timestamp(timestamp_ms, "timestamp_ms")
        await self._seek_to({tp: ts for tp in self._targets(partitions)})

    def known_position(self, topic: str, partition: int) -> "int | None":
        """The position if known without asking the broker."""
        return self.buffer.state(*validate.topic_partition((topic, partition))).position

    async def position(self, topic: str, partition: int) -> int:
        """``Consumer.position``: resolved (and retried) by the fetcher if unknown."""
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
        """``Consumer.commit``: as this member (group_offsets.commit says what is raised)."""
        self._group("commit")
        entries = self.group.positions() if offsets is None else validate.commit_entries(offsets)
        if entries:
            await self.group.commit(entries)

    async def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        """``Consumer.committed``: FetchOffsets through the group's coordinator."""
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
        err = self.buffer.errors()
        fatal = fetcher.take_fatal()
        member_fatal = member.take_fatal() if member is not None else None
        err = err or fatal or member_fatal
        if err is not None:
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

    # -- rebalancing and closing: the sequences both shells perform (waiting.Steps) ------------
    def applying(self) -> Generator:
        """The group's partition changes, applied where the application polls
        (after ``poll_step`` answered ``REBALANCE``): ``ConsumerGroup.applying``."""
        return self.group.applying()

    def leaving(self) -> Generator:
        """``close()``'s steps before the connections close (a member commits,
        calls ``on_revoke`` and leaves; failures logged): ``ConsumerGroup.leaving``."""
        return self.group.leaving()

    async def aclose(self) -> None:
        """Stop fetching and close the connections (no commit)."""
        self.mark_closed()
        await self.group.aclose()
        await self.fetcher.aclose()
        self.buffer.clear()
