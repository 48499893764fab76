"""Record batches as Arrow arrays, without a per-record Python loop.

Needs pyarrow (the ``spark`` or ``dev`` extra). Column buffers are wrapped,
not copied: ``pa.BinaryArray.from_buffers`` over the batch's own bytes. The
``pieces_*`` builders make one column of several batches' record ranges
(``Piece``): one piece still shares its batch's bytes, several are copied
once, straight into buffers of the final size (never built, then combined).
Types are the ones Spark's Kafka source uses: binary (not large_binary),
int64 offsets, timestamp[us, UTC], and for headers
list<struct<key: string, value: binary>>.
"""

from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError
from .decoder import Column, RecordBatch

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_arange = pa.array(range(1024), pa.int64())


_THOUSAND = pa.scalar(1000, pa.int64())
_TIMESTAMP = pa.timestamp("us", tz="UTC")


def _i64(value: int) -> pa.Scalar:
    """An int64 scalar: plain ints in pyarrow.compute calls cost ~28 us each
    (type inference tries optional imports), typed scalars almost nothing."""
    return pa.scalar(value, pa.int64())


def _range(n: int) -> pa.Array:
    """int64 0..n-1, from a cached array grown by doubling (no per-call loop)."""
    global _arange
    while len(_arange) < n:
        _arange = pa.concat_arrays([_arange, pc.add(_arange, _i64(len(_arange)))])
    return _arange.slice(0, n)


def _buf(mv: "memoryview | None") -> "pa.Buffer | None":
    return None if mv is None else pa.py_buffer(mv)


def binary_array(col: Column, type_: pa.DataType = pa.binary()) -> pa.Array:
    """The column as an Arrow binary (or string) array sharing the batch's bytes."""
    if col.offsets is None:
        return pa.nulls(col.length, type_)
    arr = pa.Array.from_buffers(type_, col.length, [_buf(col.validity), _buf(col.offsets), _buf(col.data)])
    try:
        arr.validate(full=True)
    except pa.ArrowInvalid as exc:
        raise CorruptRecordError(f"malformed column: {exc}") from None
    return arr


def offsets_array(batch: RecordBatch) -> pa.Array:
    return offsets_from(batch.header.base_offset, len(batch))


def timestamps_array(batch: RecordBatch) -> pa.Array:
    """Record timestamps as timestamp[us, UTC]."""
    return pieces_timestamps((Piece(batch, 0, len(batch)),))


def headers_array(batch: RecordBatch) -> pa.Array:
    """Headers as list<struct<key string, value binary>>; empty lists when none."""
    n = len(batch)
    if batch.header_counts is None:
        return pa.ListArray.from_arrays(pa.repeat(pa.scalar(0, pa.int32()), n + 1), _empty_struct(),
                                        type=HEADERS_TYPE)
    keys = binary_array(batch.header_keys, pa.string())
    values = binary_array(batch.header_values)
    items = pa.StructArray.from_arrays([keys, values], fields=list(HEADERS_TYPE.value_type))
    counts = pa.Array.from_buffers(pa.int32(), n + 1, [None, _buf(batch.header_counts)])
    try:  # from_arrays does not check that the counts are monotonic
        arr = pa.ListArray.from_arrays(counts, items, type=HEADERS_TYPE)
        arr.validate(full=True)
        return arr
    except (pa.ArrowInvalid, ValueError) as exc:
        raise CorruptRecordError(f"malformed header counts: {exc}") from None


def _empty_struct() -> pa.Array:
    return pa.StructArray.from_arrays([pa.array([], pa.string()), pa.array([], pa.binary())],
                                      fields=list(HEADERS_TYPE.value_type))


def to_arrow(batch: RecordBatch, *, include_headers: bool = False) -> pa.RecordBatch:
    """One Arrow record batch: key, value, offset, timestamp, timestampType[, headers]."""
    n = len(batch)
    cols = {
        "key": binary_array(batch.keys),
        "value": binary_array(batch.values),
        "offset": offsets_array(batch),
        "timestamp": timestamps_array(batch),
        "timestampType": pa.repeat(pa.scalar(batch.header.timestamp_type, pa.int32()), n),
    }
    if include_headers:
        cols["headers"] = headers_array(batch)
    return pa.RecordBatch.from_pydict(cols)


# -- pieces: records [lo, hi) of decoded batches, as columns at their final size --

class Piece(NamedTuple):
    """Records ``[lo, hi)`` (indexes in the batch) of one decoded batch."""

    batch: RecordBatch
    lo: int
    hi: int

    @property
    def first_offset(self) -> int:
        return self.batch.header.base_offset + self.lo


