"""Reading one planned split: segment files -> CRC-checked batches -> Arrow.

Runs in a Spark task (or any process): files are opened here, read with
``pread`` in windows, and closed before returning. Only records in the
split's [start, end) are returned; ``end`` is at or below the high watermark
fixed at planning time, so torn or uncommitted tail bytes are never reached.
"""

from __future__ import annotations

import logging
import os
from typing import Callable, Iterator

import pyarrow as pa

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.arrow import (HEADERS_TYPE, binary_array, headers_array, offsets_array,
                             timestamps_array)
from ..records.decoder import RecordBatch, decode_batch
from ..records.walker import scan_file
from .plan import SparkSourceError, Split, list_segments

log = logging.getLogger(__name__)
WINDOW = 8 << 20

SCHEMA = pa.schema([
    ("key", pa.binary()), ("value", pa.binary()), ("topic", pa.string()),
    ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")), ("timestampType", pa.int32()),
])
HEADERS_SCHEMA = SCHEMA.append(pa.field("headers", HEADERS_TYPE))


def arrow_schema(include_headers: bool) -> pa.Schema:
    return HEADERS_SCHEMA if include_headers else SCHEMA


# One builder per column: a Split asking for fewer columns (a user-given
# schema) costs neither the building nor the shipping of the others.
_COLUMNS: dict[str, Callable[[Split, RecordBatch], pa.Array]] = {
    "key": lambda s, b: binary_array(b.keys),
    "value": lambda s, b: binary_array(b.values),
    "topic": lambda s, b: pa.repeat(pa.scalar(s.topic, pa.string()), len(b)),
    "partition": lambda s, b: pa.repeat(pa.scalar(s.partition, pa.int32()), len(b)),
    "offset": lambda s, b: offsets_array(b),
    "timestamp": lambda s, b: timestamps_array(b),
    "timestampType": lambda s, b: pa.repeat(pa.scalar(b.header.timestamp_type, pa.int32()), len(b)),
    "headers": lambda s, b: headers_array(b),
}
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
    msg = f"{split.topic}-{split.partition} offsets [{lo}, {hi}) {why}"
    if split.fail_on_data_loss:
        raise SparkSourceError(f"{msg}; set failOnDataLoss=false to skip them")
    log.warning("%s; skipping them (failOnDataLoss=false)", msg)


def _batches_in(fd: int, size: int, pos: int,
                path: str) -> Iterator[tuple[int, fmt.BatchHeader, memoryview]]:
    """``(position, header, bytes)`` of whole batches from ``pos`` (the one walker)."""
    try:
        yield from scan_file(lambda at, n: os.pread(fd, n, at), pos, size, window=WINDOW)
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"{path} byte {exc.position}: {exc.message}") from None


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
                if header.base_offset >= split.end:
                    return
                if header.base_offset > expect and (vanished or not split.compacted):
                    _lost(split, expect, header.base_offset, "are missing from the segment files")
                vanished = False
                if want is not None and not want(header):
                    expect = header.next_offset
                    continue
                try:
                    batch = decode_batch(data, verify=True)
                except CorruptRecordError as exc:
                    raise CorruptRecordError(f"{path} byte {bpos} (offset {header.base_offset}): "
                                             f"{exc.message}") from None
                yield header, batch
                expect = header.next_offset
        finally:
            os.close(fd)
    if expect < split.end and (vanished or not split.compacted):
        _lost(split, expect, split.end, "are missing from the segment files")


def _arrow(split: Split, batch: RecordBatch) -> pa.RecordBatch:
    schema = split_schema(split)
    rb = pa.RecordBatch.from_arrays([_COLUMNS[name](split, batch) for name in schema.names],
                                    schema=schema)
    lo = max(0, split.start - batch.header.base_offset)
    hi = min(len(batch), split.end - batch.header.base_offset)
    return rb.slice(lo, hi - lo) if lo or hi < len(batch) else rb


def read_split(split: Split) -> Iterator[pa.RecordBatch]:
    """Arrow record batches of the split, each at most ``max_rows`` rows and
    (unless one record alone is bigger) about ``max_bytes`` bytes."""
    pending: list[pa.RecordBatch] = []
    rows = nbytes = 0

    def flush() -> "pa.RecordBatch":
        nonlocal pending, rows, nbytes
        out = pa.Table.from_batches(pending).combine_chunks().to_batches()[0] \
            if len(pending) > 1 else pending[0]
        pending, rows, nbytes = [], 0, 0
        return out

    for _, batch in iter_batches(split):
        rb = _arrow(split, batch)
        while rb.num_rows:
            room = split.max_rows - rows
            size = rb.nbytes
            if size and nbytes + size > split.max_bytes:  # cap bytes by rows, proportionally
                per_row = max(1, size // rb.num_rows)
                room = min(room, max(0 if pending else 1, (split.max_bytes - nbytes) // per_row))
            if room <= 0:
                yield flush()
                continue
            take = rb.slice(0, room)
            pending.append(take)
            rows += take.num_rows
            nbytes += take.nbytes
            rb = rb.slice(room)
            if rows >= split.max_rows or nbytes >= split.max_bytes:
                yield flush()
    if pending:
        yield flush()
