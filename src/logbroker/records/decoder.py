"""Decode one record batch: the columnar records section (pure bytes).

Records section layout (after the 61-byte header, n = record_count), every
integer little-endian as in Arrow, offsets int32 starting at 0:

    ts_deltas       n x i32             record timestamp - first_timestamp
    key column      per key mode        (attributes bits 6-7)
    value column    per value mode      (attributes bits 8-9)
    if HAS_HEADERS:
      header_counts (n+1) x i32         cumulative header count; h = last
      header keys   (h+1) x i32 offsets + UTF-8 bytes (never null)
      header values ceil(h/8) bitmap + (h+1) x i32 offsets + bytes

A column in mode COL_ABSENT has no bytes (all null); COL_DENSE is offsets then
data; COL_NULLABLE is an Arrow validity bitmap (bit i LSB-first = not null),
offsets, data. The section must end exactly at the batch end.
"""
from __future__ import annotations

from ..errors import CorruptRecordError
from . import format as fmt
from .columns import Column, Record, RecordBatch, decode_ours  # noqa: F401 (the readers' names)
from .kafka_v2 import decode_kafka


def decode_batch(buf, pos: int = 0, *, verify: bool = True,
                 header: "fmt.BatchHeader | None" = None) -> RecordBatch:
    """Decode the batch at ``buf[pos:]``, which must hold exactly one batch.

    Checks header, CRC (``verify=True``) and the section layout; raises
    ``CorruptRecordError`` and nothing else on any malformed input, including
    trailing bytes after the batch. ``header``, when given, must be what
    ``fmt.read_header(buf, pos)`` returned (a walker's): it is not read again.

    The one dispatch on the magic byte: a Kafka batch (magic 2) is decoded
    by ``kafka_v2.decode_kafka`` into the same columnar ``RecordBatch`` (its
    header says magic 2), so no reader has to know there are two encodings.
    """
    mv = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
    if header is None:
        header = fmt.read_header(mv, pos)
    end = pos + header.size
    if end != len(mv):
        raise CorruptRecordError(f"batch announces {header.size} bytes, buffer holds {len(mv) - pos}")
    if header.magic != fmt.MAGIC:  # a Kafka batch (magic 2): its records become columns
        return decode_kafka(mv[pos:end], header, verify=verify)
    if verify:
        fmt.check_crc(mv, pos, header)
    return decode_ours(mv, pos, end, header, verify=False)


def readable(data) -> "RecordBatch | None":
    """The whole batch ``data`` (CRC checked by the caller) decoded, or None
    when it is a Kafka batch whose records do not decode (stored unwalked,
    ``kafka_v2.check_batch``): for the broker's own readers
    (offset-for-timestamp, compaction, the console), which then go by its
    header and keep it as it is rather than fail the partition. A bad
    magic-1 batch still raises."""
    try:
        return decode_batch(data, verify=False)
    except CorruptRecordError:
        if fmt.read_header(data, 0).magic != fmt.KAFKA_MAGIC:
            raise
        return None
