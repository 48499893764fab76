"""Record-at-a-time front end of the one batch encoder (``encoder.encode_batch``),
for tests, tools and benches: ``BatchBuilder`` collects records the way the
producer does (plain lists) and ``build()`` encodes them; ``build_batch`` is
the one-call form. There is no second encoding here: what these return is
byte for byte what the Producer sends for the same records.
"""

from __future__ import annotations

import time
from typing import Iterable

from ..errors import InvalidRecordError
from .encoder import Header, encode_batch, size_bound, timestamp_fits


class BatchBuilder:
    """Accumulates records, then ``build()`` returns one batch's bytes.

    Base offset and leader epoch are left 0: the broker stamps them. Record
    timestamps default to the wall clock in ms; within a batch they must lie
    within +-(2^31-1) ms of the first record's (``append`` refuses one that
    does not, with ``InvalidRecordError``, and the builder stays usable).
    """

    def __init__(self, *, producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, log_append_time: bool = False,
                 transactional: bool = False) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.log_append_time = log_append_time
        self.transactional = transactional
        self._timestamps: list[int] = []
        self._keys: list = []
        self._values: list = []
        self._headers: dict[int, tuple] = {}
        self._data_bytes = 0
        self._header_count = 0

    def __len__(self) -> int:
        return len(self._timestamps)

    @property
    def size_in_bytes(self) -> int:
        """Upper bound of the built batch's size so far."""
        return size_bound(len(self._timestamps), self._data_bytes, self._header_count)

    def append(self, value: "bytes | None", key: "bytes | None" = None,
               headers: Iterable[Header] = (), timestamp_ms: "int | None" = None) -> int:
        """Add one record; returns its index (offset delta) in the batch."""
        ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
        if self._timestamps and not timestamp_fits(self._timestamps[0], ts):
            raise InvalidRecordError("record timestamp too far from the batch's first timestamp")
        headers = tuple(headers)
        index = len(self._timestamps)
        self._timestamps.append(ts)
        self._keys.append(key)
        self._values.append(value)
        if headers:
            self._headers[index] = headers
            self._header_count += len(headers)
            self._data_bytes += sum(_nbytes(k) + _nbytes(v) for k, v in headers)
        self._data_bytes += _nbytes(key) + _nbytes(value)
        return index

    def build(self) -> bytes:
        """The batch bytes; ``InvalidRecordError`` when it is empty or a
        record does not fit the format."""
        return encode_batch(self._timestamps, self._keys, self._values, self._headers,
                            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                            base_sequence=self.base_sequence, log_append_time=self.log_append_time,
                            transactional=self.transactional)


def _nbytes(item) -> int:
    """Bytes ``item`` adds to a batch (0 for None; wrong types are refused by build)."""
    if isinstance(item, str):
        return len(item.encode("utf-8", "replace"))
    return len(item) if isinstance(item, (bytes, bytearray, memoryview)) else 0


def build_batch(records: Iterable["bytes | tuple"], **kwargs) -> bytes:
    """Convenience: one batch from values, or ``(value, key[, headers[, ts]])``."""
    builder = BatchBuilder(**kwargs)
    for rec in records:
        if isinstance(rec, tuple):
            builder.append(*rec)
        else:
            builder.append(rec)
    return builder.build()
