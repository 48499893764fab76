"""The transaction coordinator: the transactional ids of the transaction
state partitions this broker leads (Kafka's KIP-98 design).

A transactional id lives in partition ``partition_for(id)`` of
``__transaction_state``; that partition's leader coordinates it. As the
group coordinator (manager.py), this one learns what it leads from its
``host`` (metadata/local.py, metadata/cluster_host.py), rebuilds a
partition's ids from its log when it becomes leader
(COORDINATOR_LOAD_IN_PROGRESS meanwhile; then it finishes every
transaction its Prepare* records started) and drops them when it stops
leading (NOT_COORDINATOR: the producer finds the new coordinator).

Every transition (txn_state.py) is appended to the partition and applied
only once acknowledged (acks=all), before the request is answered. One
transition of an id is in flight at a time: another request of the same id
meanwhile gets CONCURRENT_TRANSACTIONS (retriable), as Kafka's pending state.
After a Prepare* record, the markers go to each partition's current leader
(``MarkerSender``), retried until each one has written its marker (or the
partition is gone), then Complete* is written.

One timer loop (never dies: a failure is logged and the loop goes on)
follows leadership, aborts transactions open longer than their timeout
(epoch bumped: the old producer is fenced) and expires ids idle longer
than ``transactional_id_expiration_ms`` (a tombstone).

``outcomes`` counts, since the broker started, the transactions this
coordinator completed (``committed``, ``aborted``: Complete* written, a
failed-over one finished here included) and those it aborted for their
timeout (``timed_out``, also counted in ``aborted`` once complete): plain
ints the loop bumps, read by the metrics and the console.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from functools import partial

from ..errors import (ConcurrentTransactionsError, CoordinatorLoadInProgressError,
                      CoordinatorNotAvailableError, FencedLeaderEpochError, LogbrokerError,
                      NotCoordinatorError,
                      NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderError,
                      PolicyViolationError, RequestTimedOutError)
from ..protocol.parts import TxnMarker
from . import txn_state as ts
from .txn_loading import load_txns
from .txn_records import encode, partition_for

log = logging.getLogger("logbroker.coordinator")
IDLE_S = 0.5  # the timer loop's period (leadership is looked at then)
LOAD_WAIT_S = 1.0  # a request waits this long for its partition to load
SETTLE_WAIT_S = 1.0  # a request waits this long for the id's previous change to complete
RETRY_S = (0.05, 2.0)  # marker delivery's backoff: first, longest


@dataclass(frozen=True)
class TxnSettings:
    """The broker's transaction settings (broker/config.py) and bounds."""

    max_timeout_ms: int = 900_000
    check_interval_ms: int = 10_000
    expiration_ms: int = 604_800_000
    write_timeout_ms: int = 5_000
    max_parts: int = 1_000  # partitions of one transaction (its record is rewritten per add)
    max_ids: int = 100_000  # transactional ids one broker coordinates (idle ones expire)

    @classmethod
    def of(cls, config) -> "TxnSettings":
        return cls(config.transaction_max_timeout_ms,
                   config.transaction_abort_timed_out_check_interval_ms,
                   config.transactional_id_expiration_ms, config.offsets_commit_timeout_ms)


@dataclass
class TxnView:
    """The ids of one state partition as loaded in leader epoch ``epoch``
    (the coordinator epoch its markers carry); ``busy``: ids with a
    transition being written; ``waiters``: requests waiting for an id to
    settle (one Event per id, set when a change of it is applied)."""

    epoch: int
    txns: dict = field(default_factory=dict)
    busy: set = field(default_factory=set)
    waiters: dict = field(default_factory=dict)  # id -> Event set at its next applied change
    ready: bool = False
    task: "asyncio.Task | None" = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)


def _now_ms() -> int:
    return int(time.time() * 1000)


