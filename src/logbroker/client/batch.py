"""A producer batch: records appended as Python lists, encoded in bulk.

``ProducerBatch`` is what ``Producer.send()`` appends to: three list appends
per record, no per-record encoding. ``encode()`` turns the lists into the
record batch of docs/format.md with a constant number of C-level passes
(``b"".join``, ``itertools.accumulate``), byte for byte what
``records.BatchBuilder`` builds from the same records (tests check this).

A batch also carries its delivery state: producer id / epoch / base
sequence once encoded, the broker's base offset or error once answered, and
one completion signal for all its records (a ``threading.Event`` for the
sync producer, an ``asyncio.Future`` for the asyncio one).
"""

from __future__ import annotations

import sys
from array import array
from itertools import accumulate
from typing import Callable

import crc32c

from ..errors import InvalidRecordError
from ..records import format as fmt
from .handles import CALLBACK_LOCK

_LITTLE = sys.byteorder == "little"
_I32_MAX = (1 << 31) - 1
RECORD_OVERHEAD = 13  # per record: ts delta, key and value offsets, bitmap bits


def _i32_le(values) -> bytes:
    arr = array("i", values)
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        arr.byteswap()
    return arr.tobytes()


def _column(items: list, n: int) -> tuple[int, list]:
    """(mode, parts) of one nullable binary column (Arrow layout)."""
    nulls = items.count(None)
    if nulls == n:
        return fmt.COL_ABSENT, []
    if nulls:
        head = [_bitmap(items)]
        items = [b"" if item is None else item for item in items]
    else:
        head = []
    data = b"".join(items)
    if len(data) > _I32_MAX:
        raise InvalidRecordError("batch column exceeds 2 GiB")
    offsets = _i32_le(accumulate(map(len, items), initial=0))
    return (fmt.COL_NULLABLE if nulls else fmt.COL_DENSE), head + [offsets, data]


def _bitmap(items: list) -> bytes:
    out = bytearray((len(items) + 7) // 8)
    for i, item in enumerate(items):
        if item is not None:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _header_parts(headers: dict, n: int) -> list:
    """Header columns: cumulative counts, keys (dense), values (nullable)."""
    counts, hkeys, hvalues = [0], [], []
    for i in range(n):
        for hkey, hvalue in headers.get(i, ()):
            hkeys.append(hkey.encode("utf-8"))
            hvalues.append(hvalue)
        counts.append(len(hkeys))
    values = [b"" if v is None else v for v in hvalues]
    return [_i32_le(counts), _i32_le(accumulate(map(len, hkeys), initial=0)), b"".join(hkeys),
            _bitmap(hvalues), _i32_le(accumulate(map(len, values), initial=0)), b"".join(values)]


def encode_records(timestamps: list, keys: list, values: list, headers: dict, *,
                   producer_id: int = -1, producer_epoch: int = -1,
                   base_sequence: int = -1) -> bytes:
    """One record batch (docs/format.md) from parallel lists; ``headers``
    maps a record index to its ``(str, bytes | None)`` pairs."""
    n = len(timestamps)
    if n == 0:
        raise InvalidRecordError("a batch needs at least one record")
    first = timestamps[0]
    key_mode, key_parts = _column(keys, n)
    value_mode, value_parts = _column(values, n)
    attributes = (key_mode << fmt.KEY_MODE_SHIFT) | (value_mode << fmt.VALUE_MODE_SHIFT)
    parts = [_i32_le([t - first for t in timestamps]), *key_parts, *value_parts]
    if headers:
        attributes |= fmt.HAS_HEADERS
        parts += _header_parts(headers, n)
    body = b"".join(parts)
    batch_length = fmt.HEADER_SIZE - fmt.LOG_OVERHEAD + len(body)
    if batch_length > fmt.MAX_BATCH_LENGTH:
        raise InvalidRecordError("batch exceeds 2 GiB")
    fields = [0, batch_length, 0, fmt.MAGIC, 0, attributes, n - 1, first, max(timestamps),
              producer_id, producer_epoch, base_sequence, n]
    crc = crc32c.crc32c(body, crc32c.crc32c(fmt.HEADER.pack(*fields)[fmt.CRC_START:]))
    fields[4] = crc
    return fmt.HEADER.pack(*fields) + body


class ProducerBatch:
    """Records of one partition on their way to the broker.

    Appends happen under the producer's lock; everything else (encode,
    completion) on the I/O side. ``order`` is the producer-wide seal order,
    which keeps retried batches of a partition in sequence order.
    """

    __slots__ = ("topic", "partition", "timestamps", "keys", "values", "headers", "size",
                 "created", "deadline", "order", "data", "producer_id", "producer_epoch",
                 "base_sequence", "attempts", "base_offset", "error", "done", "signal",
                 "callbacks", "last_error")

    def __init__(self, topic: str, partition: int, created: float, signal) -> None:
        self.topic, self.partition = topic, partition
        self.timestamps: list[int] = []
        self.keys: list = []
        self.values: list = []
        self.headers: dict[int, tuple] = {}
        self.size = fmt.HEADER_SIZE + 16
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

    def __len__(self) -> int:
        return len(self.timestamps)

    def encode(self, producer_id: int, producer_epoch: int, base_sequence: int) -> bytes:
        """Encode (once per producer id) and remember the bytes for retries."""
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.base_sequence = base_sequence
        self.data = encode_records(self.timestamps, self.keys, self.values, self.headers,
                                   producer_id=producer_id, producer_epoch=producer_epoch,
                                   base_sequence=base_sequence)
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
