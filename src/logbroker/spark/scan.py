"""Reading one planned split: segment files -> CRC-checked batches -> Arrow.

Runs in a Spark task (or any process): files are opened here, read with
``pread`` in windows, and closed before returning. Only records in the
split's [start, end) are returned; ``end`` is at or below the high watermark
fixed at planning time, so torn or uncommitted tail bytes are never reached.
"""

from __future__ import annotations

import os
from operator import attrgetter
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.arrow import (HEADERS_TYPE, Piece, pieces_binary, pieces_headers, pieces_offsets,
                             pieces_timestamp_types, pieces_timestamps, repeated)
from ..records.decoder import RecordBatch, decode_batch
from ..records.txn_filter import BatchFilter
from ..records.walker import scan_file
from ..storage.segment import parse_segment_name
from .options import Split, data_loss

WINDOW = 2 << 20  # preads of 2 MiB: faster than 8 MiB here (the CRC reads it while cached)

SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
HEADERS_SCHEMA = SCHEMA.append(pa.field("headers", HEADERS_TYPE))


def arrow_schema(include_headers: bool) -> pa.Schema:
    return HEADERS_SCHEMA if include_headers else SCHEMA


# One builder per column, over the pieces of one Arrow batch: a Split asking
# for fewer columns (a user-given schema) costs neither the building nor the
# shipping of the others.
_COLUMNS: dict[str, Callable[[Split, Sequence[Piece], int], pa.Array]] = {
    "key": lambda s, ps, n: pieces_binary(ps, _KEYS),
    "value": lambda s, ps, n: pieces_binary(ps, _VALUES),
    "topic": lambda s, ps, n: repeated(s.topic, pa.string(), n),
    "partition": lambda s, ps, n: repeated(s.partition, pa.int32(), n),
    "offset": lambda s, ps, n: pieces_offsets(ps),
    "timestamp": lambda s, ps, n: pieces_timestamps(ps),
    "timestampType": lambda s, ps, n: pieces_timestamp_types(ps),
    "headers": lambda s, ps, n: pieces_headers(ps),
}
_KEYS = attrgetter("keys")
_VALUES = attrgetter("values")
_schemas: dict[tuple, pa.Schema] = {}


def split_schema(split: Split) -> pa.Schema:
    """The Arrow schema of what ``read_split`` yields for ``split``."""
    cols = split.columns
    if not cols:
        return arrow_schema(split.include_headers)
    if cols not in _schemas:
        _schemas[cols] = pa.schema([HEADERS_SCHEMA.field(c) for c in cols])
    return _schemas[cols]


def _lost(split: Split, lo: int, hi: int, why: str) -> None:
    data_loss(split.fail_on_data_loss,
              f"{split.topic}-{split.partition} offsets [{lo}, {hi}) {why}")


def _batches_in(fd: int, size: int, pos: int,
                path: str) -> Iterator[tuple[int, fmt.BatchHeader, memoryview]]:
    """``(position, header, bytes)`` of whole batches from ``pos`` (the one walker)."""
    try:
        yield from scan_file(lambda at, n: os.pread(fd, n, at), pos, size, window=WINDOW)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{path} byte {exc.position}: {exc.message}") from None


def split_batches(split: Split) -> Iterator[tuple[fmt.BatchHeader, RecordBatch]]:
    """The CRC-checked batches of a split: from the segment files, or (a
    ``bootstrap`` split) fetched from the partition's leader (remote.py)."""
    if split.bootstrap:
        from .remote_read import fetch_batches  # only then is the client imported

        return fetch_batches(split)
    return iter_batches(split)


