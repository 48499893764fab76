"""Group commit and data notifications for the asyncio broker.

``GroupCommit.request(log, end)`` makes sure an fsync covering offsets below
``end`` is under way; ``await GroupCommit.durable(log, end)`` waits for it.
One fsync per log runs at a time, in a worker thread (or, while fsyncs take
under half a millisecond, on the loop right after the current turn's
appends); every producer whose append it covers is released by it, so
producers arriving during an fsync share the next one. When an fsync completes (or, for a lazy log, right after
an append) the high watermark moved: ``DataNotifier`` wakes long-polling
fetches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor

from ..storage.config import FLUSH_LAZY
from ..storage.log import Log

log = logging.getLogger(__name__)
INLINE_FSYNC_BELOW = 0.0005  # s: faster fsyncs run on the loop thread


class DataNotifier:
    """Futures waiting for new data on any of a set of logs."""

    def __init__(self) -> None:
        self._waiters: dict[Log, set[asyncio.Future]] = {}

    def notify(self, lg: Log) -> None:
        for fut in self._waiters.pop(lg, ()):
            if not fut.done():
                fut.set_result(None)

    async def wait(self, logs: list[Log], timeout: float) -> None:
        """Return when any of ``logs`` got new data, or after ``timeout`` s."""
        fut = asyncio.get_running_loop().create_future()
        for lg in logs:
            self._waiters.setdefault(lg, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            pass
        finally:
            for lg in logs:
                waiters = self._waiters.get(lg)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[lg]


class _Pending:
    __slots__ = ("running", "waiters")

    def __init__(self) -> None:
        self.running = False
        self.waiters: list[tuple[int, "asyncio.Future | None"]] = []


class GroupCommit:
    def __init__(self, executor: Executor, notifier: DataNotifier, on_durable=None) -> None:
        """``on_durable(log)``: called on the loop after each fsync of ``log``
        (cluster mode: the leader's own end may now count toward the HW)."""
        self._executor = executor
        self._notifier = notifier
        self._on_durable = on_durable
        self._pending: dict[Log, _Pending] = {}
        self.fsyncs = 0
        self.fsync_seconds = 0.0  # moving average

    def request(self, lg: Log, end: int) -> "asyncio.Future | None":
        """Start (or join) an fsync covering offsets < ``end``; a future that
        completes when they are durable, or None if they already are."""
        if lg.config.flush == FLUSH_LAZY:
            self._notifier.notify(lg)
            return None
        if lg.recovery_point >= end:
            return None
        pending = self._pending.setdefault(lg, _Pending())
        fut = asyncio.get_running_loop().create_future()
        pending.waiters.append((end, fut))
        if not pending.running:
            self._start(lg, pending)
        return fut

    async def durable(self, lg: Log, end: int) -> None:
        fut = self.request(lg, end)
        if fut is not None:
            await fut

    def _start(self, lg: Log, pending: _Pending) -> None:
        """Run one fsync: on the loop thread when fsyncs have been fast (a
        thread hop costs more than the fsync; the appends of this loop turn
        still run first, so they share it), else in a worker thread."""
        pending.running = True
        loop = asyncio.get_running_loop()
        if self.fsync_seconds < INLINE_FSYNC_BELOW:
            loop.call_soon(self._inline, lg, pending)
        else:
            loop.run_in_executor(self._executor, self._timed_flush, lg).add_done_callback(
                lambda f: self._done(lg, pending, f.exception()))

    def _timed_flush(self, lg: Log) -> None:
        start = time.perf_counter()
        try:
            lg.flush()
        finally:
            # moving average of fsync time; slow disks move work off the loop
            self.fsync_seconds = 0.8 * self.fsync_seconds + 0.2 * (time.perf_counter() - start)

    def _inline(self, lg: Log, pending: _Pending) -> None:
        try:
            self._timed_flush(lg)
        except Exception as exc:  # noqa: BLE001 - reported to the waiters
            self._done(lg, pending, exc)
        else:
            self._done(lg, pending, None)

    def _done(self, lg: Log, pending: _Pending, exc: "BaseException | None") -> None:
        pending.running = False
        self.fsyncs += 1
        if exc is not None:
            log.error("fsync of %s failed: %s", lg.name, exc)
        rp, left = lg.recovery_point, []
        for end, fut in pending.waiters:
            if fut.done():
                continue
            if exc is not None:
                fut.set_exception(exc)
            elif rp >= end:
                fut.set_result(None)
            else:
                left.append((end, fut))
        pending.waiters = left
        if self._on_durable is not None:
            self._on_durable(lg)
        self._notifier.notify(lg)
        if left:
            self._start(lg, pending)
        else:
            self._pending.pop(lg, None)
