"""The producer's one core, shared by ``logbroker.Producer`` (sync) and
``logbroker.aio.Producer``: argument checks, partition choice, the
accumulator and the sender, and the coroutines that talk to the broker.

The shells differ only in how they wait. ``append()`` is the hot path and
runs in the caller's thread (sync: no hand-off to the I/O thread); what may
block — a topic's first metadata lookup, waiting for ``buffer_memory`` — is
the coroutine ``send_slow()``, which the sync shell runs on its I/O loop
and the asyncio shell awaits. Every check happens before a record is
appended, so a refused record never reaches a batch: the records around it
are delivered as if it had never been sent.
"""

from __future__ import annotations

import asyncio
import time

from ...errors import (ClientClosedError, InvalidTxnStateError, LogbrokerError,
                       RequestTimedOutError, UnknownTopicOrPartitionError)
from .. import validate
from ..net.metadata import partition_counts
from ..net.routing import Router
from ..settings import ProducerSettings, client_options
from ..waiting import LoopWakeup
from .accumulator import Accumulator
from .handles import RecordHandle
from .partitioner import RoundRobin, partition_for_key
from .sender import Sender
from .transactions import Transactions

_RECHECK_S = 0.5  # a space waiter looks again this often even without a wake-up
PRODUCER_METRICS = ("records_sent", "batches_sent", "bytes_sent", "batch_size_mean",
                    "requests_sent", "retries", "in_flight", "buffered_bytes",
                    "produce_throttle_time_ms_avg", "produce_throttle_time_ms_max")  # metrics() keys
LISTING_EVERY_S = 1.0  # a topic missing from the partition counts triggers a listing this old at most


