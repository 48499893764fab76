"""Consumer records: fetched batch bytes -> ``ConsumerRecord`` tuples, in bulk.

``decode_batch`` (records/decoder.py) checks the header, the CRC and the
section layout and returns zero-copy column views; ``batch_records`` turns
the columns into Python lists with a constant number of C-level passes
(``array.frombytes``, slicing one ``bytes`` copy of each column) and builds
the records with ``map`` over ``zip`` — no Python code runs per record
unless a column has nulls or the batch has headers. ``RecordBatch.records()``
gives the same records one by one; the tests check they agree.

``batches_into`` is the consumer's path (``records_into`` its one-batch
form): the same records and the same checks for a partition's batches
of a fetch answer whose header fields were already read and checked
(``format.read_fields``), one call for all of them, without the objects
``decode_batch`` builds. A
batch without headers whose keys and values are each dense (no nulls) or
absent (every entry null: keyless records, the common case) is decoded in a
handful of C calls; a column whose entries all have one length
is split by one cached ``struct`` unpack. Any other batch, and any batch
whose layout does not check out, goes through ``decode_batch`` (which
raises the precise error).
"""

from __future__ import annotations

import struct
import sys
from array import array
from functools import partial
from itertools import repeat
from operator import add, getitem
from typing import NamedTuple

from crc32c import crc32c

from ...errors import CorruptRecordError
from ...records import format as fmt
from ...records.decoder import Column, RecordBatch, decode_batch
from ...records.txn_filter import TXN_BITS as _ANY_TXN

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


# -- the consumer's path --------------------------------------------------------------------------
# A batch of a 10,000-partition fetch holds ~5 records, so a batch's fixed
# cost is most of its cost: header fields by index (format.read_fields) and
# the format's sizes are module constants here.
_I32 = struct.Struct("<i")
_KEY_MODE = 3 << fmt.KEY_MODE_SHIFT
_VALUE_MODE = 3 << fmt.VALUE_MODE_SHIFT
_NO_FAST = fmt.HAS_HEADERS
_BASE, _LENGTH, _CRC, _ATTRS = fmt.F_BASE_OFFSET, fmt.F_BATCH_LENGTH, fmt.F_CRC, fmt.F_ATTRIBUTES
_FIRST_TS, _COUNT, _LAST_DELTA = fmt.F_FIRST_TIMESTAMP, fmt.F_RECORD_COUNT, fmt.F_LAST_OFFSET_DELTA
_OVERHEAD, _HEADER, _CRC_START = fmt.LOG_OVERHEAD, fmt.HEADER_SIZE, fmt.CRC_START
# (key mode, value mode) bits of the batches the fast path splits: each column absent or dense
_FAST = {k << fmt.KEY_MODE_SHIFT | v << fmt.VALUE_MODE_SHIFT
         for k in (fmt.COL_ABSENT, fmt.COL_DENSE) for v in (fmt.COL_ABSENT, fmt.COL_DENSE)}
_CACHE_MAX = 512  # cached structs per kind (cleared when full)
_FIXED_MAX = 4096  # entries: longer batches are split by slicing (their fixed cost is small)
_deltas: dict = {}
_fixed: dict = {}
_NONES = repeat(None)  # an absent column's entries (zip stops at the offsets' range)
_EMPTY = repeat(())  # no record has headers


def _deltas_struct(n: int) -> struct.Struct:
    s = _deltas.get(n)
    if s is None:
        if len(_deltas) >= _CACHE_MAX:
            _deltas.clear()
        s = _deltas[n] = struct.Struct(f"<{n}i")
    return s


def _fixed_layout(n: int, size: int) -> tuple:
    """(the offsets bytes of ``n`` entries of ``size`` bytes, a struct splitting their data)."""
    key = (n, size)
    s = _fixed.get(key)
    if s is None:
        if len(_fixed) >= _CACHE_MAX:
            _fixed.clear()
        s = _fixed[key] = (struct.pack(f"<{n + 1}i", *(i * size for i in range(n + 1))),
                           struct.Struct(f"{size}s" * n))
    return s


def _column(data: bytes, pos: int, n: int, end: int):
    """(entries of the dense column at ``data[pos:]``, where it ends), or
    None when its offsets do not check out."""
    start = pos + 4 * n + 4
    if start > end:
        return None
    first, last = _I32.unpack_from(data, pos + 4)[0], _I32.unpack_from(data, start - 4)[0]
    if n <= _FIXED_MAX and last == n * first and 0 <= first and start + last <= end:
        offsets, split = _fixed_layout(n, first)
        if data.startswith(offsets, pos):  # every entry ``first`` bytes: one unpack splits them
            return split.unpack_from(data, start), start + last
    offs = array("i")
    offs.frombytes(data[pos:start])
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        offs.byteswap()
    size = offs[n]
    if offs[0] != 0 or size < 0 or start + size > end:
        return None
    return map(getitem, repeat(data[start:start + size]), map(slice, offs[:-1], offs[1:])), \
        start + size


