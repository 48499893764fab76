"""Kafka RecordBatch v2 (magic 2): build one. Pure functions over bytes, for
converting our records to Kafka's encoding (docs/kafka.md). Reading one is
the broker's: ``records.format`` reads its header (both magics) and checks
its CRC, ``records.kafka_v2`` walks its records (``decode_kafka`` into
columns, ``kafka_records`` Kafka's own fields).

The 61-byte header has exactly the layout of ours (docs/format.md §2), every
field at the same offset and width, big-endian, CRC32C over bytes 21 .. end
in both. The differences: ``magic`` is 2 (ours 1); Kafka's integers are
signed (``partition_leader_epoch`` -1 means none); attributes bits are
compression (0-2: none, gzip, snappy, lz4, zstd), timestamp type (3),
transactional (4), control (5) and delete horizon (6), where ours puts its
records encoding at bits 4-5 and column modes at 6-10. Records are not
columns but a sequence of varint-framed records:

    length varint, attributes int8, timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 null), key,
    value_length varint (-1 null), value, header_count varint,
    per header: key_length varint, key (UTF-8), value_length varint (-1 null), value

What cannot be written raises ``KafkaEncodeError``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from ..records.compression import NAMES as COMPRESSION_NAMES
from .errors import KafkaEncodeError
from .primitives import write_varint, write_varlong

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61, as ours
LOG_OVERHEAD = 12  # base_offset + batch_length
CRC_OFFSET, CRC_START = 17, 21
MAGIC = 2
COMPRESSION_MASK = 0x07  # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
TIMESTAMP_TYPE = 0x08  # 0 create time, 1 log append time


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record of a batch; ``headers`` is a tuple of ``(str, bytes | None)``."""

    offset_delta: int
    timestamp_delta: int
    key: "bytes | None"
    value: "bytes | None"
    headers: tuple = ()
    attributes: int = 0  # unused by Kafka today; kept as read


def build_batch(records, *, base_offset: int = 0, base_timestamp: int = 0,
                max_timestamp: "int | None" = None, partition_leader_epoch: int = -1,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                attributes: int = 0, compression: int = 0) -> bytes:
    """One batch of ``records`` (``KafkaRecord``s, at least one), CRC filled
    in. ``attributes`` sets the timestamp type, transactional and control
    bits (its compression bits must be 0); ``compression`` (0 none, 1 gzip,
    2 snappy in xerial framing as Kafka's Java client writes it, 3 lz4
    frame, 4 zstd) compresses the records section. ``last_offset_delta`` is
    the last record's offset delta; ``max_timestamp`` defaults to the
    largest record timestamp."""
    records = list(records)
    if not records:
        raise KafkaEncodeError("a batch needs at least one record")
    if attributes & COMPRESSION_MASK or not 0 <= attributes <= 0x7FFF:
        raise KafkaEncodeError(f"attributes {attributes:#x}: compression is not supported")
    if not 0 <= compression < len(COMPRESSION_NAMES):
        raise KafkaEncodeError(f"unknown compression code {compression}")
    body = bytearray()
    for r in records:
        _write_record(r, body)
    if compression:
        body = compress(compression, bytes(body))
        attributes |= compression
    if max_timestamp is None:
        max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    try:
        head = HEADER.pack(base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body),
                           partition_leader_epoch, MAGIC, 0, attributes,
                           records[-1].offset_delta, base_timestamp, max_timestamp, producer_id,
                           producer_epoch, base_sequence, len(records))
    except struct.error as exc:
        raise KafkaEncodeError(f"batch header: {exc}") from None
    batch = bytearray(head) + body
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(memoryview(batch)[CRC_START:]))
    return bytes(batch)


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as Kafka clients do for ``codec`` (1..4)."""
    import gzip

    import cramjam
    if codec == 1:
        return gzip.compress(data)
    if codec == 2:  # xerial framing: magic, version 1, compatible 1, [length, raw block]...
        block = bytes(cramjam.snappy.compress_raw(data))
        return b"\x82SNAPPY\x00" + struct.pack(">iiI", 1, 1, len(block)) + block
    return bytes((cramjam.lz4 if codec == 3 else cramjam.zstd).compress(data))


def _write_record(r: KafkaRecord, out: bytearray) -> None:
    body = bytearray([r.attributes & 0xFF])
    write_varlong(r.timestamp_delta, body)
    write_varint(r.offset_delta, body)
    _write_blob(r.key, body)
    _write_blob(r.value, body)
    write_varint(len(r.headers), body)
    for hkey, hvalue in r.headers:
        if hkey.__class__ is not str:
            raise KafkaEncodeError("a header key must be a string")
        _write_blob(hkey.encode("utf-8"), body)
        _write_blob(hvalue, body)
    write_varint(len(body), out)
    out += body


def _write_blob(value, out: bytearray) -> None:
    if value is None:
        write_varint(-1, out)
        return
    write_varint(len(value), out)
    out += value
