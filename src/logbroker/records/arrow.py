"""Record batches as Arrow arrays, without a per-record Python loop.

Needs pyarrow (the ``spark`` or ``dev`` extra). Column buffers are wrapped,
not copied: ``pa.BinaryArray.from_buffers`` over the batch's own bytes.
Types are the ones Spark's Kafka source uses: binary (not large_binary),
int64 offsets, timestamp[us, UTC], and for headers
list<struct<key: string, value: binary>>.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import CorruptRecordError
from .decoder import Column, RecordBatch

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_arange = pa.array(range(1024), pa.int64())


_THOUSAND = pa.scalar(1000, pa.int64())


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
    return pc.add(_range(len(batch)), _i64(batch.header.base_offset))


def timestamps_array(batch: RecordBatch) -> pa.Array:
    """Record timestamps as timestamp[us, UTC]."""
    deltas = pa.Array.from_buffers(pa.int32(), len(batch), [None, _buf(batch.ts_deltas)])
    try:  # checked: an overflow must not wrap into a wrong timestamp
        ms = pc.add_checked(deltas.cast(pa.int64()), _i64(batch.header.first_timestamp))
        us = pc.multiply_checked(ms, _THOUSAND)
    except pa.ArrowInvalid as exc:
        raise CorruptRecordError(f"timestamp out of range for timestamp[us]: {exc}") from None
    return us.cast(pa.timestamp("us", tz="UTC"))


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
