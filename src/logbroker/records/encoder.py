"""The one record batch encoder: parallel lists of records in, the bytes of
docs/format.md out (pure bytes, no I/O).

The producer appends each record to plain Python lists (timestamps, keys,
values; headers sparse, by record index) and ``encode_batch`` turns them
into one batch with a constant number of C-level passes (``b"".join``,
``itertools.accumulate``, ``array``): keys and values become Arrow-style
binary columns (validity bitmap when some are null, int32 offsets, data),
so readers turn a batch into arrays without per-record work.

Everything the format cannot hold is refused with ``InvalidRecordError``
(one line naming the record and the limit), never ``struct.error``,
``OverflowError`` or ``TypeError``: an empty record set, timestamps more
than 2^31-1 ms from the first record's (they are stored as int32 deltas) or
outside int64, keys, values or header values that are not bytes, header
keys that are not ``str``, a column or batch over 2 GiB, producer fields
outside their widths.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import accumulate
from typing import Sequence

import crc32c

from ..errors import InvalidRecordError
from . import format as fmt

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_LITTLE = sys.byteorder == "little"

# What a batch adds to its records' bytes, at most (see size_bound):
BATCH_OVERHEAD = fmt.HEADER_SIZE + 16  # the header; leading offsets and bitmap rounding
RECORD_OVERHEAD = 13  # per record: timestamp delta, key and value offsets, bitmap bits
HEADER_OVERHEAD = 9  # per header: key and value offsets, bitmap bit

Header = tuple[str, "bytes | None"]


def encode_batch(timestamps: Sequence[int], keys: Sequence, values: Sequence,
                 headers: "dict[int, Sequence[Header]]", *, producer_id: int = -1,
                 producer_epoch: int = -1, base_sequence: int = -1,
                 log_append_time: bool = False, transactional: bool = False) -> bytes:
    """One record batch from parallel lists (record ``i`` is ``timestamps[i]``,
    ``keys[i]``, ``values[i]``, ``headers.get(i, ())``); keys and values are
    bytes-like or None, headers ``(str, bytes | None)`` pairs. Base offset and
    leader epoch are 0: the broker stamps them. Raises ``InvalidRecordError``
    for a record set the format cannot hold (see the module docstring)."""
    n = len(timestamps)
    if n == 0:
        raise InvalidRecordError("a batch needs at least one record")
    if not len(keys) == len(values) == n:
        raise InvalidRecordError(f"{n} timestamps, {len(keys)} keys and {len(values)} values: "
                                 "one of each per record")
    first, max_ts, deltas = _timestamp_deltas(timestamps)
    key_mode, key_parts = _column(keys, "key")
    value_mode, value_parts = _column(values, "value")
    attributes = (key_mode << fmt.KEY_MODE_SHIFT) | (value_mode << fmt.VALUE_MODE_SHIFT)
    if log_append_time:
        attributes |= fmt.LOG_APPEND_TIME
    if transactional:
        attributes |= fmt.TRANSACTIONAL
    parts = [deltas, *key_parts, *value_parts]
    header_parts = _header_parts(headers, n) if headers else None
    if header_parts:
        attributes |= fmt.HAS_HEADERS
        parts += header_parts
    body = b"".join(parts)
    batch_length = fmt.HEADER_SIZE - fmt.LOG_OVERHEAD + len(body)
    if batch_length > fmt.MAX_BATCH_LENGTH:
        raise InvalidRecordError(f"batch of {batch_length + fmt.LOG_OVERHEAD} bytes exceeds 2 GiB")
    fields = [0, batch_length, 0, fmt.MAGIC, 0, attributes, n - 1, first, max_ts,
              producer_id, producer_epoch, base_sequence, n]
    try:
        head = fmt.HEADER.pack(*fields)
    except struct.error:
        raise InvalidRecordError(
            f"producer fields out of range: producer_id {producer_id!r} (int64), producer_epoch "
            f"{producer_epoch!r} (int16), base_sequence {base_sequence!r} (int32)") from None
    fields[4] = crc32c.crc32c(body, crc32c.crc32c(head[fmt.CRC_START:]))
    return fmt.HEADER.pack(*fields) + body


def size_bound(records: int, data_bytes: int, headers: int) -> int:
    """Upper bound of the size of a batch of ``records`` records holding
    ``data_bytes`` of keys, values, header keys (UTF-8) and header values,
    and ``headers`` headers in all."""
    size = BATCH_OVERHEAD + RECORD_OVERHEAD * records + data_bytes
    return size + (4 * records + HEADER_OVERHEAD * headers + 12 if headers else 0)


def timestamp_fits(first: int, ts: int) -> bool:
    """Can ``ts`` share a batch whose first record has timestamp ``first``?"""
    return I32_MIN <= ts - first <= I32_MAX


def _timestamp_deltas(timestamps: Sequence[int]) -> tuple[int, int, bytes]:
    """(first, max timestamp, int32 LE deltas from the first), or ``InvalidRecordError``."""
    first = timestamps[0]
    try:
        deltas = array("i", [t - first for t in timestamps])
    except TypeError:
        bad = next((t for t in timestamps if not isinstance(t, int)), first)
        raise InvalidRecordError(f"record timestamp must be an int (ms), got {type(bad).__name__}") \
            from None
    except OverflowError:
        far = next(t for t in timestamps if not timestamp_fits(first, t))
        raise InvalidRecordError(
            f"record timestamp {far} is more than 2^31-1 ms from the batch's first timestamp "
            f"{first} (timestamps are stored as int32 deltas): put it in another batch") from None
    low, high = first + min(deltas), first + max(deltas)
    if low < _I64_MIN or high > _I64_MAX:
        raise InvalidRecordError(f"record timestamp {low if low < _I64_MIN else high} is outside int64")
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        deltas.byteswap()
    return first, high, deltas.tobytes()


def _i32_le(values) -> bytes:
    arr = array("i", values)
    if not _LITTLE:  # pragma: no cover - big-endian hosts only
        arr.byteswap()
    return arr.tobytes()


def _joined(items: list, what: str) -> bytes:
    """``b"".join(items)``, with a clear error for an item that is not bytes."""
    try:
        return b"".join(items)
    except TypeError:
        for i, item in enumerate(items):
            if not isinstance(item, (bytes, bytearray, memoryview)):
                raise InvalidRecordError(f"{what} #{i} must be bytes or None, "
                                         f"got {type(item).__name__}") from None
        raise


def _column(items: Sequence, what: str) -> tuple[int, list]:
    """(mode, parts) of one nullable binary column (Arrow layout)."""
    n = len(items)
    nulls = items.count(None)
    if nulls == n:
        return fmt.COL_ABSENT, []
    if nulls:
        head = [_bitmap(items)]
        items = [b"" if item is None else item for item in items]
    else:
        head = []
    data = _joined(items, what)
    if len(data) > I32_MAX:
        raise InvalidRecordError(f"{what} column of {len(data)} bytes exceeds 2 GiB")
    offsets = _i32_le(accumulate(map(len, items), initial=0))
    return (fmt.COL_NULLABLE if nulls else fmt.COL_DENSE), head + [offsets, data]


def _bitmap(items: Sequence) -> bytes:
    """Arrow validity bitmap: bit i (LSB first) set when item i is not None."""
    if None not in items:  # the common case (header values), at C speed
        full, rest = divmod(len(items), 8)
        return b"\xff" * full + (bytes([(1 << rest) - 1]) if rest else b"")
    out = bytearray((len(items) + 7) // 8)
    for i, item in enumerate(items):
        if item is not None:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def _header_parts(headers: dict, n: int) -> "list | None":
    """Header columns: cumulative counts, keys (dense), values (nullable);
    None when no record has a header."""
    per_record = [headers.get(i, ()) for i in range(n)]
    counts = list(accumulate(map(len, per_record), initial=0))
    if not counts[-1]:
        return None
    try:
        names, hvalues = zip(*[pair for pairs in per_record for pair in pairs])
        hkeys = [name.encode("utf-8") for name in names]
    except (TypeError, ValueError, AttributeError):  # not (str, value) pairs; not UTF-8 encodable
        raise _header_error(per_record) from None
    key_data = b"".join(hkeys)
    values = [b"" if v is None else v for v in hvalues]
    value_data = _joined(values, "header value")
    if max(len(key_data), len(value_data)) > I32_MAX:
        raise InvalidRecordError("header column exceeds 2 GiB")
    return [_i32_le(counts), _i32_le(accumulate(map(len, hkeys), initial=0)), key_data,
            _bitmap(hvalues), _i32_le(accumulate(map(len, values), initial=0)), value_data]


def _header_error(per_record: list) -> InvalidRecordError:
    """The error naming the first header that is not a (str, bytes | None) pair."""
    for i, pairs in enumerate(per_record):
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                return InvalidRecordError(f"header of record #{i} must be a (str, bytes | None) pair, "
                                          f"got {type(pair).__name__}")
            if not isinstance(pair[0], str):
                return InvalidRecordError(f"header key of record #{i} must be str, "
                                          f"got {type(pair[0]).__name__}")
            try:
                pair[0].encode("utf-8")
            except UnicodeEncodeError:
                return InvalidRecordError(f"header key of record #{i} is not valid Unicode ({pair[0]!r})")
    return InvalidRecordError("headers must be (str, bytes | None) pairs")
