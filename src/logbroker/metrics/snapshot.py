"""The broker's state as plain numbers, read on its event loop without
stalling it (docs/metrics.md, "How it is collected").

- ``await Gathered.gather(broker, slice_s)`` reads it for a scrape (and for
  the console's pages, console/state.py) in
  slices of about ``slice_s`` of loop time each (``SLICE_S``: 1 ms),
  yielding to the loop between them, so another client waits about one
  slice, whatever the number of partitions. Lists the loop may change
  while it yields are copied first, whole (``store.logs()``, a group's
  offset keys: C-level copies of references, ~0.2 ms for 40,000). It is
  kept in columns (``array``s of numbers, lists of names already
  allocated), not one tuple per partition: objects the garbage collector
  tracks, kept alive for seconds, would make its full collections of the
  broker's heap (~150 ms at 20,000 partitions, on every thread's time)
  come much more often.
- ``SnapshotCache.get()`` answers a snapshot at most ``max_age_s`` old
  (``metrics_refresh_s``): scrapes share it, and scrapes that arrive while
  one is being gathered wait for that one; so the loop gathers at most once
  per ``max_age_s`` whatever the number of scrapers.

All of it runs on the broker's loop only (it reads structures the loop
mutates). A partition whose numbers cannot be read (closed under us) is
left out of that snapshot, never fails it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from array import array

log = logging.getLogger("logbroker.metrics")
SLICE_S = 0.001  # loop time one slice of a gather may use before it yields
CHUNK = 32  # rows read between two looks at the clock


class Gathered:
    """The state a scrape shows, in columns (module docstring): per
    partition ``topics`` (names), ``partitions``, ``ends`` (log end
    offsets), ``hws``, ``starts``, ``sizes``, ``offline`` (0/1), ``lsos``
    (last stable offsets), ``open_txns`` (open transactions); per
    committed offset ``o_groups``, ``o_topics``, ``o_partitions``,
    ``o_offsets``; ``cluster`` (metadata's cluster_numbers, None on a single
    node); ``taken`` (monotonic), ``slices``, ``loop_s`` and ``longest_s``
    (loop time spent, and in the longest slice)."""

    __slots__ = ("topics", "partitions", "ends", "hws", "starts", "sizes", "offline", "lsos",
                 "open_txns", "o_groups", "o_topics", "o_partitions", "o_offsets", "cluster",
                 "taken",
                 "slices", "loop_s", "longest_s")

    def __init__(self) -> None:
        self.topics, self.o_groups, self.o_topics = [], [], []
        self.partitions, self.o_partitions = array("l"), array("l")
        self.ends, self.hws, self.starts, self.sizes, self.o_offsets, self.lsos = (
            array("q"), array("q"), array("q"), array("q"), array("q"), array("q"))
        self.open_txns = array("l")
        self.offline = bytearray()
        self.cluster = None

    def __len__(self) -> int:
        return len(self.topics)

    @classmethod
    async def gather(cls, broker, slice_s: float = SLICE_S) -> "Gathered":
        s, clock = cls(), SliceClock(slice_s)
        s.taken = time.monotonic()
        logs = broker.store.logs()
        for i in range(0, len(logs), CHUNK):
            for lg in logs[i:i + CHUNK]:
                s._add(lg)
            await clock.tick()
        for g in broker.coordinator.groups():
            offsets = g.offsets
            keys = list(offsets)
            for i in range(0, len(keys), CHUNK):
                for tp in keys[i:i + CHUNK]:
                    co = offsets.get(tp)
                    if co is not None:
                        s.o_groups.append(g.name)
                        s.o_topics.append(tp[0])
                        s.o_partitions.append(tp[1])
                        s.o_offsets.append(co.offset)
                await clock.tick()
        s.cluster = broker.meta.cluster_numbers()
        s.slices, s.loop_s, s.longest_s = clock.done()
        return s

    def _add(self, lg) -> None:
        try:
            numbers = (lg.log_end_offset, lg.high_watermark, lg.log_start_offset,
                       lg.size_in_bytes(), lg.offline is not None, *lg.transaction_numbers())
        except Exception as exc:  # noqa: BLE001 - a log closed under us is left out, not fatal
            log.debug("metrics: partition left out of the snapshot: %s", exc)
            return
        self.topics.append(lg.topic)
        self.partitions.append(lg.partition)
        self.ends.append(numbers[0])
        self.hws.append(numbers[1])
        self.starts.append(numbers[2])
        self.sizes.append(numbers[3])
        self.offline.append(numbers[4])
        self.lsos.append(numbers[5])
        self.open_txns.append(numbers[6])


class SnapshotCache:
    """One shared snapshot, gathered again once older than ``max_age_s``
    (module docstring). The broker's loop only."""

    def __init__(self, broker, max_age_s: float, slice_s: float = SLICE_S) -> None:
        self.broker, self.max_age_s, self.slice_s = broker, max_age_s, slice_s
        self.gathers = 0  # snapshots gathered so far
        self._snap: "Gathered | None" = None
        self._task: "asyncio.Task | None" = None

    async def get(self) -> Gathered:
        """A snapshot at most ``max_age_s`` old; raises what gathering raised."""
        snap = self._snap
        if snap is not None and time.monotonic() - snap.taken < self.max_age_s:
            return snap
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._refresh())
        return await asyncio.shield(self._task)

    def close(self) -> None:
        """Cancel a gather under way (the broker stops)."""
        if self._task is not None:
            self._task.cancel()

    async def _refresh(self) -> Gathered:
        snap = await Gathered.gather(self.broker, self.slice_s)
        self._snap, self.gathers = snap, self.gathers + 1
        log.debug("metrics snapshot of %d partitions: %d slices, %.1f ms on the loop, the "
                  "longest %.2f ms", len(snap), snap.slices, snap.loop_s * 1000,
                  snap.longest_s * 1000)
        return snap


class SliceClock:
    """Loop time of a gather, in slices: ``tick()`` yields once the current
    slice has used ``slice_s``."""

    __slots__ = ("slice_s", "start", "slices", "spent", "longest")

    def __init__(self, slice_s: float) -> None:
        self.slice_s, self.start = slice_s, time.perf_counter()
        self.slices, self.spent, self.longest = 1, 0.0, 0.0

    async def tick(self) -> None:
        took = time.perf_counter() - self.start
        if took < self.slice_s:
            return
        self._close(took)
        await asyncio.sleep(0)
        self.slices += 1
        self.start = time.perf_counter()

    def done(self) -> tuple:
        self._close(time.perf_counter() - self.start)
        return self.slices, self.spent, self.longest

    def _close(self, took: float) -> None:
        self.spent += took
        self.longest = max(self.longest, took)

