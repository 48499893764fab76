"""A producer batch: records appended as Python lists, encoded in bulk.

``ProducerBatch`` is what ``Producer.send()`` appends to: three list appends
per record, no per-record encoding. ``encode()`` turns the lists into the
record batch of docs/format.md with the one encoder,
``records.encoder.encode_batch`` (a constant number of C-level passes; the
tests' ``build_batch`` and the benches use it too).

A batch also carries its delivery state: producer id / epoch / base
sequence once encoded, the broker's base offset or error once answered, and
one completion signal for all its records (a ``threading.Event`` for the
sync producer, an ``asyncio.Future`` for the asyncio one).
"""

from __future__ import annotations

from typing import Callable

from ...records.encoder import BATCH_OVERHEAD, RECORD_OVERHEAD, encode_batch
from .handles import CALLBACK_LOCK

__all__ = ["RECORD_OVERHEAD", "ProducerBatch"]


class ProducerBatch:
    """Records of one partition on their way to the broker.

    Appends happen under the producer's lock; everything else (encode,
    completion) on the I/O side. ``order`` is the producer-wide seal order,
    which keeps retried batches of a partition in sequence order.
    """

    __slots__ = ("topic", "partition", "timestamps", "keys", "values", "headers", "size",
                 "created", "deadline", "order", "data", "producer_id", "producer_epoch",
                 "base_sequence", "attempts", "base_offset", "error", "done", "signal",
                 "callbacks", "last_error", "owner")

    def __init__(self, topic: str, partition: int, created: float, signal, owner=None) -> None:
        self.topic, self.partition = topic, partition
        self.timestamps: list[int] = []
        self.keys: list = []
        self.values: list = []
        self.headers: dict[int, tuple] = {}
        self.size = BATCH_OVERHEAD
        self.created = created
        self.deadline = 0.0
        self.order = -1
        self.data: "bytes | None" = None
        self.producer_id = self.producer_epoch = self.base_sequence = -1
        self.attempts = 0
        self.base_offset = -1
        self.error: "BaseException | None" = None
        self.last_error: "BaseException | None" = None
        self.done = False
        self.signal = signal
        self.callbacks: "list[Callable] | None" = None
        self.owner = owner  # the accumulator: hurry(batch) when a caller waits on one of its records

    def __len__(self) -> int:
        return len(self.timestamps)

    def encode(self, producer_id: int, producer_epoch: int, base_sequence: int,
               transactional: bool = False) -> bytes:
        """Encode (once per producer id) and remember the bytes for retries;
        ``transactional``: a transaction's batch (``format.TRANSACTIONAL``)."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence = base_sequence
        self.data = encode_batch(self.timestamps, self.keys, self.values, self.headers,
                                   producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence, transactional=transactional)
        return self.data

    def complete(self, base_offset: int, error: "BaseException | None") -> None:
        """Resolve every record of the batch (I/O side; idempotent)."""
        if self.done:
            return
        self.base_offset, self.error = base_offset, error
        self.data = self.keys = self.values = None  # handles only need the timestamps
        self.headers = None
        with CALLBACK_LOCK:
            self.done = True
            callbacks, self.callbacks = self.callbacks, None
        self.signal.set()
        for fn in callbacks or ():
            _run_callback(fn)


def _run_callback(fn: Callable) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001 - a user callback must not break the I/O loop
        import logging

        logging.getLogger("logbroker.client").exception("producer callback failed")
