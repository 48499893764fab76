"""Kafka RecordBatch v2 (magic 2): read the header, walk the records of an
uncompressed batch, build one. Pure functions over bytes, for converting
between Kafka's record encoding and ours (docs/kafka.md).

The 61-byte header has exactly the layout of ours (docs/format.md §2), every
field at the same offset and width, big-endian, CRC32C over bytes 21 .. end
in both. The differences: ``magic`` is 2 (ours 1); Kafka's integers are
signed (``partition_leader_epoch`` -1 means none, a count may be 0 after
compaction); attributes bits are compression (0-2: none, gzip, snappy, lz4,
zstd), timestamp type (3), transactional (4), control (5) and delete horizon
(6), where ours puts its records encoding at bits 4-5 and column modes at
6-10. Records are not columns but a sequence of varint-framed records:

    length varint, attributes int8, timestamp_delta varlong,
    offset_delta varint, key_length varint (-1 null), key,
    value_length varint (-1 null), value, header_count varint,
    per header: key_length varint, key (UTF-8), value_length varint (-1 null), value

Compressed batches are out of scope for now: their header reads, their
records raise. Every malformed input raises ``CorruptRecordError`` (code 2,
Kafka's CORRUPT_MESSAGE) and nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from ..errors import CorruptRecordError
from .errors import KafkaDecodeError, KafkaEncodeError
from .primitives import read_varint, read_varlong, write_varint, write_varlong

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61, as ours
LOG_OVERHEAD = 12  # base_offset + batch_length
CRC_OFFSET, CRC_START = 17, 21
MAGIC = 2
COMPRESSION_MASK = 0x07  # 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd
COMPRESSION_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")
TIMESTAMP_TYPE = 0x08  # 0 create time, 1 log append time
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40  # base_timestamp is the delete horizon (KIP-534)
_MIN_RECORD = 7  # bytes of the smallest record: seven one-byte fields


@dataclass(frozen=True, slots=True)
class KafkaBatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)


@dataclass(frozen=True, slots=True)
class KafkaRecord:
    """One record of a batch; ``headers`` is a tuple of ``(str, bytes | None)``."""

    offset_delta: int
    timestamp_delta: int
    key: "bytes | None"
    value: "bytes | None"
    headers: tuple = ()
    attributes: int = 0  # unused by Kafka today; kept as read


def read_batch_header(buf, pos: int = 0) -> KafkaBatchHeader:
    """The header at ``buf[pos:]``, checked (magic, lengths, compression code);
    the CRC is not (``check_crc``). The batch itself may be incomplete."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes at position {pos}, "
                                 f"{max(0, len(buf) - pos)} available", position=pos)
    h = KafkaBatchHeader(*HEADER.unpack_from(buf, pos))
    problem = None
    if h.magic != MAGIC:
        problem = f"magic {h.magic} is not 2"
    elif h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        problem = f"batch length {h.batch_length} shorter than the header"
    elif h.compression > 4:
        problem = f"unknown compression code {h.compression}"
    elif h.record_count < 0 or h.last_offset_delta < 0 or h.base_offset < 0:
        problem = "negative record count, last offset delta or base offset"
    if problem:
        raise CorruptRecordError(f"{problem} at position {pos}", position=pos)
    return h


def check_crc(buf, pos: int = 0) -> KafkaBatchHeader:
    """The header of the whole batch at ``buf[pos:]`` once its CRC32C matches."""
    h = read_batch_header(buf, pos)
    if len(buf) - pos < h.size:
        raise CorruptRecordError(f"batch of {h.size} bytes at position {pos}: only "
                                 f"{len(buf) - pos} present", position=pos)
    actual = crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + h.size])
    if actual != h.crc:
        raise CorruptRecordError(f"CRC mismatch at position {pos}: stored {h.crc:#010x}, "
                                 f"computed {actual:#010x}", position=pos)
    return h


def iter_batches(buf):
    """``(position, header)`` of each whole batch in ``buf`` (as in a Produce
    request's or a Fetch response's records); stops silently at an
    incomplete tail, as a Kafka client does with a Fetch's last batch."""
    pos = 0
    while len(buf) - pos >= HEADER_SIZE:
        h = read_batch_header(buf, pos)
        if len(buf) - pos < h.size:
            return
        yield pos, h
        pos += h.size


def read_records(batch) -> tuple:
    """``(header, records)`` of one whole uncompressed batch (the CRC is
    checked; ``records`` is a tuple of ``KafkaRecord``)."""
    view = memoryview(batch).cast("B") if not isinstance(batch, memoryview) else batch
    h = check_crc(view, 0)
    if h.compression:
        raise CorruptRecordError(f"{COMPRESSION_NAMES[h.compression]} batches are not "
                                 "supported yet", position=0)
    pos, end, out = HEADER_SIZE, h.size, []
    if h.record_count * _MIN_RECORD > end - pos:
        raise CorruptRecordError(f"{h.record_count} records cannot fit in {end - pos} bytes",
                                 position=0)
    try:
        for i in range(h.record_count):
            record, pos = _read_record(view[:end], pos, i)
            out.append(record)
    except KafkaDecodeError as exc:
        raise CorruptRecordError(f"record {len(out)}: {exc.detail}", position=pos) from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes after the last record", position=pos)
    return h, tuple(out)


def _read_record(view, pos: int, index: int) -> tuple:
    length, pos = read_varint(view, pos)
    if length < 0 or length > len(view) - pos:
        raise KafkaDecodeError(f"record length {length} exceeds the batch")
    end = pos + length
    body = view[:end]
    attributes = body[pos] if pos < end else _short()
    ts_delta, p = read_varlong(body, pos + 1)
    offset_delta, p = read_varint(body, p)
    key, p = _read_blob(body, p, True)
    value, p = _read_blob(body, p, True)
    count, p = read_varint(body, p)
    if count < 0 or count > end - p:
        raise KafkaDecodeError(f"header count {count} invalid")
    headers = []
    for _ in range(count):
        hkey, p = _read_blob(body, p, False)
        try:
            hkey = str(hkey, "utf-8")
        except UnicodeDecodeError:
            raise KafkaDecodeError("header key is not valid UTF-8") from None
        hvalue, p = _read_blob(body, p, True)
        headers.append((hkey, hvalue))
    if p != end:
        raise KafkaDecodeError(f"record length {length} disagrees with its fields")
    return KafkaRecord(offset_delta, ts_delta, key, value, tuple(headers), attributes), end


def _short():
    raise KafkaDecodeError("record runs past its length")


def _read_blob(view, pos: int, nullable: bool) -> tuple:
    n, pos = read_varint(view, pos)
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise KafkaDecodeError(f"length {n} invalid")
    if n > len(view) - pos:
        raise KafkaDecodeError(f"length {n} exceeds the record")
    return bytes(view[pos:pos + n]), pos + n


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
