"""Build a record batch by appending records (producer side, pure bytes).

Keys and values go to a bytearray each with an int32 offsets array, as Arrow
lays out a binary column, so the broker and readers turn a batch into arrays
without per-record work. Per-record Python work happens here, once, on the
producer.
"""

from __future__ import annotations

import sys
import time
from array import array

import crc32c
from typing import Iterable, Sequence

from ..errors import InvalidRecordError
from . import format as fmt

_I32_MIN, _I32_MAX = -(1 << 31), (1 << 31) - 1
_LITTLE = sys.byteorder == "little"

Header = tuple[str, "bytes | None"]


def _le(values: array) -> bytes:
    """Bytes of an int array in little-endian order (the format's columns)."""
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _bitmap(valid: Sequence[bool]) -> bytes:
    """Arrow validity bitmap: bit i (LSB first) set when entry i is not null."""
    out = bytearray((len(valid) + 7) // 8)
    for i, ok in enumerate(valid):
        if ok:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


class _BinaryColumn:
    """A nullable binary column under construction."""

    __slots__ = ("data", "offsets", "valid", "nulls")

    def __init__(self) -> None:
        self.data = bytearray()
        self.offsets = array("i", [0])
        self.valid: list[bool] = []
        self.nulls = 0

    def add(self, item: "bytes | bytearray | memoryview | None") -> None:
        if item is None:
            self.nulls += 1
            self.valid.append(False)
        else:
            self.data += item
            self.valid.append(True)
        if len(self.data) > _I32_MAX:
            raise InvalidRecordError("batch column exceeds 2 GiB")
        self.offsets.append(len(self.data))

    def mode(self) -> int:
        if self.nulls == len(self.valid):
            return fmt.COL_ABSENT
        return fmt.COL_NULLABLE if self.nulls else fmt.COL_DENSE

    def parts(self, mode: int) -> list[bytes]:
        if mode == fmt.COL_ABSENT:
            return []
        head = [_bitmap(self.valid)] if mode == fmt.COL_NULLABLE else []
        return head + [_le(self.offsets), bytes(self.data)]


class BatchBuilder:
    """Accumulates records, then ``build()`` returns one batch's bytes.

    Base offset and leader epoch are left 0: the broker stamps them. Record
    timestamps default to the wall clock in ms; within a batch they must lie
    within +-2^31 ms of the first record's.
    """

    def __init__(self, *, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, log_append_time: bool = False) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.log_append_time = log_append_time
        self._timestamps = array("q")
        self._keys = _BinaryColumn()
        self._values = _BinaryColumn()
        self._header_counts = array("i", [0])
        self._header_keys = _BinaryColumn()
        self._header_values = _BinaryColumn()

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def size_in_bytes(self) -> int:
        """Upper bound of the built batch's size so far."""
        n = len(self._timestamps)
        h = self._header_counts[-1]
        # header counts (n+1) + key offsets (h+1) + value bitmap and offsets (h+1)
        headers = 4 * n + 9 * h + 12 if h else 0
        return (fmt.HEADER_SIZE + 13 * n + 16 + len(self._keys.data) + len(self._values.data)
                + headers + len(self._header_keys.data) + len(self._header_values.data))

    def append(self, value: "bytes | None", key: "bytes | None" = None,
               headers: Iterable[Header] = (), timestamp_ms: "int | None" = None) -> int:
        """Add one record; returns its index (offset delta) in the batch."""
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        if self._timestamps and not _I32_MIN <= ts - self._timestamps[0] <= _I32_MAX:
            raise InvalidRecordError("record timestamp too far from the batch's first timestamp")
        self._timestamps.append(ts)
        self._keys.add(key)
        self._values.add(value)
        count = 0
        for hkey, hvalue in headers:
            if not isinstance(hkey, str):
                raise InvalidRecordError(f"header key must be str, got {type(hkey).__name__}")
            self._header_keys.add(hkey.encode("utf-8"))
            self._header_values.add(hvalue)
            count += 1
        self._header_counts.append(self._header_counts[-1] + count)
        return len(self._timestamps) - 1

    def build(self) -> bytes:
        """The batch bytes; raises ``InvalidRecordError`` when it is empty."""
        n = len(self._timestamps)
        if n == 0:
            raise InvalidRecordError("a batch needs at least one record")
        first = self._timestamps[0]
        key_mode, value_mode = self._keys.mode(), self._values.mode()
        has_headers = self._header_counts[-1] > 0
        attributes = (key_mode << fmt.KEY_MODE_SHIFT) | (value_mode << fmt.VALUE_MODE_SHIFT)
        if has_headers:
            attributes |= fmt.HAS_HEADERS
        if self.log_append_time:
            attributes |= fmt.LOG_APPEND_TIME
        parts = [_le(array("i", [t - first for t in self._timestamps]))]
        parts += self._keys.parts(key_mode) + self._values.parts(value_mode)
        if has_headers:
            parts.append(_le(self._header_counts))
            parts += self._header_keys.parts(fmt.COL_DENSE)
            parts += self._header_values.parts(fmt.COL_NULLABLE)
        body_size = sum(len(p) for p in parts)
        batch_length = fmt.HEADER_SIZE - fmt.LOG_OVERHEAD + body_size
        if batch_length > fmt.MAX_BATCH_LENGTH:
            raise InvalidRecordError("batch exceeds 2 GiB")
        fields = [0, batch_length, 0, fmt.MAGIC, 0, attributes, n - 1, first,
                  max(self._timestamps), self.producer_id, self.producer_epoch,
                  self.base_sequence, n]
        crc = crc32c.crc32c(fmt.HEADER.pack(*fields)[fmt.CRC_START:])
        for part in parts:
            crc = crc32c.crc32c(part, crc)
        fields[4] = crc
        return b"".join([fmt.HEADER.pack(*fields), *parts])


def build_batch(records: Iterable["bytes | tuple"], **kwargs) -> bytes:
    """Convenience: one batch from values, or ``(value, key[, headers[, ts]])``."""
    builder = BatchBuilder(**kwargs)
    for rec in records:
        if isinstance(rec, tuple):
            builder.append(*rec)
        else:
            builder.append(rec)
    return builder.build()
