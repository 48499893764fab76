"""The consumer's I/O side: a fetch loop that keeps one long-poll Fetch in flight.

Runs as one task on the client's loop. Each round it resolves positions
that are unknown (committed offset of the group, else ``auto_offset_reset``
via ListOffsets), refreshes subscribed topics' partitions, sends one Fetch
for every assigned partition on the *fetch* connection (a long poll delays
everything behind it on its connection, so commits and offset lookups use a
separate *control* connection), and buffers the answer; then it fetches
again at once (prefetch) unless ``prefetch_bytes`` are already buffered.

Connection failures are kept in ``error`` for ``poll()`` to raise if no data
arrives within its timeout; the loop keeps retrying with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..errors import (BrokerUnavailableError, LogbrokerError, OffsetOutOfRangeError,
                      RequestTimedOutError)
from ..protocol import messages as m
from .link import BrokerLink, cancel_and_wait
from .fetch_buffer import FetchBuffer, PartitionState
from .metadata import part_error
from .settings import ConsumerSettings
from .validate import SPECS

log = logging.getLogger("logbroker.client")


class Fetcher:
    def __init__(self, settings: ConsumerSettings, buffer: FetchBuffer, fetch_link: BrokerLink,
                 control: BrokerLink, notify) -> None:
        self.settings, self.buffer = settings, buffer
        self.fetch_link, self.control = fetch_link, control
        self._notify = notify  # data or an error arrived (called on the loop)
        self.error: "LogbrokerError | None" = None  # the broker is unreachable
        self.fatal: "LogbrokerError | None" = None  # a refused request, raised once by poll
        self.subscription: tuple = ()
        self._topics_seen: dict[str, int] = {}
        self._next_metadata = 0.0
        self._wakeup = asyncio.Event()
        self._task: "asyncio.Task | None" = None
        self.waiting = True  # no fetch planned: poke() needed for more data
        self._in_flight = False

    def poke(self, restart: bool = False) -> None:
        """Something changed (assignment, seek, buffer space): fetch again
        (loop). With ``restart`` a long poll in flight is abandoned (its
        connection dropped) so the new positions are fetched at once rather
        than after up to ``fetch_max_wait_ms``."""
        if restart and self._in_flight and self._task is not None:
            self._task.cancel()  # its fetch is for the old positions
            self._task = None
            self.fetch_link.drop()  # a long poll on it would delay the next fetch
        self._wakeup.set()
        if self._task is None or self._task.done():
            self.waiting = False
            self._task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        backoff = self.control.options.reconnect_backoff
        while True:
            self._wakeup.clear()
            try:
                await self._refresh_subscription()
                await self.resolve_positions()
                fetched = await self._fetch_once()
                backoff = self.control.options.reconnect_backoff
            except (BrokerUnavailableError, RequestTimedOutError) as exc:
                self.error = exc  # poll raises it if no data arrives in time
                self._notify()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.control.options.reconnect_backoff_max)
                continue
            except LogbrokerError as exc:
                self.error = None
                if not exc.retriable:  # e.g. a refused group name: poll raises it once
                    log.warning("consumer fetch loop: %s", exc)
                    self.fatal = exc
                    self._notify()
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.control.options.reconnect_backoff_max)
                continue
            if not fetched:
                self.waiting = True
                await self._wakeup.wait()
                self.waiting = False

    async def _fetch_once(self) -> bool:
        s = self.settings
        planned = self.buffer.plan(s.max_partition_fetch_bytes)
        if not planned:
            return False
        parts = tuple(p for p, _ in planned)
        gens = [g for _, g in planned]
        timeout = s.fetch_max_wait_ms / 1000 + self.fetch_link.options.request_timeout
        self._in_flight = True
        try:
            resp = await self.fetch_link.call(
                m.Fetch(max_wait_ms=s.fetch_max_wait_ms, min_bytes=s.fetch_min_bytes,
                        max_bytes=s.fetch_max_bytes, parts=parts), timeout, retry=False)
        finally:
            self._in_flight = False
        self.error = None
        failed = self.buffer.absorb(resp.parts, gens, resp.payload)
        for st, code, message in failed:
            self._part_failed(st, code, message)
        self._notify()
        if failed and len(failed) == len(planned):
            await asyncio.sleep(self.control.options.reconnect_backoff)
        return True

    def _part_failed(self, st: PartitionState, code: int, message: str) -> None:
        exc = part_error(code, message, st.topic, st.partition)
        with self.buffer.lock:
            if isinstance(exc, OffsetOutOfRangeError) and self.settings.auto_offset_reset != "none":
                log.info("%s: resetting to %s", exc, self.settings.auto_offset_reset)
                st.seek(None)
                st.reset = self.settings.auto_offset_reset
            elif not exc.retriable:
                st.error = exc

    # -- positions --------------------------------------------------------------------------------
    async def resolve_positions(self, only: "list[PartitionState] | None" = None) -> None:
        """Give every assigned partition without a position one: the group's
        committed offset, else ``auto_offset_reset``. Raises connection errors."""
        with self.buffer.lock:
            todo = [(st, st.gen) for st in (only or self.buffer.states.values())
                    if st.position is None and st.error is None]
        if not todo:
            return
        committed = {}
        if self.settings.group is not None:
            wanted = [st for st, _ in todo if st.reset is None]
            if wanted:
                committed = await self.committed([(st.topic, st.partition) for st in wanted],
                                                 retry=False)
        offsets, missing = {}, []
        for st, gen in todo:
            off = committed.get((st.topic, st.partition))
            if off is not None and off[0] >= 0:
                offsets[st] = off[0]
            else:
                missing.append(st)
        policy_missing = [st for st in missing if (st.reset or self.settings.auto_offset_reset)
                          != "none"]
        if policy_missing:
            spec = {st: SPECS[st.reset or self.settings.auto_offset_reset] for st in policy_missing}
            found = await self.list_offsets({(st.topic, st.partition): spec[st]
                                             for st in policy_missing}, retry=False)
            for st in policy_missing:
                offsets[st] = found[(st.topic, st.partition)][0]
        self.error = None  # the broker answered
        with self.buffer.lock:
            for st, gen in todo:
                if st.gen != gen:
                    continue
                if st in offsets:
                    st.seek(offsets[st])
                else:
                    st.error = OffsetOutOfRangeError(
                        f"{st.topic}[{st.partition}]: no committed offset and "
                        "auto_offset_reset='none'")
                    self._notify()

    async def list_offsets(self, specs: dict, retry: bool = True) -> dict:
        """``{(topic, partition): spec}`` -> ``{(topic, partition): (offset,
        timestamp)}``; raises the first per-partition error."""
        resp = await self.control.call(m.ListOffsets(parts=tuple(
            (t, p, spec) for (t, p), spec in specs.items())), retry=retry)
        out = {}
        for topic, partition, err, message, offset, ts in resp.parts:
            if err:
                raise part_error(err, message, topic, partition)
            out[(topic, partition)] = (offset, ts)
        return out

    async def committed(self, tps, retry: bool = True) -> dict:
        """The group's committed ``(offset, metadata, commit_ms)`` per partition
        (offset -1: none)."""
        resp = await self.control.call(m.FetchOffsets(group=self.settings.group,
                                                      parts=tuple(tps)), retry=retry)
        return {(t, p): (off, meta, ms) for t, p, off, meta, ms in resp.parts}

    # -- subscriptions ------------------------------------------------------------------------------
    async def _refresh_subscription(self, force: bool = False) -> None:
        if not self.subscription or (not force and time.monotonic() < self._next_metadata):
            return
        resp = await self.control.call(m.Metadata(topics=self.subscription), retry=force)
        counts = {name: n for name, err, _, n in resp.topics if not err}
        unknown = len(counts) < len(self.subscription)
        self._next_metadata = time.monotonic() + (0.5 if unknown else 30.0)
        if counts != self._topics_seen:
            self._topics_seen = counts
            tps = [(t, p) for t in self.subscription for p in range(counts.get(t, 0))]
            self.buffer.assign(tps)

    async def subscribe(self, topics) -> None:
        self.subscription = tuple(dict.fromkeys(topics))
        self._topics_seen = {}
        if not self.subscription:
            self.buffer.assign([])
            return
        await self._refresh_subscription(force=True)

    async def aclose(self) -> None:
        await cancel_and_wait(self._task)
        await self.fetch_link.aclose()
        await self.control.aclose()