def _joined(parts: list) -> pa.Array:
    """One part as it is (zero copy); several copied once into one array of
    the final size (``concat_arrays`` sizes its buffers before copying)."""
    return parts[0] if len(parts) == 1 else pa.concat_arrays(parts)


def _cut(arr: pa.Array, p: Piece) -> pa.Array:
    n = len(p.batch)
    return arr if p.lo == 0 and p.hi == n else arr.slice(p.lo, p.hi - p.lo)


def pieces_binary(pieces: Sequence[Piece], column: Callable[[RecordBatch], Column]) -> pa.Array:
    """Binary column ``column(batch)`` of the pieces: one piece shares the
    batch's bytes; several are copied once, into the final buffers."""
    return _joined([_cut(binary_array(column(p.batch)), p) for p in pieces])


def pieces_offsets(pieces: Sequence[Piece]) -> pa.Array:
    """Record offsets of the pieces: a slice of one cached run of offsets
    while they follow each other (a compacted topic's gaps fall between
    batches: then one run a piece, copied once)."""
    first = pieces[0].first_offset
    total = 0
    for p in pieces:
        if p.first_offset != first + total:
            return _joined([offsets_from(p.first_offset, p.hi - p.lo) for p in pieces])
        total += p.hi - p.lo
    return offsets_from(first, total)


_RUN = 1 << 16
_run: "tuple[int, pa.Array]" = (0, pa.array([], pa.int64()))


def offsets_from(first: int, n: int) -> pa.Array:
    """int64 ``first .. first + n - 1``: a slice of the last run built (runs
    of at least 65,536 offsets), so consecutive batches cost no arithmetic."""
    global _run
    base, run = _run
    if not (base <= first and first + n <= base + len(run)):
        base, run = first, pc.add(_range(max(n, _RUN)), _i64(first))
        _run = (base, run)
    return run.slice(first - base, n)


def pieces_timestamps(pieces: Sequence[Piece]) -> pa.Array:
    """Record timestamps of the pieces as timestamp[us, UTC] (checked: an
    overflow is a CorruptRecordError, never a wrapped timestamp). Several
    pieces cost four Arrow calls, not two per piece: the int32 deltas are
    joined once and each batch's first timestamp is spread over its records
    by run-end decoding."""
    try:
        deltas = _joined([pa.Array.from_buffers(pa.int32(), p.hi - p.lo, [None, _buf(p.batch.ts_deltas)], 0, p.lo)
                          for p in pieces])
        if len(pieces) == 1:
            firsts = _i64(pieces[0].batch.header.first_timestamp)
        else:
            ends, total = [], 0
            for p in pieces:
                total += p.hi - p.lo
                ends.append(total)
            firsts = pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(
                pa.array(ends, pa.int32()),
                pa.array([p.batch.header.first_timestamp for p in pieces], pa.int64())))
        # int32 deltas + int64 first: int64, no separate cast
        us = pc.multiply_checked(pc.add_checked(deltas, firsts), _THOUSAND)
    except pa.ArrowInvalid as exc:
        raise CorruptRecordError(f"timestamp out of range for timestamp[us]: {exc}") from None
    return us.view(_TIMESTAMP)  # same layout: no copy


def pieces_headers(pieces: Sequence[Piece]) -> pa.Array:
    return _joined([_cut(headers_array(p.batch), p) for p in pieces])


def pieces_timestamp_types(pieces: Sequence[Piece]) -> pa.Array:
    """int32 0 (create time) or 1 (log append time) per record."""
    kinds = {p.batch.header.timestamp_type for p in pieces}
    if len(kinds) == 1:
        return repeated(kinds.pop(), pa.int32(), sum(p.hi - p.lo for p in pieces))
    return _joined([repeated(p.batch.header.timestamp_type, pa.int32(), p.hi - p.lo) for p in pieces])


_repeats: "dict[tuple, pa.Array]" = {}
_REPEATS_KEPT = 16


def repeated(value, type_: pa.DataType, n: int) -> pa.Array:
    """``value`` n times: a slice of a cached array (no per-call build); the
    cache keeps the last ``_REPEATS_KEPT`` values, each grown by doubling."""
    key = (value, str(type_))
    arr = _repeats.get(key)
    if arr is None or len(arr) < n:
        if arr is None and len(_repeats) >= _REPEATS_KEPT:
            del _repeats[next(iter(_repeats))]
        arr = pa.repeat(pa.scalar(value, type_), max(n, 2 * len(arr) if arr is not None else 1024))
        _repeats[key] = arr
    return arr.slice(0, n)
