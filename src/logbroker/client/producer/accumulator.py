"""The producer's record accumulator: open batches per partition, sealed queues.

``append()`` is the per-record hot path (the caller's thread): under one
lock it appends to the partition's open ``ProducerBatch``; a batch that
reaches ``batch_size`` is sealed (queued for the sender) on the spot. The
sender (I/O side) seals batches whose linger expired, takes sealed batches
from the per-partition queues and puts failed ones back in sequence order.

Wake-ups are per batch, never per record: ``append`` calls ``wake()`` only
when the sender is idle (nothing in flight, no timer armed) and a new batch
appears, or when a batch fills while the sender could send more.

A batch is full at ``batch_size``, or already at ``batch_size /
max_in_flight`` (at least 16 KiB) while a request slot is free: a producer
that sends a window of records and then waits for their acks gets them
onto the wire, and the broker's disk, in up to ``max_in_flight`` requests
while it is still appending, instead of one lone first record and then
the rest after its ack (docs/client.md, "Windows").
"""

from __future__ import annotations

import threading
import time
from collections import deque
from itertools import count
from time import time_ns
from typing import Callable

from ...errors import RecordTooLargeError
from ...limits import MAX_TIMESTAMP
from ...records.encoder import I32_MAX, I32_MIN
from .. import validate
from ..settings import ProducerSettings
from .batch import RECORD_OVERHEAD, ProducerBatch
from .handles import RecordHandle

_new_handle = tuple.__new__
EAGER_MIN_BYTES = 16 << 10


class PartitionQueue:
    """Delivery state of one partition: sealed batches waiting (oldest
    first), requests in flight and the broker they went to (``broker``; a
    new leader gets nothing until they are back), the next sequence number,
    and ``blocked`` (an earlier batch failed while later ones were in
    flight: nothing more is sent until those come back, so retries keep
    sequence order). ``confirmed``: a batch with the current producer id and
    epoch was acknowledged here; until then an idempotent producer has one
    batch of the partition in flight (sender.py ``_collect``)."""

    __slots__ = ("queue", "inflight", "broker", "next_seq", "blocked", "retry_at", "confirmed")

    def __init__(self) -> None:
        self.queue: deque[ProducerBatch] = deque()
        self.inflight = 0
        self.broker = -1
        self.next_seq = 0
        self.blocked = False
        self.retry_at = 0.0
        self.confirmed = False

    def requeue(self, batch: ProducerBatch) -> None:
        """Put a failed batch back before every younger one (seal order)."""
        q = self.queue
        i = 0
        while i < len(q) and q[i].order < batch.order:
            i += 1
        q.insert(i, batch)


