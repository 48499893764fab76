"""The producer's I/O side: drain sealed batches into pipelined Produce requests.

Runs on one asyncio loop (the sync producer's I/O thread, or the caller's
loop for ``logbroker.aio``). ``drain()`` is the only entry point that sends;
it runs when woken by ``append``, when a response or a linger timer
arrives, and after (re)connecting.

Idempotence (design.md §7): one ``InitProducerId`` per producer; each
partition's batches get ``base_sequence`` = records previously sent to it;
a batch keeps its bytes until acknowledged, so a retry after a retriable
error or a lost connection resends the same sequence and the broker answers
a duplicate with its original offset. Up to ``max_in_flight`` requests are
in flight; a request carries one batch per part, several parts (in sequence
order) per partition. A retriable failure blocks its
partition until everything in flight for it has come back; then the failed
batches are resent in order. A batch that fails for good (or expires after
``delivery_timeout_ms``) leaves a sequence gap, so the producer takes a new
producer id and re-encodes every unacknowledged batch from sequence 0.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import threading
import time
from functools import partial

from ..errors import (BrokerUnavailableError, ClientClosedError, InvalidRecordError,
                      LogbrokerError, OutOfOrderSequenceError, RequestTimedOutError, for_code)
from ..protocol import messages as m
from .accumulator import Accumulator, PartitionQueue
from .batch import ProducerBatch
from .link import BrokerLink, cancel_and_wait
from .settings import ProducerSettings

log = logging.getLogger("logbroker.client")
_SEQ_MASK = 0x7FFFFFFF


class Sender:
    """Thread-safe: ``drain()`` may run in the caller's thread (sync producer:
    a lone record is encoded and written without waking the I/O thread) or
    on the loop; one re-entrant mutex guards the delivery state. Only the
    loop starts tasks and arms timers; a caller-thread drain that needs
    either hands over to the loop."""

    def __init__(self, acc: Accumulator, link: BrokerLink, settings: ProducerSettings,
                 loop: asyncio.AbstractEventLoop, in_loop, threadsafe: bool) -> None:
        self.acc, self.link, self.settings, self.loop = acc, link, settings, loop
        self.producer_id, self.producer_epoch = -1, -1
        self._in_loop = in_loop
        self._mutex = threading.RLock()
        self._need_pid = settings.idempotent
        self._reset_pending = False
        self._task: "asyncio.Task | None" = None  # connect / init-pid in progress
        self._timer: "asyncio.TimerHandle | None" = None
        self._loop_drain_pending = False
        self._closed = False
        self.on_space = lambda: None  # called when buffered bytes drop (mutex held)
        self._schedule = loop.call_soon_threadsafe if threadsafe else loop.call_soon
        acc.wake = self.drain

    # -- draining --------------------------------------------------------------------------
    def drain(self) -> None:
        """Send what can be sent now (any thread)."""
        if self._closed:
            return
        with self._mutex:
            try:
                need_loop = self._drain_locked(self._in_loop())
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

    def _drain_locked(self, in_loop: bool) -> bool:
        """One drain pass (mutex held); True if the loop must run one too."""
        acc = self.acc
        if self._timer is None and self._task is None:
            with acc.lock:  # under the lock: an append sees idle and wakes us
                if not acc.open and not acc.incomplete:
                    acc.idle = True  # nothing to send: the quick way out
                    return False
        now = time.monotonic()
        linger_next = self.acc.seal_due(now, everything=self.settings.linger_ms == 0)
        retry_next = None
        conn = self.link.current()
        if self._task is not None:
            pass  # connecting or fetching a producer id; it drains when done
        elif conn is None or self._need_pid or (self._reset_pending and self.acc.inflight == 0):
            if conn is None and not self.acc.incomplete:
                pass
            elif not in_loop:
                return True
            else:
                self._start(self._connect() if conn is None else self._init_pid())
        elif not self._reset_pending:
            retry_next = self._send_ready(conn, now)
        if linger_next is not None or retry_next is not None:
            if not in_loop:
                return True
            self._arm(linger_next, retry_next)
        # Natural batching: while requests are in flight, records wait for the
        # next response (or a full batch); with nothing in flight they go now.
        with self.acc.lock:
            if self.acc.inflight or self._timer is not None or self._task is not None:
                return False
            if self.acc.open and self.settings.linger_ms == 0:
                return True
            self.acc.idle = True
        return False

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

    def _send_ready(self, conn, now: float) -> "float | None":
        """Send requests while allowed; returns the earliest retry time left."""
        retry_next = None
        while self.acc.inflight < self.settings.max_in_flight:
            batches, retry_next = self._collect(now)
            if not batches:
                break
            try:
                self._send(conn, batches)
            except LogbrokerError as exc:  # connection closed under us
                for b in batches:
                    self._failed(b, exc)
                break
        return retry_next

    def _collect(self, now: float) -> tuple[list, "float | None"]:
        out, total, retry_next = [], 0, None
        limit = self.settings.max_request_size
        per_part = self.settings.max_in_flight
        for part in self.acc.parts.values():
            if part.blocked or not part.queue:
                continue
            if part.retry_at > now:
                retry_next = part.retry_at if retry_next is None else min(retry_next, part.retry_at)
                continue
            while part.queue and part.inflight < per_part:
                batch = part.queue[0]
                size = batch.size if batch.data is None else len(batch.data)
                if out and total + size > limit:
                    return out, retry_next
                part.queue.popleft()
                if batch.data is None:
                    try:
                        self._encode(batch, part)
                    except (InvalidRecordError, OverflowError, TypeError, ValueError,
                            struct.error) as exc:  # send() checks records: never expected
                        self._resolve(batch, -1, InvalidRecordError(
                            f"{batch.topic}[{batch.partition}]: cannot encode the batch: {exc}"))
                        continue
                part.inflight += 1
                out.append(batch)
                total += size
        return out, retry_next

    def _encode(self, batch: ProducerBatch, part: PartitionQueue) -> None:
        if self.settings.idempotent:
            seq = part.next_seq
            try:
                batch.encode(self.producer_id, self.producer_epoch, seq)
            except BaseException:
                batch.base_sequence = -1  # no sequence used: no gap
                raise
            part.next_seq = (seq + len(batch)) & _SEQ_MASK
        else:
            batch.encode(-1, -1, -1)

    def _send(self, conn, batches: list) -> None:
        s = self.settings
        msg = m.Produce(acks=s.acks, timeout_ms=int(s.delivery_timeout_ms),
                        producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                        parts=tuple((b.topic, b.partition, len(b.data)) for b in batches),
                        payload=tuple(b.data for b in batches))
        for b in batches:
            b.attempts += 1
        if s.acks == 0:
            conn.send_only(msg)
            for b in batches:
                self.acc.parts[(b.topic, b.partition)].inflight -= 1
                self._resolve(b, -1, None)
            return
        conn.request_cb(msg, self.link.options.request_timeout,
                        partial(self._on_response, batches))
        self.acc.inflight += 1

    # -- responses -------------------------------------------------------------------------
    def _on_response(self, batches: list, resp, exc) -> None:
        with self._mutex:
            self._handle_response(batches, resp, exc)
        self.drain()

    def _handle_response(self, batches: list, resp, exc) -> None:
        self.acc.inflight -= 1
        if resp is not None:
            if resp.error:
                exc, resp = for_code(resp.error)(resp.message), None
            elif len(resp.parts) != len(batches):
                exc = BrokerUnavailableError("produce response does not match its request")
                resp = None
        if resp is None:
            for b in batches:
                self._failed(b, exc)
        else:
            for b, (topic, partition, err, msg, base, _) in zip(batches, resp.parts):
                if err:
                    self._failed(b, for_code(err)(f"{topic}[{partition}]: {msg}"))
                else:
                    self._acked(b, base)

    def _part(self, b: ProducerBatch) -> PartitionQueue:
        part = self.acc.parts[(b.topic, b.partition)]
        part.inflight -= 1
        if part.inflight == 0:
            part.blocked = False
        return part

    def _acked(self, b: ProducerBatch, base_offset: int) -> None:
        self._part(b)
        self._resolve(b, base_offset, None)

    def _failed(self, b: ProducerBatch, exc: LogbrokerError) -> None:
        part = self._part(b)
        # A gap error right after an earlier failure of this partition is a
        # consequence of it: resend in order (after a reset if one is due).
        follows = isinstance(exc, OutOfOrderSequenceError) and (
            self._reset_pending or (part.queue and part.queue[0].order < b.order))
        if (exc.retriable or follows) and time.monotonic() < b.deadline and not self._closed:
            b.last_error = exc
            part.requeue(b)
            part.blocked = part.inflight > 0
            part.retry_at = time.monotonic() + self.settings.retry_backoff_ms / 1000
            return
        if not exc.retriable and not follows:
            log.warning("produce to %s[%d] failed: %s", b.topic, b.partition, exc)
        self._give_up(b, part, exc if not follows else b.last_error or exc)

    def _give_up(self, b: ProducerBatch, part: PartitionQueue, exc: BaseException) -> None:
        if time.monotonic() >= b.deadline and exc.__class__ is not RequestTimedOutError:
            exc = RequestTimedOutError(f"{b.topic}[{b.partition}]: not delivered within "
                                       f"delivery_timeout_ms ({exc})")
        if self.settings.idempotent and b.base_sequence >= 0:
            self._reset_pending = True  # its sequence range is now a gap
            part.blocked = part.inflight > 0
        self._resolve(b, -1, exc)

    def _resolve(self, b: ProducerBatch, base_offset: int, exc) -> None:
        b.complete(base_offset, exc)
        self.acc.resolved(b)
        self.on_space()

    # -- connecting and producer ids -------------------------------------------------------
    def _start(self, coro) -> None:
        self._task = self.loop.create_task(coro)
        self._task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task) -> None:
        with self._mutex:
            self._task = None
        if not task.cancelled():
            task.exception()  # reported through the batches it failed
        self.drain()

    async def _connect(self) -> None:
        while not self._closed and self.acc.incomplete:
            try:
                await self.link.connection()
                return
            except BrokerUnavailableError as exc:
                self._expire(exc)

    def _expire(self, exc: LogbrokerError) -> None:
        """Fail queued batches past their delivery deadline (broker unreachable)."""
        now = time.monotonic()
        with self._mutex:
            for part in list(self.acc.parts.values()):
                for b in [b for b in part.queue if b.deadline <= now]:
                    part.queue.remove(b)
                    self._give_up(b, part, exc)

    async def _init_pid(self) -> None:
        while not self._closed:
            try:
                resp = await self.link.call(m.InitProducerId())
                break
            except LogbrokerError as exc:
                if not exc.retriable:
                    self._fail_everything(exc)
                    return
                self._expire(exc)
                await asyncio.sleep(self.settings.retry_backoff_ms / 1000)
        else:
            return
        with self._mutex:
            self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
            if self._reset_pending or not self._need_pid:
                log.info("producer reset: new producer id %d", resp.producer_id)
                for part in self.acc.parts.values():
                    part.next_seq, part.blocked = 0, False
                    for b in part.queue:
                        b.data = None  # re-encoded with the new id and sequences
            self._need_pid = self._reset_pending = False

    def _fail_everything(self, exc: BaseException) -> None:
        with self._mutex:
            for b in self.acc.drop_all():
                b.complete(-1, exc)
                self.acc.resolved(b)
            self.on_space()

    async def aclose(self) -> None:
        """Stop sending; fail what is left with ``ClientClosedError``."""
        with self._mutex:
            self._closed = True
            if self._timer is not None:
                self._timer.cancel()
        await cancel_and_wait(self._task)
        self._fail_everything(ClientClosedError("the producer was closed before delivery"))