class TxnCoordinator:
    def __init__(self, host, settings: TxnSettings, markers, new_producer_id) -> None:
        """``markers``: a MarkerSender (txn_markers.py); ``new_producer_id``:
        an async function returning a producer id unique in the cluster."""
        self.host, self.settings, self.markers = host, settings, markers
        self.new_producer_id = new_producer_id
        self.views: dict[int, TxnView] = {}
        self._task: "asyncio.Task | None" = None
        self._tasks: set[asyncio.Task] = set()
        self._checked = 0.0
        self.outcomes = {"committed": 0, "aborted": 0, "timed_out": 0}

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        tasks = [t for t in [self._task, *self._tasks, *(v.task for v in self.views.values())]
                 if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.views.clear()
        await self.markers.close()

    # -- finding an id ----------------------------------------------------------------------
    def partition(self, tid: str) -> int:
        return partition_for(tid, self.host.partitions)

    async def view(self, tid: str, wait: bool = True) -> "tuple[int, TxnView]":
        """The partition and view holding ``tid``: NOT_COORDINATOR elsewhere;
        waits (``wait``) up to ``LOAD_WAIT_S`` for a partition being loaded,
        then COORDINATOR_LOAD_IN_PROGRESS."""
        p = self.partition(tid)
        _, epoch = self.host.leader(p)
        view = self.views.get(p)
        if view is None or view.epoch != epoch:
            self._load(p, epoch)
            view = self.views[p]
        if not view.ready and wait:
            try:
                await asyncio.wait_for(asyncio.shield(view.loaded.wait()), LOAD_WAIT_S)
            except TimeoutError:
                pass
        if not view.ready or self.views.get(p) is not view:
            raise CoordinatorLoadInProgressError(f"loading the transactions of "
                                                 f"{self.host.topic}-{p}")
        return p, view

    def known(self, tid: str) -> "ts.TxnState | None":
        """``tid``'s state if this broker coordinates it and has it loaded (no waiting)."""
        view = self.views.get(self.partition(tid))
        return view.txns.get(tid) if view is not None and view.ready else None

    def all(self) -> list:
        return [s for v in self.views.values() if v.ready for s in v.txns.values()]

    # -- requests ----------------------------------------------------------------------------
    async def init_producer(self, tid: str, producer_id: int, producer_epoch: int,
                            timeout_ms: int) -> "tuple[int, int]":
        """InitProducerId with a transactional id: (producer id, epoch)."""
        p, view = await self.view(tid)
        await self._settle(p, view, tid)
        cur = self._idle(view, tid)
        if cur is not None and cur.state == ts.ONGOING:
            ts._check_known_producer(cur, producer_id)
            await self._fence(p, view, cur)
            raise ConcurrentTransactionsError(f"transactional id {tid!r}: its open transaction "
                                              "is being aborted, retry")
        new_id = ts.NO_ID
        if cur is None and sum(len(v.txns) for v in self.views.values()) >= self.settings.max_ids:
            raise PolicyViolationError(f"this broker coordinates {self.settings.max_ids} "
                                       "transactional ids already (idle ones expire after "
                                       "transactional_id_expiration_ms)")
        if ts.needs_new_id(cur, producer_id, producer_epoch):
            new_id = await self.new_producer_id()
            if self.views.get(p) is not view:
                raise NotCoordinatorError(f"this broker stopped coordinating {tid!r}")
            if self._idle(view, tid) is not cur:
                raise ConcurrentTransactionsError(f"transactional id {tid!r} changed meanwhile, "
                                                  "retry")
        nxt = ts.init(cur, tid, producer_id, producer_epoch, timeout_ms, _now_ms(), new_id)
        if nxt is not cur:
            await self._write(p, view, nxt)
        return nxt.producer_id, nxt.producer_epoch

    async def add_partitions(self, tid: str, producer_id: int, producer_epoch: int,
                             parts) -> None:
        p, view = await self.view(tid)
        await self._settle(p, view, tid)
        cur = self._idle(view, tid)
        nxt = ts.add_partitions(cur, tid, producer_id, producer_epoch, parts, _now_ms(),
                                self.settings.max_parts)
        if nxt is not None:
            await self._write(p, view, nxt)

    async def verify(self, tid: str, producer_id: int, producer_epoch: int, parts) -> tuple:
        """A (topic, partition, error, message) per part of ``parts``: whether
        the producer's open transaction holds it (``txn_state.verify``); the
        state as last acknowledged (a change being written is not waited for:
        the producer wrote after its AddPartitionsToTxn was answered)."""
        _, view = await self.view(tid)
        cur = view.txns.get(tid)
        out = []
        for t, p in parts:
            try:
                ts.verify(cur, tid, producer_id, producer_epoch, (t, p))
                out.append((t, p, 0, ""))
            except LogbrokerError as exc:
                out.append((t, p, exc.code, exc.message))
        return tuple(out)

    async def end(self, tid: str, producer_id: int, producer_epoch: int, commit: bool) -> None:
        """EndTxn: answered once Prepare* is durable; the markers follow."""
        p, view = await self.view(tid)
        await self._settle(p, view, tid)
        cur = self._idle(view, tid)
        nxt = ts.end(cur, tid, producer_id, producer_epoch, commit, _now_ms())
        if nxt is not None:
            await self._write(p, view, nxt)  # its markers follow (``_write``)

    async def _settle(self, p: int, view: TxnView, tid: str) -> None:
        """Wait (at most ``SETTLE_WAIT_S``) while ``tid`` has a change being
        written or a decided transaction completing, so that the next
        transaction's first request is answered when it can be rather than
        refused (CONCURRENT_TRANSACTIONS is still the answer after the wait)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_WAIT_S
        while True:
            cur = view.txns.get(tid)
            if tid not in view.busy and (cur is None or cur.state not in ts.PREPARING):
                return
            left = deadline - loop.time()
            if left <= 0 or self.views.get(p) is not view:
                return
            event = view.waiters.get(tid)
            if event is None:
                event = view.waiters[tid] = asyncio.Event()
            try:
                await asyncio.wait_for(event.wait(), left)
            except TimeoutError:
                return

    def _idle(self, view: TxnView, tid: str) -> "ts.TxnState | None":
        if tid in view.busy:
            raise ConcurrentTransactionsError(f"transactional id {tid!r}: a change is being "
                                              "written, retry")
        return view.txns.get(tid)

    # -- writing ----------------------------------------------------------------------------
    async def _write(self, p: int, view: TxnView, nxt: ts.TxnState) -> None:
        """Append ``nxt`` and wait (bounded) until acknowledged; it is applied
        when it is, even after the wait timed out (REQUEST_TIMED_OUT), and a
        Prepare* state then starts its markers (``_finish``). The id is busy
        until then."""
        tid = nxt.transactional_id
        view.busy.add(tid)
        try:
            fut = self.host.append_now(p, encode([nxt]))
        except BaseException as exc:
            self._settled(view, tid)
            raise _for_clients(exc, self.host.topic, p) from None
        if fut is None:
            self._applied(p, view, nxt, None)
            return
        fut.add_done_callback(lambda f: self._applied(p, view, nxt, f))
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.settings.write_timeout_ms / 1000)
        except TimeoutError:
            raise RequestTimedOutError(f"{self.host.topic}-{p} did not replicate the "
                                       "transaction's state in time") from None
        except LogbrokerError as exc:
            raise _for_clients(exc, self.host.topic, p) from None

    def _applied(self, p: int, view: TxnView, nxt: ts.TxnState, fut) -> None:
        """``nxt``'s write ended: applied if acknowledged; the id is free again."""
        tid = nxt.transactional_id
        self._settled(view, tid)
        if fut is not None and (fut.cancelled() or fut.exception() is not None):
            return
        self._apply(view, nxt)
        if nxt.state in ts.PREPARING:  # decided: the markers go out (even after a timeout)
            self._spawn(self._finish(p, view, nxt))

    @staticmethod
    def _apply(view: TxnView, nxt: ts.TxnState) -> None:
        if nxt.state == ts.DEAD:
            view.txns.pop(nxt.transactional_id, None)
        else:
            view.txns[nxt.transactional_id] = nxt

    @staticmethod
    def _settled(view: TxnView, tid: str) -> None:
        """``tid`` has no change in flight: the requests waiting for it go on."""
        view.busy.discard(tid)
        event = view.waiters.pop(tid, None)
        if event is not None:
            event.set()

    def _write_behind(self, p: int, view: TxnView, nxt: ts.TxnState) -> None:
        """Append ``nxt`` (a Complete* state) and apply it at once, its
        acknowledgement not waited for: whatever the id does next is
        appended after it in the same log, so that write's acknowledgement
        covers it; if it is lost with the leadership, the new coordinator
        finds the Prepare* record and delivers the markers again (each
        partition has them already)."""
        fut = self.host.append_now(p, encode([nxt]))
        self._apply(view, nxt)
        self._settled(view, nxt.transactional_id)
        if fut is not None:
            fut.add_done_callback(partial(_log_lost, nxt.transactional_id))

    async def _fence(self, p: int, view: TxnView, cur: ts.TxnState) -> None:
        """Abort ``cur``'s open transaction with the epoch bumped."""
        nxt = ts.fence(cur, _now_ms())
        await self._write(p, view, nxt)
        log.info("transactional id %r: aborting its open transaction (epoch %d -> %d)",
                 cur.transactional_id, cur.producer_epoch, nxt.producer_epoch)

    async def _time_out(self, p: int, view: TxnView, cur: ts.TxnState) -> None:
        await self._fence(p, view, cur)
        self.outcomes["timed_out"] += 1

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish(self, p: int, view: TxnView, st: ts.TxnState) -> None:
        """Deliver ``st``'s markers until every partition's leader wrote one,
        then write Complete*; stops when this broker stops leading ``p``
        (the new coordinator finishes from the Prepare* record)."""
        tid = st.transactional_id
        todo = [TxnMarker(st.producer_id, st.producer_epoch, st.commit, view.epoch, t, part)
                for t, part in st.parts]
        delay = RETRY_S[0]
        while True:
            if self.views.get(p) is not view:
                return
            try:
                if todo:
                    todo = await self.markers.send(todo)
                if not todo and tid not in view.busy:  # busy: an earlier change in flight
                    if view.txns.get(tid) != st:
                        return  # the id moved on meanwhile
                    self._write_behind(p, view, ts.complete(st, _now_ms()))
                    self.outcomes["committed" if st.commit else "aborted"] += 1
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - retried until done or unloaded
                log.info("transactional id %r: completing failed, retrying: %s", tid, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_S[1])

    # -- loading -----------------------------------------------------------------------------
    def _load(self, p: int, epoch: int) -> None:
        self._unload(p)
        view = self.views[p] = TxnView(epoch)
        view.task = asyncio.get_running_loop().create_task(self._load_view(p, view))

    async def _load_view(self, p: int, view: TxnView) -> None:
        try:
            while not self.host.settled(p):  # a new leader's HW is catching up
                await asyncio.sleep(0.05)
                if self.views.get(p) is not view:
                    return
            lg, _ = self.host.leader(p)
            view.txns = await load_txns(lg)
            view.ready = True
            view.loaded.set()
            preparing = [s for s in view.txns.values() if s.state in ts.PREPARING]
            for st in preparing:
                self._spawn(self._finish(p, view, st))
            if view.txns:
                log.info("loaded %d transactional id(s) of %s-%d (%d completing)",
                         len(view.txns), self.host.topic, p, len(preparing))
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the next request or tick loads again
            log.warning("loading %s-%d failed: %s", self.host.topic, p, exc)
            if self.views.get(p) is view:
                del self.views[p]

    def _unload(self, p: int) -> None:
        view = self.views.pop(p, None)
        if view is not None and view.task is not None and not view.task.done():
            view.task.cancel()

    # -- timers ------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            try:
                self._tick(time.monotonic())
            except Exception:  # noqa: BLE001 - the loop must survive a bug
                log.exception("transaction coordinator tick failed")
            await asyncio.sleep(min(IDLE_S, self.settings.check_interval_ms / 1000))

    def _tick(self, now: float) -> None:
        """Follow leadership; every ``check_interval_ms``: abort the
        transactions open past their timeout, expire idle ids."""
        led = self.host.led()
        for p in [p for p, v in self.views.items() if led.get(p) != v.epoch]:
            self._unload(p)
        for p, epoch in led.items():
            if p not in self.views:
                self._load(p, epoch)
        if now - self._checked < self.settings.check_interval_ms / 1000:
            return
        self._checked = now
        now_ms = _now_ms()
        for p, view in list(self.views.items()):
            if not view.ready:
                continue
            for st in list(view.txns.values()):
                if st.transactional_id in view.busy:
                    continue
                if st.overdue(now_ms):
                    log.info("transactional id %r: its transaction is open past its timeout "
                             "(%d ms)", st.transactional_id, st.timeout_ms)
                    self._spawn(self._quietly(self._time_out(p, view, st)))
                elif st.expired(now_ms, self.settings.expiration_ms):
                    self._spawn(self._quietly(self._write(p, view, ts.expire(st))))

    async def _quietly(self, coro) -> None:
        try:
            await coro
        except Exception as exc:  # noqa: BLE001 - the next tick tries again
            log.info("transaction timer: %s", exc)


def _for_clients(exc: BaseException, topic: str, p: int) -> BaseException:
    """A state write's failure as Kafka's clients expect it from a coordinator."""
    if isinstance(exc, (NotLeaderError, FencedLeaderEpochError)):
        return NotCoordinatorError(f"{topic}-{p}: {exc.message}")
    if isinstance(exc, (NotEnoughReplicasError, NotEnoughReplicasAfterAppendError)):
        return CoordinatorNotAvailableError(f"{topic}-{p}: {exc.message}")
    return exc


def _log_lost(tid: str, fut: asyncio.Future) -> None:
    """A Complete* record written behind was not acknowledged (a new
    coordinator completes the transaction again from its Prepare* record)."""
    if not fut.cancelled() and fut.exception() is not None:
        log.info("transactional id %r: its completion was not acknowledged: %s", tid,
                 fut.exception())