def records_into(out: list, data: bytes, pos: int, fields: tuple, topic: str, partition: int,
                 start_offset: int = 0, verify: bool = True) -> None:
    """Append to ``out`` the records with offset >= ``start_offset`` of the
    batch at ``data[pos:]`` (``bytes``) whose header ``fields``
    (``format.read_fields``) were checked; checks the CRC (``verify``) and
    the section layout like ``decode_batch`` and raises
    ``CorruptRecordError`` as it does (nothing is appended then). One
    batch of ``batches_into``."""
    _, _, error = batches_into(out, data, [(pos, fields)], 0, 1 << 62, topic, partition,
                               start_offset, verify, _keep_all)
    if error is not None:
        raise error


def _keep_all(fields: tuple) -> bool:
    """records_into's filter: no batch skipped."""
    return False


def batches_into(out: list, data: bytes, batches: list, i: int, want: int, topic: str,
                 partition: int, start_offset: int, verify: bool, skip) -> tuple:
    """Append to ``out`` the records with offset >= ``start_offset`` of
    ``batches[i:]`` (``(position, header fields)`` of whole batches of
    ``data``, a ``bytes``, in offset order, their headers checked:
    ``walker.scan_fields``) until ``out`` holds ``want`` records or they
    end. ``skip(fields)`` says which batches are not for the application
    (records/txn_filter.py), asked only of batches with a transaction bit;
    a batch to skip that follows records ends the call, so a position moves
    past it only once they are taken. Returns (the index of the next batch
    to decode, the offset after the batches skipped before any record or
    None, None) or, at a damaged batch (its CRC, when ``verify``, or its
    section layout), (its index, that offset, the ``CorruptRecordError``
    ``decode_batch`` raises for it), with the records before it appended.

    One loop over a fetch answer's batches of one partition: at ~10
    records a batch (1,000 partitions and more) the fixed cost of a batch
    is most of its cost, so the common layout is decoded inline: keys and
    values each dense (or absent), no headers, values of one length split
    by one cached ``struct`` unpack."""
    n, passed, size = len(batches), None, len(data)
    topics, partitions = repeat(topic), repeat(partition)
    view = memoryview(data)
    fixed, deltas_of = _fixed, _deltas
    while i < n and len(out) < want:
        pos, fields = batches[i]
        base, count, attrs = fields[_BASE], fields[_COUNT], fields[_ATTRS]
        next_offset = base + fields[_LAST_DELTA] + 1
        if attrs & _ANY_TXN and skip(fields):
            if out:
                break
            i += 1
            if next_offset > start_offset:
                passed = next_offset
            continue
        if next_offset <= start_offset:  # records before the position (a seek inside a batch)
            i += 1
            continue
        end = pos + fields[_LENGTH] + _OVERHEAD
        if end > size:
            return i, passed, CorruptRecordError(
                f"batch announces {end - pos} bytes, buffer holds {size - pos}")
        if verify and crc32c(view[pos + _CRC_START:end]) != fields[_CRC]:
            return i, passed, _damage(data, pos, fields)
        modes = attrs & (_KEY_MODE | _VALUE_MODE)
        at = pos + _HEADER + 4 * count
        if modes in _FAST and not attrs & _NO_FAST and start_offset <= base and at <= end:
            keys = values = _NONES
            if modes & _KEY_MODE:
                keys = _column(data, at, count, end)
                keys, at = keys or (None, -1)
            if at >= 0 and modes & _VALUE_MODE:
                # the dense column of one entry length, inline (_column's first case)
                entries = at + 4 * count + 4
                length = _I32.unpack_from(data, at + 4)[0] if entries <= end else -1
                layout = fixed.get((count, length)) if length >= 0 else None
                if layout is not None and entries + count * length <= end \
                        and data.startswith(layout[0], at):
                    values, at = layout[1].unpack_from(data, entries), entries + count * length
                else:
                    values = _column(data, at, count, end)
                    values, at = values or (None, -1)
            if at == end:
                deltas = deltas_of.get(count) or _deltas_struct(count)
                out += map(_make, zip(topics, partitions, range(base, base + count),
                                      map(add, repeat(fields[_FIRST_TS]),
                                          deltas.unpack_from(data, pos + _HEADER)),
                                      keys, values, _EMPTY))
                i += 1
                continue
        try:  # any other layout; decode_batch raises the precise error of a bad one
            out += batch_records(decode_batch(view[pos:end], verify=False), topic, partition,
                                 start_offset)
        except CorruptRecordError as exc:
            return i, passed, exc
        i += 1
    return i, passed, None


def _damage(data: bytes, pos: int, fields: tuple) -> CorruptRecordError:
    """The error of a batch whose CRC does not match (``format.check_crc``'s)."""
    try:
        fmt.check_crc(data, pos, fmt.BatchHeader(*fields))
    except CorruptRecordError as exc:
        return exc
    return CorruptRecordError("batch CRC mismatch")  # pragma: no cover - check_crc raises
