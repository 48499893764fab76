"""The producer's I/O side: drain sealed batches into pipelined Produce
requests, one stream per leader broker.

Runs on one asyncio loop (the sync producer's I/O thread, or the caller's
loop for ``logbroker.aio``). ``drain()`` is the only entry point that sends;
it runs when woken by ``append``, when a response or a linger or retry timer
arrives, and when a background step ends (connecting to a broker, a
metadata refresh, a producer id).

Routing (design.md §7): each partition's batches go to its leader (the
router's metadata cache, routing.py). The ready batches of the partitions
one broker leads go in one Produce request to it, up to ``max_in_flight``
requests in flight per broker; a request carries one batch per part,
several parts (in sequence order) per partition, about ``REQUEST_BYTES``
of batches at most (decision 112: a flush of many partitions leaves as a
pipeline of such requests, so the broker appends the first ones while the
rest are encoded). A partition without a
known leader waits for a metadata refresh, a leader without a connection
for one; neither holds up other brokers' partitions. A partition never has
batches in flight to two brokers: after a leader change nothing goes to the
new leader until the old one has answered for everything it was sent.

Quotas (throttle.py): an answer carrying ``throttle_ms`` holds back the
next requests to its broker that long; the batches wait (and fill).

Retries and idempotence (delivery.py): a retriable error, a routing error
after a metadata refresh, is retried with the same bytes, so the same
producer id and sequence, to whichever broker leads then. One
``InitProducerId`` per producer (and one more after a sequence gap); each
partition's batches get ``base_sequence`` = records previously sent to it.
A partition's batches pipeline from its first (up to ``max_in_flight``):
a leader takes an unknown producer's first batch whatever its sequence, so
it fences, per connection, the batches that follow one it refused before
writing it (api/produce_fence.py, decision 110). A transactional producer
keeps one batch of a partition in flight until one is acknowledged under
its current id and epoch (``PartitionQueue.confirmed``).
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from functools import partial
from typing import Callable

from ...errors import (BrokerUnavailableError, ClientClosedError, InvalidRecordError,
                       LeaderNotAvailableError, LogbrokerError, TooManyConnectionsError)
from ...protocol import messages as m
from ..net.backoff import Backoff
from ..net.link import cancel_and_wait
from ..net.routing import Router
from ..net.throttle import Throttles
from ..settings import ProducerSettings
from . import txn_sending  # noqa: F401 (the type of Sender.txn)
from .accumulator import Accumulator, PartitionQueue
from .batch import ProducerBatch
from .delivery import Delivery

log = logging.getLogger("logbroker.client")
_SEQ_MASK = 0x7FFFFFFF
# A request carries up to this many bytes of batches (at least one batch;
# ``max_request_size`` still bounds what one may carry): Kafka's default
# max.request.size. A flush of 1,000 partitions' batches (~9 MB) left as one
# request: the broker started appending once all of it was encoded and sent,
# and answered after one barrier over 1,000 files; as ~1 MB requests,
# pipelined, the broker appends the first while the rest are encoded, and
# each barrier covers ~100 files (decision 112).
REQUEST_BYTES = 1 << 20


class Sender:
    """Thread-safe: ``drain()`` may run in the caller's thread (sync producer:
    a lone record is encoded and written without waking the I/O thread) or
    on the loop; one re-entrant mutex guards the delivery state. Only the
    loop starts tasks and arms timers; a caller-thread drain that needs
    either hands over to the loop."""

    def __init__(self, acc: Accumulator, router: Router, settings: ProducerSettings,
                 loop: asyncio.AbstractEventLoop, in_loop, threadsafe: bool,
                 on_space=None) -> None:
        self.acc, self.router, self.settings, self.loop = acc, router, settings, loop
        self.producer_id, self.producer_epoch = -1, -1
        self.delivery = Delivery(acc, router, settings, on_space)
        self._in_loop = in_loop
        self._mutex = threading.RLock()
        self._need_pid = settings.idempotent
        self._task: "asyncio.Task | None" = None  # a producer id: nothing is sent meanwhile
        self._connecting: dict[int, asyncio.Task] = {}  # broker id -> connecting to it
        self._refreshing: "asyncio.Task | None" = None  # a metadata refresh
        self._inflight: dict[int, int] = {}  # broker id -> requests in flight to it
        self._timer: "asyncio.TimerHandle | None" = None
        self._loop_drain_pending = False
        self._schedule = loop.call_soon_threadsafe if threadsafe else loop.call_soon
        acc.on_ready(self.drain)
        # Producer.metrics(): requests, batches and their records and bytes sent (first
        # attempts), retried batches; bumped per request and batch under the mutex
        self.requests_sent = self.batches_sent = self.records_sent = self.bytes_sent = 0
        self.retries = 0
        self.throttles = Throttles()  # brokers whose quota throttle runs: nothing sent to them
        self.txn: "txn_sending.TxnSending | None" = None  # a transactional producer's (attach)

    # -- draining --------------------------------------------------------------------------
    def drain(self, seal_open: bool = True) -> None:
        """Send what can be sent now (any thread). ``seal_open`` False (a
        batch filled while records keep coming): only sealed batches go, the
        open ones keep filling (with linger_ms=0 they go with the next
        response or when the producer is idle)."""
        if self.delivery.closed:
            return
        with self._mutex:
            try:
                need_loop = self._drain_locked(self._in_loop(), seal_open)
            except Exception:  # noqa: BLE001 - a bug here must not escape into send()
                log.exception("producer drain failed")
                need_loop = False
        if need_loop:
            self._drain_on_loop()

    def _drain_on_loop(self) -> None:
        if not self._loop_drain_pending:
            self._loop_drain_pending = True
            try:
                self._schedule(self._loop_drain)
            except RuntimeError:  # loop closed: the producer is closed
                pass

    def _loop_drain(self) -> None:
        self._loop_drain_pending = False
        self.drain()

    def _on_timer(self) -> None:
        with self._mutex:
            self._timer = None
        self.drain()

    def _drain_locked(self, in_loop: bool, seal_open: bool = True) -> bool:
        """One drain pass (mutex held); True if the loop must run one too."""
        acc = self.acc
        if self._timer is None and self._task is None:
            with acc.lock:  # under the lock: an append sees idle and wakes us
                if not acc.open and not acc.incomplete:
                    acc.idle = True  # nothing to send: the quick way out
                    return False
        now = time.monotonic()
        linger_next = None
        lingering = self.settings.linger_ms > 0
        if seal_open or lingering:
            # linger_ms=0: an open batch leaves whenever its leader has a slot free;
            # a lingered one only when its leader has nothing of ours in flight
            # (else it waits, still filling, for the response: docs/client.md)
            linger_next = acc.seal_due(now, not lingering, self._seal_budget(lingering))
        retry_next = None
        if self._task is not None:
            pass  # fetching a producer id; it drains when done
        elif self.txn is None and acc.incomplete and (
                self._need_pid or (self.delivery.reset_pending and acc.inflight == 0)):
            if not in_loop:
                return True
            self._task = self._start(self._init_pid(), self._pid_done)
        elif not self.delivery.reset_pending or self.txn is not None:
            retry_next, need_loop = self._send_ready(now, in_loop)
            if need_loop:
                return True
        if linger_next is not None or retry_next is not None:
            if not in_loop:
                return True
            self._arm(linger_next, retry_next)
        # Natural batching: while requests are in flight, records wait for the
        # next response (or a full batch); with nothing in flight they go now.
        # (A connection or refresh under way does not count: other leaders'
        # partitions must not wait for it.)
        with acc.lock:
            if acc.inflight or self._timer is not None or self._task is not None:
                return False
            if acc.open and self.settings.linger_ms == 0:
                return True
            acc.idle = True
        return False

    def _seal_budget(self, lingering: bool) -> "Callable[[tuple[str, int], int], bool | None]":
        """``can_seal(tp, size)`` for ``Accumulator.seal_due``: whether a due
        batch of ``size`` bytes is sealed now (True), left open (False), or
        nothing more can be this pass (None: every live broker's budget is
        spent, so the walk stops: O(1), not O(open batches), while a
        lingering producer's requests are in flight). Per leader, only what
        its free request slots carry now (``REQUEST_BYTES`` each; with
        ``lingering``, only when nothing of ours is in flight to it) is
        sealed; the other due batches stay open and keep filling until a
        response drains again, as Kafka's accumulator appends to a ready
        batch until the sender takes it. Sealing every due batch at once
        left most of them queued behind the requests in flight while their
        partitions' next records started new batches: 10,000 partitions fed
        round-robin made ~2 batches a partition, and the broker appends per
        batch."""
        leaders, inflight, left = self.router.cache.leaders, self._inflight, {}
        live = len(self.router.cache.brokers)
        slots = self.settings.max_in_flight
        request = min(self.settings.max_request_size, REQUEST_BYTES)
        spent: set = set()

        def can_seal(tp: "tuple[str, int]", size: int) -> "bool | None":
            bid = leaders.get(tp)
            if bid is None:
                return True  # sealed: it waits for a route (a refresh) either way
            budget = left.get(bid)
            if budget is None:  # the leader's first due batch: sealed however large
                busy = inflight.get(bid, 0)
                if busy >= slots or lingering and busy:
                    left[bid] = 0
                    spent.add(bid)
                    return None if live and len(spent) >= live else False
                budget = (slots - busy) * request
            elif size > budget:
                return None if live and bid in spent and len(spent) >= live else False
            budget -= size
            left[bid] = budget
            if budget <= 0:
                spent.add(bid)
            return True
        return can_seal

    def _arm(self, *deadlines) -> None:
        """Timer for the earliest deadline (loop.time() is time.monotonic())."""
        due = min((d for d in deadlines if d is not None), default=None)
        if due is None:
            return
        if self._timer is not None:
            if self._timer.when() <= due:
                return
            self._timer.cancel()
        self._timer = self.loop.call_at(due, self._on_timer)

    def _send_ready(self, now: float, in_loop: bool) -> "tuple[float | None, bool]":
        """Send what the leaders' connections take now. Returns the earliest
        retry time left, and whether the loop must run (to connect to a
        leader or refresh the metadata) when called outside it."""
        retry_next, need_loop, unrouted = None, False, False
        router = self.router
        cache = router.cache
        leaders = cache.leaders
        routes: dict[int, list] = {}
        txn = self.txn
        if txn is not None and (txn.settle(self) or self.delivery.reset_pending):
            return None, False  # nothing of it leaves any more; a gap waits for the abort
        emptied = []
        for tp, part in tuple(self.acc.queued.items()):
            if not part.queue:
                emptied.append((tp, part))
                continue
            if part.blocked:
                continue
            if txn is not None and not txn.may_send(tp):
                continue  # its AddPartitionsToTxn first (txn_sending.py)
            if part.retry_at > now:
                retry_next = part.retry_at if retry_next is None else min(retry_next, part.retry_at)
                continue
            bid = leaders.get(tp)
            if bid is None:
                unrouted = True
            elif not part.inflight or part.broker == bid:
                group = routes.get(bid)
                if group is None:
                    routes[bid] = [part]
                else:
                    group.append(part)
        if emptied:
            self.acc.forget_empty(emptied)
        if txn is not None and txn.wanted and not txn.adding:
            need_loop = not txn.start_adding(self, in_loop)  # on the loop only
        if (unrouted or cache.doubted) and self._refreshing is None:
            if in_loop:
                self._refreshing = self._start(self._refresh(), self._refresh_done)
            else:
                need_loop = True
        limit = self.settings.max_in_flight
        throttled = self.throttles.until
        for bid, parts in routes.items():
            wait = throttled and self.throttles.left(bid, now)
            if wait:  # the broker answered with a throttle: nothing goes to it before then
                retry_next = now + wait if retry_next is None else min(retry_next, now + wait)
                continue
            conn = router.current(bid)
            if conn is None:
                if bid not in self._connecting:
                    if in_loop:
                        self._connecting[bid] = self._start(self._connect(bid),
                                                            partial(self._connecting.pop, bid, None))
                    else:
                        need_loop = True
                continue
            while self._inflight.get(bid, 0) < limit:
                batches = self._collect(parts, bid)
                if not batches:
                    break
                try:
                    self._send(conn, bid, batches)
                except LogbrokerError as exc:  # connection closed under us
                    for b in batches:
                        self.delivery.failed(b, exc)
                    break
        return retry_next, need_loop

    def _collect(self, parts, broker: int) -> list:
        """The batches of one request to ``broker`` from ``parts`` (the
        partitions it leads): each partition's in sequence order, at most
        ``max_in_flight`` of it in flight, up to ``REQUEST_BYTES``
        (``max_request_size`` if smaller; one batch however large); a batch
        is encoded the first time it is sent."""
        out, total = [], 0
        limit = min(self.settings.max_request_size, REQUEST_BYTES)
        per_part = self.settings.max_in_flight
        transactional = self.txn is not None
        for part in parts:
            if part.blocked:
                continue
            # A leader takes an unknown producer's first batch whatever its
            # sequence; the connection's fence (api/produce_fence.py) refuses the
            # batches that follow one refused unwritten, so the partition's
            # batches pipeline from the first. A transaction's first batch on a
            # partition waits for its verification on the leader: one at a time
            # there until one of this producer id and epoch is acknowledged.
            most = per_part if part.confirmed or not transactional else 1
            while part.queue and part.inflight < most:
                batch = part.queue[0]
                size = batch.size if batch.data is None else len(batch.data)
                if out and total + size > limit:
                    return out
                part.queue.popleft()
                if batch.data is None:
                    try:
                        self._encode(batch, part)
                    except (InvalidRecordError, OverflowError, TypeError, ValueError,
                            struct.error) as exc:  # send() checks records: never expected
                        self.delivery.resolve(batch, -1, InvalidRecordError(
                            f"{batch.topic}[{batch.partition}]: cannot encode the batch: {exc}"))
                        continue
                part.inflight += 1
                part.broker = broker
                out.append(batch)
                total += size
        return out

    def _encode(self, batch: ProducerBatch, part: PartitionQueue) -> None:
        if self.settings.idempotent:
            seq = part.next_seq
            try:
                batch.encode(self.producer_id, self.producer_epoch, seq, self.txn is not None)
            except BaseException:
                batch.base_sequence = -1  # no sequence used: no gap
                raise
            part.next_seq = (seq + len(batch)) & _SEQ_MASK
        else:
            batch.encode(-1, -1, -1)

    def _send(self, conn, broker: int, batches: list) -> None:
        s = self.settings
        msg = m.Produce(acks=s.acks, timeout_ms=int(s.delivery_timeout_ms),
                        producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        parts=tuple((b.topic, b.partition, len(b.data)) for b in batches),
                        payload=tuple(b.data for b in batches),
                        transactional_id=None if self.txn is None else self.txn.transactional_id)
        self.requests_sent += 1
        for b in batches:
            b.attempts += 1
            if b.attempts > 1:
                self.retries += 1
            else:
                self.batches_sent += 1
                self.records_sent += len(b.timestamps)
                self.bytes_sent += len(b.data)
        if s.acks == 0:
            conn.send_only(msg)
            for b in batches:
                self.acc.parts[(b.topic, b.partition)].inflight -= 1
                self.delivery.resolve(b, -1, None)
            return
        self._inflight[broker] = self._inflight.get(broker, 0) + 1
        self.acc.inflight += 1  # counted first: the answer may come on the loop at once
        try:
            conn.request_cb(msg, self.router.options.request_timeout,
                            partial(self._on_response, broker, batches))
        except BaseException:
            self._inflight[broker] -= 1
            self.acc.inflight -= 1
            raise

    # -- responses -------------------------------------------------------------------------
    def _on_response(self, broker: int, batches: list, resp, exc) -> None:
        with self._mutex:
            self._handle_response(broker, batches, resp, exc)
        self.drain()

    def _handle_response(self, broker: int, batches: list, resp, exc) -> None:
        self._inflight[broker] -= 1
        self.acc.inflight -= 1
        if resp is not None:
            self.throttles.seen(broker, resp.throttle_ms, time.monotonic())
        self.delivery.response(batches, resp, exc)

    # -- background steps: connecting, metadata, producer ids -------------------------------
    def _start(self, coro, clear) -> asyncio.Task:
        """Run ``coro`` on the loop; when it ends, ``clear()`` its slot and drain."""
        task = self.loop.create_task(coro)
        task.add_done_callback(partial(self._task_done, clear))
        return task

    def _task_done(self, clear, task: asyncio.Task) -> None:
        with self._mutex:
            clear()
        if not task.cancelled():
            task.exception()  # reported through the batches it failed
        self.drain()

    def _pid_done(self) -> None:
        self._task = None

    def _refresh_done(self) -> None:
        self._refreshing = None

    async def _connect(self, broker: int) -> None:
        try:
            await self.router.connection(broker)
        except (BrokerUnavailableError, TooManyConnectionsError) as exc:
            self.router.invalidate(broker=broker)  # it may have lost its leadership
            self._expire(exc)

    async def _refresh(self) -> None:
        try:
            await self.router.refresh(force=True)  # paced by the router
        except LogbrokerError as exc:
            self._expire(exc)
        else:
            self._expire(LeaderNotAvailableError("no leader known for the partition"))

    def _expire(self, exc: LogbrokerError) -> None:
        with self._mutex:
            self.delivery.expire(exc)

    async def _init_pid(self) -> None:
        backoff = Backoff(self.settings.retry_backoff_ms / 1000,
                          self.settings.retry_backoff_max_ms / 1000)
        while not self.delivery.closed:
            try:
                resp = await self.router.call_any(m.InitProducerId())
                break
            except LogbrokerError as exc:
                if not exc.retriable:
                    with self._mutex:
                        self.delivery.fail_everything(exc)
                    return
                self._expire(exc)
                await asyncio.sleep(backoff.next())
        else:
            return
        with self._mutex:
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            if self.delivery.reset_pending or not self._need_pid:
                log.info("producer reset: new producer id %d", resp.producer_id)
                for part in self.acc.parts.values():
                    part.next_seq, part.blocked, part.confirmed = 0, False, False
                    for b in part.queue:
                        b.data = None  # re-encoded with the new id and sequences
            self._need_pid = False
            self.delivery.renewed()

    async def aclose(self) -> None:
        """Stop sending; fail what is left with ``ClientClosedError``."""
        with self._mutex:
            self.delivery.close()
            if self._timer is not None:
                self._timer.cancel()
        adding = None if self.txn is None else self.txn.adding
        for task in (self._task, self._refreshing, adding, *self._connecting.values()):
            await cancel_and_wait(task)
        with self._mutex:
            self.delivery.fail_everything(ClientClosedError("the producer was closed before delivery"))