class Accumulator:
    def __init__(self, settings: ProducerSettings, make_signal: Callable[[], object]) -> None:
        self.settings = settings
        self.lock = threading.Lock()
        self.open: dict[tuple[str, int], ProducerBatch] = {}
        self.parts: dict[tuple[str, int], PartitionQueue] = {}
        # the partitions that may have batches queued (a superset: the sender drops
        # the ones it finds empty, under ``lock``): its walk is O(partitions with
        # something to send), not O(partitions ever written to)
        self.queued: dict[tuple[str, int], PartitionQueue] = {}
        self.incomplete: dict[ProducerBatch, None] = {}  # sealed, not yet resolved
        self.buffered = 0  # bytes of sealed, unresolved batches
        self.idle = True  # set by the sender under the lock; cleared by append
        self.inflight = 0  # requests in flight (sender-owned; read here)
        # wake(seal_open): a sealed batch can go (seal_open: and the new open one too)
        self.wake: Callable[[bool], None] = lambda seal_open: None  # on_ready() sets it
        self._make_signal = make_signal
        self._order = count().__next__
        self._batch_size = settings.batch_size
        # a batch this big goes at once while a request slot is free (docs/client.md)
        self._eager = max(settings.batch_size // settings.max_in_flight, EAGER_MIN_BYTES)
        self._max_in_flight = settings.max_in_flight
        self._max_record = settings.max_request_size - 200
        self._linger = settings.linger_ms / 1000

    def on_ready(self, wake: Callable[[bool], None]) -> None:
        """Call ``wake(seal_open)`` when a sealed batch can go (``seal_open``:
        the open one too): the sender's ``drain``."""
        self.wake = wake

    def append(self, topic: str, partition: int, value, key, headers,
               timestamp_ms: "int | None") -> "RecordHandle | None":
        """Add one record; returns its handle, or None when ``buffer_memory``
        is used up (the caller waits for space and calls again). Raises
        ``RecordTooLargeError`` for a record that can never be sent, and
        ``TypeError`` / ``InvalidRequestError`` for bad headers or a
        timestamp outside 0..``MAX_TIMESTAMP`` (limits.py) — before anything
        is appended, so no batch ever holds a record it cannot encode.

        A record goes to a new batch when its timestamp is more than 2**31-1
        ms after, or 2**31 ms before, its batch's first (the format stores
        int32 deltas from it, docs/format.md)."""
        size = RECORD_OVERHEAD
        if value is not None:
            size += len(value)
        if key is not None:
            size += len(key)
        if headers:
            headers, nbytes = validate.headers(headers)
            size += nbytes + 9 * len(headers)
        if size > self._max_record:
            raise RecordTooLargeError(f"record of {size} bytes exceeds max_request_size")
        if timestamp_ms is None:
            ts = time_ns() // 1_000_000
        elif timestamp_ms.__class__ is int and 0 <= timestamp_ms <= MAX_TIMESTAMP:
            ts = timestamp_ms
        else:
            ts = validate.timestamp(timestamp_ms, "timestamp_ms")
        wake = seal_open = False
        with self.lock:
            batch = self.open.get((topic, partition))
            if (batch is None or batch.size + size > self._batch_size
                    or batch.size + size > self._eager and self.inflight < self._max_in_flight
                    or not I32_MIN <= ts - batch.timestamps[0] <= I32_MAX):  # timestamp_fits, inline
                if batch is not None:
                    wake = self._seal(batch)
                if self.buffered >= self.settings.buffer_memory:
                    batch = None
                else:
                    batch = self.open[(topic, partition)] = ProducerBatch(
                        topic, partition, time.monotonic(), self._make_signal(), self)
                    if self.idle:
                        self.idle = False
                        wake = seal_open = True
            if batch is not None:
                index = len(batch.timestamps)
                batch.timestamps.append(ts)
                batch.keys.append(key)
                batch.values.append(value)
                if headers:
                    batch.headers[index] = headers
                batch.size += size
        if wake:
            self.wake(seal_open)
        return None if batch is None else _new_handle(RecordHandle, (batch, index))

    def hurry(self, batch: ProducerBatch) -> None:
        """A caller waits for a record of ``batch`` (any thread): the open
        batch of its partition, ``batch`` itself or a younger one, is sealed
        now instead of after ``linger_ms`` or the next response, and the
        sender woken if a request slot is free. A producer that sent a window
        and waits for its first record has stopped appending: the window's
        last records leave at once, not after the acks of the parts before
        them (a 2-record straggler cost a window ~0.7 ms of 7)."""
        with self.lock:
            current = self.open.get((batch.topic, batch.partition))
            if current is None:
                return
            wake = self._seal(current)
        if wake:
            self.wake(False)

    def _seal(self, batch: ProducerBatch) -> bool:
        """Queue ``batch`` for sending (lock held); True if the sender should
        be woken to send it now."""
        tp = (batch.topic, batch.partition)
        del self.open[tp]
        batch.order = self._order()
        batch.deadline = time.monotonic() + self.settings.delivery_timeout_ms / 1000
        part = self.parts.get(tp)
        if part is None:
            part = self.parts[tp] = PartitionQueue()
        part.queue.append(batch)
        self.queued[tp] = part
        self.incomplete[batch] = None
        self.buffered += batch.size
        return self.inflight < self._max_in_flight

    def seal_due(self, now: float, everything: bool = False,
                 can_send: "Callable[[tuple[str, int], int], bool | None] | None" = None
                 ) -> "float | None":
        """Seal open batches whose linger expired (all with ``everything``);
        returns the earliest linger deadline still open, or None.

        ``can_send(tp, size)`` False (the sender keeps such batches while
        the partition's leader has a request in flight, or once the requests
        it can send now are full; None: nor any later one, the walk stops
        and no timer is due): a due batch stays open
        and keeps filling until the response (which drains again), as
        Kafka's accumulator appends to a ready batch until the sender takes
        it. Sealed at once, it would leave as one small batch per request
        while later records started more small batches behind it: 1,000
        partitions fed round-robin made ~5 records per batch, and the broker
        paid one append and one fsync per batch."""
        nxt = None
        with self.lock:
            chosen = []
            for tp, batch in self.open.items():  # in creation order: the due ones first
                due = batch.created + self._linger
                if not everything and due > now:
                    nxt = due  # and every later batch is due later still
                    break
                ok = True if can_send is None else can_send(tp, batch.size)
                if ok:
                    chosen.append(batch)
                elif ok is None:  # nothing more can go now: a response drains again
                    break
            for batch in chosen:
                self._seal(batch)
        return nxt

    def seal_all(self) -> list[ProducerBatch]:
        """Seal every open batch; returns every unresolved batch (for flush)."""
        with self.lock:
            for batch in list(self.open.values()):
                self._seal(batch)
            return list(self.incomplete)

    def resolved(self, batch: ProducerBatch) -> None:
        """Bookkeeping after ``batch.complete()`` (sender side)."""
        if self.incomplete.pop(batch, 1) is None:
            self.buffered -= batch.size

    def requeue(self, batch: ProducerBatch, part: PartitionQueue) -> None:
        """A failed batch back in its partition's queue (seal order), to be
        sent again (sender side)."""
        part.requeue(batch)
        self.queued[(batch.topic, batch.partition)] = part

    def forget_empty(self, emptied: list) -> None:
        """Drop from ``queued`` the partitions of ``emptied`` ((tp, part))
        whose queue is still empty (a batch sealed meanwhile keeps its own)."""
        with self.lock:
            queued = self.queued
            for tp, part in emptied:
                if not part.queue and queued.get(tp) is part:
                    del queued[tp]

    def drop_all(self) -> list[ProducerBatch]:
        """Every batch not yet resolved, open ones included (for close/abort)."""
        with self.lock:
            batches = list(self.open.values()) + list(self.incomplete)
            self.open.clear()
            for part in self.parts.values():
                part.queue.clear()
            return batches

