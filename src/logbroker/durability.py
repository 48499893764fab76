"""Group commit and data notifications for the asyncio broker.

``GroupCommit.request(log, end)`` makes sure an fsync covering offsets below
``end`` is under way; ``await GroupCommit.durable(log, end)`` waits for it.
``request_cb(log, end, cb)`` is the same without a future: ``cb(error)`` is
called right where the fsync completes, so a produce is answered in the
loop turn its fsync ends (a future's callbacks would cost two more turns).
One fsync per log runs at a time, right after the loop turn that asked for
it (so that turn's appends share it): on the loop itself when it is the
only one, fsyncs take under 2 ms and a client's answer waits on it, else
in worker threads; ``SHARED_FROM`` or more logs in one turn share one
``syncfs`` of the data dir's filesystem (storage/shared_sync.py), and a
turn that queues ``EARLY_FROM`` starts their barrier without waiting for
its end (the rest of the turn's logs get the next one). Every
producer whose append it covers is released by it, so producers arriving
during an fsync share the next one. When an fsync completes (or, for a lazy
log, right after an append) the high watermark moved: ``DataNotifier``
wakes long-polling fetches.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from concurrent.futures import Executor
from typing import Callable

from .storage.config import FLUSH_LAZY
from .storage.log import Log

log = logging.getLogger(__name__)
INLINE_FSYNC_BELOW = 0.002  # s: a lone fsync this quick (on average) runs on the loop thread
SHARED_FROM = 8  # logs in one turn's group commit from which one syncfs serves them all:
# 8 files' fdatasyncs took 0.63 ms on 16 threads here, one syncfs 0.32 ms; 1,000: 62 vs 5.5 ms
EARLY_FROM = 256  # logs queued in one turn from which their barrier starts in that turn: a
# Produce of 1,000 parts answered in ~80 instead of ~100 ms here (decision 116)
FSYNC_THREADS = 16  # the broker's fsync pool: 1,000 partitions' fsyncs took 465 ms on one
# thread, 191 ms on 4 and 138 ms on 16 here (ext4 folds concurrent ones into one commit)


class DataNotifier:
    """Futures waiting for new data on any of a set of logs, and the fetch
    sessions watching partitions (api/fetch_session.py): ``notify(log)``
    resolves the first and tells the second (``on_data(tp)``)."""

    def __init__(self) -> None:
        self._waiters: dict[Log, set[asyncio.Future]] = {}
        # (topic, partition) -> the fetch session watching it, or a set of them when several
        # do: one object per partition, no set, in the common case of one consumer a partition
        self._watchers: dict[tuple[str, int], object] = {}
        self.watching = 0  # (partition, session) pairs watched (the sessions' budget)

    def notify(self, lg: Log) -> None:
        for fut in self._waiters.pop(lg, ()):
            if not fut.done():
                fut.set_result(None)
        if self._watchers:
            tp = (lg.topic, lg.partition)
            watcher = self._watchers.get(tp)
            if watcher.__class__ is set:
                for session in watcher:
                    session.on_data(tp)
            elif watcher is not None:
                watcher.on_data(tp)

    def watch(self, tp: tuple[str, int], session) -> None:
        """Tell ``session`` (its ``on_data(tp)``) whenever ``tp``'s log gets new data."""
        watchers = self._watchers
        watcher = watchers.get(tp)
        if watcher is None:
            watchers[tp] = session
        elif watcher is session:
            return
        elif watcher.__class__ is set:
            if session in watcher:
                return
            watcher.add(session)
        else:
            watchers[tp] = {watcher, session}
        self.watching += 1

    def unwatch(self, tp: tuple[str, int], session) -> None:
        watchers = self._watchers
        watcher = watchers.get(tp)
        if watcher is session:
            del watchers[tp]
        elif watcher.__class__ is set and session in watcher:
            watcher.discard(session)
            if len(watcher) == 1:
                watchers[tp] = next(iter(watcher))
        else:
            return
        self.watching -= 1

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
        self.waiters: list[tuple[int, "asyncio.Future | Callable"]] = []


