"""Consumer records: fetched batch bytes -> ``ConsumerRecord`` tuples, in bulk.

``decode_batch`` (records/decoder.py) checks the header, the CRC and the
section layout and returns zero-copy column views; ``batch_records`` turns
the columns into Python lists with a constant number of C-level passes
(``array.frombytes``, slicing one ``bytes`` copy of each column) and builds
the records with ``map`` over ``zip`` — no Python code runs per record
unless a column has nulls or the batch has headers. ``RecordBatch.records()``
gives the same records one by one; the tests check they agree.
"""

from __future__ import annotations

import sys
from array import array
from functools import partial
from itertools import repeat
from operator import getitem
from typing import NamedTuple

from ..errors import CorruptRecordError
from ..records.decoder import Column, RecordBatch

_LITTLE = sys.byteorder == "little"


class ConsumerRecord(NamedTuple):
    """One record as ``Consumer.poll()`` returns it. ``timestamp`` is ms since
    the epoch; ``headers`` a tuple of ``(str, bytes | None)``."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: "bytes | None"
    value: "bytes | None"
    headers: tuple = ()


_make = partial(tuple.__new__, ConsumerRecord)


def _i32(view: memoryview) -> array:
    out = array("i")
    out.frombytes(view)
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        out.byteswap()
    return out


def column_values(col: Column, n: int) -> list:
    """Entries of a binary column as ``bytes`` (``None`` for nulls)."""
    if col.offsets is None:
        return [None] * n
    offsets = _i32(col.offsets)
    data = bytes(col.data)
    starts, ends = offsets[:-1], offsets[1:]
    values = list(map(getitem, repeat(data, n), map(slice, starts, ends)))
    if col.validity is not None:
        bits = col.validity
        for i in range(n):
            if not bits[i >> 3] >> (i & 7) & 1:
                values[i] = None
    return values


def _headers(batch: RecordBatch, n: int) -> list:
    counts = _i32(batch.header_counts)
    h = counts[-1]
    keys = column_values(batch.header_keys, h)
    values = column_values(batch.header_values, h)
    try:
        keys = [k.decode("utf-8") for k in keys]
    except (UnicodeDecodeError, AttributeError) as exc:
        raise CorruptRecordError(f"header key is not UTF-8 text: {exc}") from None
    pairs = list(zip(keys, values))
    out = []
    for i in range(n):
        lo, hi = counts[i], counts[i + 1]
        if not 0 <= lo <= hi <= h:
            raise CorruptRecordError(f"header counts out of order at record {i}")
        out.append(tuple(pairs[lo:hi]))
    return out


def batch_records(batch: RecordBatch, topic: str, partition: int,
                  start_offset: int = 0) -> list[ConsumerRecord]:
    """The batch's records with offset >= ``start_offset``, in offset order."""
    header = batch.header
    n, base = header.record_count, header.base_offset
    skip = start_offset - base if start_offset > base else 0
    if skip >= n:
        return []
    first = header.first_timestamp
    timestamps = [first + d for d in _i32(batch.ts_deltas)]
    keys = column_values(batch.keys, n)
    values = column_values(batch.values, n)
    headers = _headers(batch, n) if batch.header_counts is not None else repeat((), n)
    records = list(map(_make, zip(repeat(topic, n), repeat(partition, n), range(base, base + n),
                                  timestamps, keys, values, headers)))
    return records[skip:] if skip else records