def iter_batches(split: Split, directory: "str | None" = None,
                 want: "Callable[[fmt.BatchHeader], bool] | None" = None
                 ) -> Iterator[tuple[fmt.BatchHeader, RecordBatch]]:
    """Decoded (CRC-checked) batches overlapping [split.start, split.end).
    Offsets with no batch are data loss, unless the topic is compacted:
    there they are gaps, skipped, unless a segment file vanished there
    (retention after planning)."""
    directory = directory or os.path.join(split.data_dir, f"{split.topic}-{split.partition}")
    segs = list_segments(directory)
    # the last segment whose base <= start holds start (unless it was deleted)
    first = max((i for i, (b, _) in enumerate(segs) if b <= split.start), default=None)
    if first is None:
        if not segs or segs[0][0] >= split.end:
            _lost(split, split.start, split.end, "are gone (deleted by retention?)")
            return
        _lost(split, split.start, segs[0][0], "are gone (deleted by retention?)")
        first = 0
    expect = split.start if first is not None and segs[first][0] <= split.start else segs[first][0]
    vanished = False  # a segment file listed was gone: offsets before the next batch are lost
    hide = BatchFilter(split.aborted if split.read_committed else None)  # markers always
    for i in range(first, len(segs)):
        base, path = segs[i]
        if base >= split.end:
            break
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:  # deleted after listing: retention
            vanished = True
            continue
        try:
            size = os.fstat(fd).st_size
            pos = split.hint_position if base == split.hint_segment and i == first else 0
            if pos:  # the hint must name a batch header at or before start
                try:
                    h = fmt.read_header(os.pread(fd, fmt.HEADER_SIZE, pos), 0)
                    pos = pos if h.base_offset <= split.start else 0
                except CorruptRecordError:
                    pos = 0
            for bpos, header, data in _batches_in(fd, size, pos, path):
                if header.next_offset <= expect:
                    continue
                if header.base_offset >= split.end:  # past the range: [expect, end) must be there
                    if expect < split.end and (vanished or not split.compacted):
                        _lost(split, expect, split.end, "are missing from the segment files")
                    return
                if header.base_offset > expect and (vanished or not split.compacted):
                    _lost(split, expect, header.base_offset, "are missing from the segment files")
                vanished = False
                if hide.skip_header(header) or (want is not None and not want(header)):
                    expect = header.next_offset
                    continue
                try:
                    batch = decode_batch(data, verify=True, header=header)
                except CorruptRecordError as exc:
                    raise CorruptRecordError(f"{path} byte {bpos} (offset {header.base_offset}): "
                                             f"{exc.message}") from None
                yield header, batch
                expect = header.next_offset
        finally:
            os.close(fd)
    if expect < split.end and (vanished or not split.compacted):
        _lost(split, expect, split.end, "are missing from the segment files")


# A batch with at least half of either cap (``max_rows`` records, ``max_bytes``
# bytes) in range is big enough to be an Arrow batch of its own, sharing the
# read buffer's bytes; smaller ones are grouped and copied once into batches
# of about the caps. Measured (docs/benchmarks.md, issue 13): yielding
# 1,000-record batches alone cost Spark as much CPU as grouping them ten at
# a time with the copy, or up to ~10% more (docs/spark.md, batch sizing).
ALONE_SHARE = 2


def _build(split: Split, schema: pa.Schema, pieces: Sequence[Piece], rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([_COLUMNS[name](split, pieces, rows) for name in schema.names],
                                      schema=schema)


def _parts(split: Split, schema: pa.Schema, piece: Piece, size: int) -> Iterator[pa.RecordBatch]:
    """One big piece as Arrow batches sharing its bytes: whole, or cut into
    zero-copy slices of at most ``max_rows`` rows and about ``max_bytes``."""
    rows = piece.hi - piece.lo
    rb = _build(split, schema, (piece,), rows)
    if rows <= split.max_rows and size <= split.max_bytes:
        yield rb
        return
    step = min(split.max_rows, max(1, split.max_bytes // max(1, size // rows)))
    for at in range(0, rows, step):
        yield rb.slice(at, step)


def read_split(split: Split) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of the split's records, in offset order, each at
    most ``max_rows`` rows and (unless one record alone is bigger) about
    ``max_bytes`` bytes, counted as the records' share of their batch's
    encoded bytes. Every batch is CRC-checked before any of its records is
    returned. A batch with at least half of either cap in range is yielded
    alone (sliced to the split's range, cut at the caps), its columns sharing
    the bytes read; runs of smaller ones are built into one Arrow batch at
    its final size (one copy). Nothing is yielded for an empty range."""
    schema = split_schema(split)
    alone_rows = max(1, split.max_rows // ALONE_SHARE)
    alone_bytes = max(1, split.max_bytes // ALONE_SHARE)
    group: list[Piece] = []
    rows = nbytes = 0
    for _, batch in split_batches(split):
        base, count = batch.header.base_offset, len(batch)
        lo, hi = max(0, split.start - base), min(count, split.end - base)
        if hi <= lo:
            continue
        n = hi - lo
        size = batch.header.size if n == count else batch.header.size * n // count
        if n >= alone_rows or size >= alone_bytes:
            if group:
                yield _build(split, schema, group, rows)
                group, rows, nbytes = [], 0, 0
            yield from _parts(split, schema, Piece(batch, lo, hi), size)
            continue
        if group and (rows + n > split.max_rows or nbytes + size > split.max_bytes):
            yield _build(split, schema, group, rows)
            group, rows, nbytes = [], 0, 0
        group.append(Piece(batch, lo, hi))
        rows += n
        nbytes += size
    if group:
        yield _build(split, schema, group, rows)


def list_segments(directory: str) -> list[tuple[int, str]]:
    """``(base offset, path)`` of the live ``.log`` segments, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    segs = [(parse_segment_name(n), os.path.join(directory, n)) for n in names]
    return sorted((b, p) for b, p in segs if b is not None)