class GroupCommit:
    def __init__(self, executor: Executor, notifier: DataNotifier, on_durable=None,
                 shared=None) -> None:
        """``on_durable(log)``: called on the loop after each fsync of ``log``
        (cluster mode: the leader's own end may now count toward the HW).
        ``shared``: a ``storage.shared_sync.SharedSync`` of the data dir (one
        barrier for ``SHARED_FROM`` or more logs in a turn), or None."""
        self._executor = executor
        self._shared = shared if shared is not None and shared.available else None
        self._notifier = notifier
        self._on_durable = on_durable
        self._pending: dict[Log, _Pending] = {}
        self._starting: list[tuple[Log, _Pending]] = []  # fsyncs to start after this turn
        self._offloaded = 0  # fsyncs running in worker threads
        self._finished: deque = deque()  # (log, pending, error) of thread fsyncs, for the loop
        self._wake_pending = False  # a call_soon_threadsafe for them is under way
        self.fsyncs = 0
        self.fsync_seconds = 0.0  # moving average
        self.stats = None  # CommitStats when metrics are on (metrics.py): fsync times, batch sizes

    def request(self, lg: Log, end: int, inline: bool = True) -> "asyncio.Future | None":
        """Start (or join) an fsync covering offsets < ``end``; a future that
        completes when they are durable, or None if they already are.
        ``inline`` False: no client's answer waits on it (a transaction's
        markers), so it never runs on the loop thread (``_kick``)."""
        if not self._needed(lg, end):
            return None
        fut = asyncio.get_running_loop().create_future()
        self._enqueue(lg, end, fut, inline)
        return fut

    def request_cb(self, lg: Log, end: int, cb: Callable, inline: bool = True) -> bool:
        """Like ``request`` but calls ``cb(None)`` (durable) or ``cb(error)``
        on the loop when the covering fsync ends; False (and no call) if
        nothing needs to wait: a lazy log or offsets already durable.
        ``cb`` must not raise."""
        if not self._needed(lg, end):
            return False
        self._enqueue(lg, end, cb, inline)
        return True

    def _needed(self, lg: Log, end: int) -> bool:
        if lg.config.flush == FLUSH_LAZY:
            self._notifier.notify(lg)
            return False
        return lg.recovery_point < end

    def _enqueue(self, lg: Log, end: int, waiter, inline: bool = True) -> None:
        pending = self._pending.get(lg)
        if pending is None:
            pending = self._pending[lg] = _Pending()
        pending.waiters.append((end, waiter))
        if not pending.running:
            self._start(lg, pending, inline)

    async def durable(self, lg: Log, end: int) -> None:
        fut = self.request(lg, end)
        if fut is not None:
            await fut

    def _start(self, lg: Log, pending: _Pending, inline: bool = True) -> None:
        """Queue one fsync of ``lg``; they start after this loop turn's
        appends, which share them (``_kick``), or, once ``EARLY_FROM`` are
        queued (with a shared barrier), at once: a Produce of many parts
        syncs its first parts' files while it appends the rest, and only
        the last ones' barrier follows the turn."""
        pending.running = True
        self._starting.append((lg, pending, inline))
        if len(self._starting) == 1:
            asyncio.get_running_loop().call_soon(self._kick)
        elif len(self._starting) >= EARLY_FROM and self._shared is not None:
            self._kick()  # the turn goes on appending while these logs' barrier runs

    def _kick(self) -> None:
        """Start the fsyncs queued this turn. A lone one, while no other runs
        in a thread and fsyncs have been quick, runs right here on the loop:
        a thread hop (a futex wake, a self-pipe write, two context switches)
        costs a durable send as much as the fsync itself. Several at once,
        or slow ones, go to worker threads, where they overlap (ext4 commits
        concurrent fsyncs in one journal transaction) and the loop goes on."""
        starting, self._starting = self._starting, []
        if len(starting) == 1 and starting[0][2] and not self._offloaded \
                and self.fsync_seconds < INLINE_FSYNC_BELOW:
            lg, pending, _ = starting[0]
            self._done(lg, pending, self._flush(lg))
            return
        loop = asyncio.get_running_loop()
        if self._shared is not None and len(starting) >= SHARED_FROM:
            starting = self._start_shared(loop, starting)
        for lg, pending, _ in starting:
            self._offloaded += 1
            try:
                self._executor.submit(self._in_thread, loop, lg, pending)
            except RuntimeError as exc:  # the executor is shut down: the broker is stopping
                self._offloaded_done(lg, pending, exc)

    def _start_shared(self, loop: asyncio.AbstractEventLoop, starting: list) -> list:
        """Hand the logs ``SharedSync`` covers to one worker and one barrier
        (when there are ``SHARED_FROM`` of them); the others, to fsync each."""
        covers, batch, rest = self._shared.covers, [], []
        for s in starting:
            if covers(s[0]):
                batch.append(s[:2])
            else:
                rest.append(s)
        if len(batch) < SHARED_FROM:
            return starting
        self._offloaded += len(batch)
        try:
            self._executor.submit(self._shared_in_thread, loop, batch)
        except RuntimeError as exc:  # the executor is shut down: the broker is stopping
            for lg, pending in batch:
                self._offloaded_done(lg, pending, exc)
        return rest

    def _shared_in_thread(self, loop: asyncio.AbstractEventLoop, batch: list) -> None:
        """Worker thread: one barrier for every log of ``batch``, then each
        log's result to the loop (as ``_in_thread``)."""
        start = time.perf_counter()
        try:
            errors = dict(self._shared.flush([lg for lg, _ in batch]))
        except Exception as exc:  # noqa: BLE001 - reported to every waiter of the batch
            errors = {lg: exc for lg, _ in batch}
        self._observe(time.perf_counter() - start)
        for lg, pending in batch:
            self._finished.append((lg, pending, errors.get(lg)))
        self._hand_over(loop)

    def _in_thread(self, loop: asyncio.AbstractEventLoop, lg: Log, pending: _Pending) -> None:
        """Worker thread: fsync, then hand the result to the loop."""
        self._finished.append((lg, pending, self._flush(lg)))
        self._hand_over(loop)

    def _hand_over(self, loop: asyncio.AbstractEventLoop) -> None:
        """Results are queued and one wake-up takes all that are there when it
        runs: 1,000 partitions' fsyncs cost a few self-pipe writes, not 1,000
        (each one a syscall and a GIL hand-off in the worker)."""
        if self._wake_pending:
            return
        self._wake_pending = True  # cleared by the loop before it takes the queue
        try:
            loop.call_soon_threadsafe(self._take_finished)
        except RuntimeError:  # the loop is closed: the broker is gone
            pass

    def _take_finished(self) -> None:
        self._wake_pending = False
        finished = self._finished
        while finished:
            self._offloaded_done(*finished.popleft())

    def _offloaded_done(self, lg: Log, pending: _Pending, exc) -> None:
        self._offloaded -= 1
        self._done(lg, pending, exc)

    def _flush(self, lg: Log) -> "Exception | None":
        """One timed fsync of ``lg``; its error (reported to the waiters) or None."""
        try:
            self._timed_flush(lg)
        except Exception as exc:  # noqa: BLE001 - reported to the waiters
            return exc
        return None

    def _timed_flush(self, lg: Log) -> None:
        start = time.perf_counter()
        try:
            lg.flush()
        finally:
            self._observe(time.perf_counter() - start)

    def _observe(self, took: float) -> None:
        """One fsync's (or shared barrier's) time: the moving average (slow
        disks move work off the loop) and the metrics."""
        self.fsync_seconds = 0.8 * self.fsync_seconds + 0.2 * took
        if self.stats is not None:
            self.stats.fsync.observe(took)

    def _done(self, lg: Log, pending: _Pending, exc: "BaseException | None") -> None:
        pending.running = False
        self.fsyncs += 1
        if exc is not None:
            log.error("fsync of %s failed: %s", lg.name, exc)
        rp, left = lg.recovery_point, []
        for end, waiter in pending.waiters:
            if exc is None and rp < end:
                left.append((end, waiter))
            elif not isinstance(waiter, asyncio.Future):  # a callback (request_cb)
                waiter(exc)
            elif waiter.done():
                continue
            elif exc is not None:
                waiter.set_exception(exc)
            else:
                waiter.set_result(None)
        if self.stats is not None:  # the group commit's batch: waiters this fsync released
            self.stats.batch.observe(len(pending.waiters) - len(left))
        pending.waiters = left
        if self._on_durable is not None:
            self._on_durable(lg)
        self._notifier.notify(lg)
        if left:
            self._start(lg, pending)
        else:
            self._pending.pop(lg, None)


def consume_outcome(fut: asyncio.Future) -> None:
    """A done callback retrieving an unwaited future's error (no 'never retrieved' log)."""
    if not fut.cancelled():
        fut.exception()