class ProducerCore:
    """One producer's state. ``start(loop, ...)`` binds it to the loop its
    I/O runs on (the sync shell's I/O thread, or the caller's loop)."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, acks="all", linger_ms: float = 0,
                 batch_size: int = 1 << 20, idempotent: "bool | None" = None,
                 client_id: str = "logbroker-producer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, transactional_id: "str | None" = None,
                 transaction_timeout_ms: int = 60_000, **settings) -> None:
        self.txn = None if transactional_id is None else Transactions(
            self, transactional_id, transaction_timeout_ms, acks, idempotent)
        self.settings = ProducerSettings.make(acks=acks, idempotent=idempotent,
                                              linger_ms=linger_ms, batch_size=batch_size,
                                              **settings)
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms, self.settings)
        self.counts: dict[str, int] = {}
        self.closed = False
        self.acc: "Accumulator | None" = None
        self._rr = RoundRobin()
        self._listed: "tuple[float, dict] | None" = None  # (when, partition counts of every topic)
        self._listing_task: "asyncio.Future | None" = None

    def start(self, loop: asyncio.AbstractEventLoop, make_signal, in_loop,
              threadsafe: bool) -> None:
        """Create the router, accumulator and sender on ``loop``; ``in_loop()``
        tells whether the current thread runs it."""
        self.router = Router(self.options, auto_create=self.settings.auto_create_topics)
        self.acc = Accumulator(self.settings, make_signal)
        self.sender = Sender(self.acc, self.router, self.settings, loop, in_loop=in_loop,
                             threadsafe=threadsafe, on_space=self._space_freed)
        self._loop, self._in_loop = loop, in_loop
        self._space = LoopWakeup()
        self._space_waiters = 0
        if self.txn is not None:
            self.txn.start()

    def check_open(self) -> None:
        if self.closed:
            raise ClientClosedError("the producer is closed")

    def transactions(self) -> Transactions:
        """The transactional side; raises ``InvalidTxnStateError`` unless the
        producer has a ``transactional_id``."""
        self.check_open()
        if self.txn is None:
            raise InvalidTxnStateError("transactions need Producer(transactional_id=...)")
        return self.txn

    # -- sending ----------------------------------------------------------------------------------
    def append(self, topic: str, value, key, headers, partition: "int | None",
               timestamp_ms: "int | None") -> "RecordHandle | None":
        """Check and append one record (any thread, never blocks); returns its
        handle, or None when ``send_slow`` must finish the job (the topic's
        partition count is unknown, or ``buffer_memory`` is full). Raises
        ``TypeError``, ``InvalidRequestError``, ``RecordTooLargeError``,
        ``UnknownTopicOrPartitionError``, ``ClientClosedError``."""
        if self.closed:
            raise ClientClosedError("the producer is closed")
        if self.txn is not None:
            self.txn.state.check_send()
        if value is not None and value.__class__ is not bytes:
            value = validate.as_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = validate.as_bytes(key, "key")
        try:
            count = self.counts.get(topic)
        except TypeError:  # unhashable: validate says what is wrong with it
            count = None
        if count is None:
            validate.topic(topic)
            return None
        if partition is None:
            if count == 1:
                partition = 0
            else:
                partition = self._rr(count) if key is None else partition_for_key(key, count)
        elif partition.__class__ is not int or not 0 <= partition < count:
            partition = self._check_partition(topic, partition, count)
        handle = self.acc.append(topic, partition, value, key, headers, timestamp_ms)
        if self.txn is not None and handle is not None:
            self.txn.sending.note(self.sender, (topic, partition))
        return handle

    def _check_partition(self, topic: str, partition, count: int) -> int:
        partition = validate.partition(partition)
        if partition >= count:
            raise UnknownTopicOrPartitionError(
                f"{topic}[{partition}]: the topic has {count} partition(s)")
        return partition

    async def send_slow(self, topic: str, value, key, headers, partition: "int | None",
                        timestamp_ms: "int | None") -> RecordHandle:
        """``append`` after learning the topic's partition count and waiting
        for buffer space (at most ``max_block_ms``, then ``RequestTimedOutError``).
        Runs on the I/O loop."""
        if topic not in self.counts:
            await self.partitions_for(topic)
        args = (topic, value, key, headers, partition, timestamp_ms)
        deadline = time.monotonic() + self.settings.max_block_ms / 1000
        self._space_waiters += 1
        try:
            while True:
                seen = self._space.gen
                handle = self.append(*args)
                if handle is not None:
                    return handle
                now = time.monotonic()
                if now >= deadline:
                    raise RequestTimedOutError("buffer_memory stayed full for max_block_ms")
                await self._space.wait(seen, min(deadline, now + _RECHECK_S))
        finally:
            self._space_waiters -= 1

    async def wait_delivered(self, deadline: float, stop=None) -> None:
        """Until every sealed batch is resolved (on the loop), or ``stop()``
        is true (checked at every resolved batch); TimeoutError at
        ``deadline`` (time.monotonic())."""
        self._space_waiters += 1  # every resolved batch notifies _space then
        try:
            while True:
                seen = self._space.gen
                if not self.acc.incomplete or (stop is not None and stop()):
                    return
                now = time.monotonic()
                if now >= deadline:
                    raise TimeoutError("records of the transaction still unacknowledged")
                await self._space.wait(seen, min(deadline, now + _RECHECK_S))
        finally:
            self._space_waiters -= 1

    def _space_freed(self) -> None:
        """Buffered bytes dropped (any thread, the sender's mutex held)."""
        if self._space_waiters:
            if self._in_loop():
                self._space.notify()
            else:
                try:
                    self._loop.call_soon_threadsafe(self._space.notify)
                except RuntimeError:  # the loop is closed: so is the producer
                    pass

    async def partitions_for(self, topic: str) -> int:
        """The topic's partition count: cached; else from a listing of every
        topic (one Metadata for all, at most every ``LISTING_EVERY_S``, so a
        producer starting on 1,000 existing topics asks once, not 1,000
        times); else one Metadata for it (the topic is created if the broker
        auto-creates topics)."""
        count = self.counts.get(topic)
        if count is None:
            validate.topic(topic)
            count = (await self._listing()).get(topic)
            if count is None:
                counts = await partition_counts(self.router, [topic], timeout=self.settings.
                                                max_block_ms / 1000,
                                                auto_create=self.settings.auto_create_topics)
                count = counts[topic]
            else:
                self.router.track([topic])  # its leaders came with the listing
            self.counts[topic] = count
        return count

    async def _listing(self) -> dict:
        """Partition counts of every topic, from a listing at most
        ``LISTING_EVERY_S`` old (shared by concurrent callers); {} if the
        listing fails (the caller then asks for its topic alone)."""
        now = time.monotonic()
        if self._listed is None or now - self._listed[0] > LISTING_EVERY_S:
            if self._listing_task is None or self._listing_task.done():
                self._listing_task = asyncio.ensure_future(self._list_topics())
            try:
                self._listed = (now, await asyncio.shield(self._listing_task))
            except LogbrokerError:
                return {}
        return self._listed[1]

    async def _list_topics(self) -> dict:
        # one attempt: on any failure the caller's own Metadata reports it, within max_block_ms
        resp = await self.router.metadata(None, timeout=self.settings.max_block_ms / 1000,
                                          retry=False)
        return {name: count for name, code, _, count in resp.topics if not code and count}

    # -- flushing and closing ---------------------------------------------------------------------
    def flush_start(self, timeout) -> list:
        """Seal every open batch and send what can be sent; returns the
        batches still unresolved (the shell waits for their signals)."""
        validate.seconds(timeout, "timeout")
        if self.acc is None or self.closed:
            return []
        batches = self.acc.seal_all()
        self.sender.drain()
        return [b for b in batches if not b.done]

    def flush_timed_out(self, timeout) -> TimeoutError:
        return TimeoutError(f"flush: records still unacknowledged after {timeout} s")

    def metrics(self) -> dict:
        """The producer's counters (docs/metrics.md): ``records_sent``,
        ``batches_sent``, ``bytes_sent`` (first attempts: what the broker was
        given), ``batch_size_mean`` (records per batch), ``requests_sent``,
        ``retries`` (batches sent again), ``in_flight`` (requests awaiting an
        answer), ``buffered_bytes`` (sealed batches not yet resolved) and
        ``produce_throttle_time_ms_avg`` / ``_max`` (the quota throttle the
        broker's answers carried: throttle.py).
        All 0 before the first send. Never blocks; any thread."""
        sender, acc = getattr(self, "sender", None), self.acc
        if sender is None or acc is None:
            return dict.fromkeys(PRODUCER_METRICS, 0)
        batches = sender.batches_sent
        return {"records_sent": sender.records_sent, "batches_sent": batches,
                "bytes_sent": sender.bytes_sent,
                "batch_size_mean": sender.records_sent / batches if batches else 0.0,
                "requests_sent": sender.requests_sent, "retries": sender.retries,
                "in_flight": acc.inflight, "buffered_bytes": acc.buffered,
                **sender.throttles.metrics("produce")}

    def mark_closed(self) -> None:
        """Refuse every call from now on (any thread; the first step of closing)."""
        self.closed = True

    async def shutdown(self) -> None:
        """Stop the sender (undelivered records fail with
        ``ClientClosedError``), close the connections, wake space waiters."""
        self.mark_closed()
        if self.acc is not None:
            await self.sender.aclose()
            if self.txn is not None:
                await self.txn.requests.aclose()
            await self.router.aclose()
            self._space.notify()
