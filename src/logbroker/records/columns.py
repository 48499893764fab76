"""Our columnar batches decoded: ``RecordBatch`` (zero-copy column views
over the batch's own bytes), ``Record``, ``Column``, and ``decode_ours``,
the decoding of one batch in our format (magic 1). decoder.decode_batch is
the entry every reader uses: it dispatches on the magic byte."""

from __future__ import annotations

import struct
import sys
from array import array
from dataclasses import dataclass

from ..errors import CorruptRecordError
from . import format as fmt

_I32 = struct.Struct("<i")
_LITTLE = sys.byteorder == "little"


@dataclass(frozen=True, slots=True)
class Column:
    """A binary column: zero-copy memoryviews into the batch (``None`` = absent)."""

    length: int
    validity: "memoryview | None"
    offsets: "memoryview | None"
    data: "memoryview | None"

    def get(self, i: int) -> "bytes | None":
        if self.offsets is None or (self.validity is not None
                                    and not self.validity[i >> 3] >> (i & 7) & 1):
            return None
        start, end = _I32.unpack_from(self.offsets, i * 4)[0], _I32.unpack_from(self.offsets, i * 4 + 4)[0]
        if not 0 <= start <= end <= len(self.data):
            raise CorruptRecordError(f"column offsets out of order at entry {i}")
        return bytes(self.data[start:end])

    def null_flags(self) -> list[bool]:
        """``[entry i is null]`` for every entry, reading only the bitmap."""
        if self.offsets is None:
            return [True] * self.length
        if self.validity is None:
            return [False] * self.length
        bits = self.validity
        return [not bits[i >> 3] >> (i & 7) & 1 for i in range(self.length)]

    def tolist(self) -> list:
        """Every entry (bytes or None) in order: one pass over the offsets,
        no per-entry struct call (compaction reads every key this way)."""
        if self.offsets is None:
            return [None] * self.length
        offs = array("i")
        offs.frombytes(self.offsets)
        if not _LITTLE:  # pragma: no cover
            offs.byteswap()
        data = bytes(self.data)
        if not 0 == offs[0] <= offs[-1] <= len(data):
            raise CorruptRecordError("column offsets out of range")
        out = [data[offs[i]:offs[i + 1]] for i in range(self.length)]
        if self.validity is not None:
            bits = self.validity
            out = [v if bits[i >> 3] >> (i & 7) & 1 else None for i, v in enumerate(out)]
        return out


@dataclass(frozen=True, slots=True)
class Record:
    """One record as a consumer sees it."""

    offset: int
    timestamp: int
    key: "bytes | None"
    value: "bytes | None"
    headers: tuple[tuple[str, "bytes | None"], ...] = ()


@dataclass(frozen=True, slots=True)
class RecordBatch:
    """A decoded batch: header plus zero-copy column views."""

    header: fmt.BatchHeader
    ts_deltas: memoryview
    keys: Column
    values: Column
    header_counts: "memoryview | None"
    header_keys: "Column | None"
    header_values: "Column | None"

    def __len__(self) -> int:
        return self.header.record_count

    def timestamps(self) -> list[int]:
        first = self.header.first_timestamp
        deltas = array("i")
        deltas.frombytes(self.ts_deltas)
        if not _LITTLE:  # pragma: no cover
            deltas.byteswap()
        return [first + d for d in deltas]

    def records(self) -> list[Record]:
        """Every record as a ``Record`` (per-record work: consumers only)."""
        base = self.header.base_offset
        out = []
        for i, ts in enumerate(self.timestamps()):
            out.append(Record(base + i, ts, self.keys.get(i), self.values.get(i), self.headers_of(i)))
        return out

    def headers_of(self, i: int) -> tuple:
        """Record ``i``'s headers as ``(str, bytes | None)`` pairs (``()`` when none)."""
        if self.header_counts is None:
            return ()
        lo = _I32.unpack_from(self.header_counts, i * 4)[0]
        hi = _I32.unpack_from(self.header_counts, i * 4 + 4)[0]
        if not 0 <= lo <= hi <= self.header_keys.length:
            raise CorruptRecordError(f"header counts out of order at record {i}")
        return tuple((_utf8(self.header_keys.get(j)), self.header_values.get(j)) for j in range(lo, hi))


def _utf8(raw: "bytes | None") -> str:
    try:
        return (raw or b"").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CorruptRecordError(f"header key is not UTF-8: {exc}") from None


class _Cursor:
    __slots__ = ("mv", "pos", "end")

    def __init__(self, mv: memoryview, pos: int, end: int) -> None:
        self.mv, self.pos, self.end = mv, pos, end

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.end - self.pos < size:
            raise CorruptRecordError(f"records section too short for {what}")
        out = self.mv[self.pos:self.pos + size]
        self.pos += size
        return out

    def column(self, n: int, mode: int, what: str) -> Column:
        if mode == fmt.COL_ABSENT:
            return Column(n, None, None, None)
        validity = self.take((n + 7) // 8, what) if mode == fmt.COL_NULLABLE else None
        offsets = self.take(4 * (n + 1), what)
        first, last = _I32.unpack_from(offsets, 0)[0], _I32.unpack_from(offsets, 4 * n)[0]
        if first != 0:
            raise CorruptRecordError(f"{what} offsets do not start at 0")
        return Column(n, validity, offsets, self.take(last, what))


def decode_ours(mv: memoryview, pos: int, end: int, header, verify: bool) -> RecordBatch:
    """The batch of our format at ``mv[pos:end]`` (``header`` read at ``pos``):
    CRC checked when ``verify``; CorruptRecordError for a malformed layout."""
    if verify:
        fmt.check_crc(mv, pos, header)
    n, attrs = header.record_count, header.attributes
    cur = _Cursor(mv, pos + fmt.HEADER_SIZE, end)
    ts_deltas = cur.take(4 * n, "timestamp deltas")
    keys = cur.column(n, (attrs >> fmt.KEY_MODE_SHIFT) & 3, "keys")
    values = cur.column(n, (attrs >> fmt.VALUE_MODE_SHIFT) & 3, "values")
    counts = hkeys = hvalues = None
    if attrs & fmt.HAS_HEADERS:
        counts = cur.take(4 * (n + 1), "header counts")
        h = _I32.unpack_from(counts, 4 * n)[0]
        if _I32.unpack_from(counts, 0)[0] != 0 or h < 0:
            raise CorruptRecordError("header counts malformed")
        hkeys = cur.column(h, fmt.COL_DENSE, "header keys")
        hvalues = cur.column(h, fmt.COL_NULLABLE, "header values")
    if cur.pos != end:
        raise CorruptRecordError(f"{end - cur.pos} unexpected bytes at the end of the records section")
    return RecordBatch(header, ts_deltas, keys, values, counts, hkeys, hvalues)
