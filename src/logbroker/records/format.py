"""Record batch header: layout, constants, parsing and validation (pure bytes).

docs/format.md is the byte-by-byte specification; this module is its code.

    offset  size  field                       covered by CRC
    0       8     base_offset      u64 BE     no  (stamped by the broker)
    8       4     batch_length     u32 BE     no  (bytes after this field)
    12      4     leader_epoch     u32 BE     no  (stamped by the broker)
    16      1     magic            u8         no
    17      4     crc              u32 BE     no  (CRC32C of bytes 21..end)
    21      2     attributes       u16 BE     yes
    23      4     last_offset_delta u32 BE    yes
    27      8     first_timestamp  i64 BE     yes
    35      8     max_timestamp    i64 BE     yes
    43      8     producer_id      i64 BE     yes
    51      2     producer_epoch   i16 BE     yes
    53      4     base_sequence    i32 BE     yes
    57      4     record_count     u32 BE     yes
    61      ...   records section (columnar, see decoder.py)   yes
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import crc32c

from ..errors import CorruptRecordError

HEADER = struct.Struct(">QIIBIHIqqqhiI")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: batch size = batch_length + 12
STAMP = struct.Struct(">QII")  # base_offset, batch_length, leader_epoch
STAMP_SIZE = STAMP.size  # 16
CRC_OFFSET = 17
CRC_START = 21
MAGIC = 1
MAX_BATCH_LENGTH = (1 << 31) - 1
MAX_OFFSET = (1 << 63) - 1
KAFKA_MAGIC = 2  # a Kafka RecordBatch v2, stored as sent (records/kafka_v2.py)

# attributes (u16)
COMPRESSION_MASK = 0x0007  # 0 = none (others reserved: gzip, snappy, lz4, zstd)
LOG_APPEND_TIME = 0x0008  # timestamp type: 0 create time, 1 log append time
ENCODING_MASK = 0x0030  # 0 = columnar v1 (others reserved: Kafka v2 records)
KEY_MODE_SHIFT = 6  # 2 bits: column mode of keys
VALUE_MODE_SHIFT = 8  # 2 bits: column mode of values
HAS_HEADERS = 0x0400
TRANSACTIONAL = 0x0800  # the records belong to their producer's open transaction
CONTROL = 0x1000  # a control batch (a commit / abort marker); always also TRANSACTIONAL
KNOWN_ATTRIBUTES = 0x1FFF

# Kafka (magic 2) attributes: compression 0-2 (0..4: none, gzip, snappy, lz4,
# zstd), timestamp type 3 (as ours), transactional 4, control 5. Bit 6 (delete
# horizon) is set only by a Kafka broker's cleaner, bits 7-15 are unused: refused.
KAFKA_TRANSACTIONAL = 0x0010
KAFKA_CONTROL = 0x0020
KAFKA_KNOWN_ATTRIBUTES = 0x003F
KAFKA_MAX_CODEC = 4
# Either magic's transactional or control bit: one test per batch serves both
# (bits 4-5 are ENCODING_MASK in magic 1, refused there; bits 11-12 are refused
# in magic 2), so a non-transactional batch costs one AND on the write path.
TXN_BITS = TRANSACTIONAL | CONTROL | KAFKA_TRANSACTIONAL | KAFKA_CONTROL


def txn_flags(magic: int, attributes: int) -> tuple[bool, bool]:
    """``(transactional, control)`` of a batch from its header's magic and
    attributes, for both magics (readers skip control batches by this,
    without decoding them)."""
    if magic == KAFKA_MAGIC:
        return bool(attributes & KAFKA_TRANSACTIONAL), bool(attributes & KAFKA_CONTROL)
    return bool(attributes & TRANSACTIONAL), bool(attributes & CONTROL)

# column modes
COL_ABSENT = 0  # every entry null; no bytes in the section
COL_DENSE = 1  # offsets + data, no nulls
COL_NULLABLE = 2  # validity bitmap + offsets + data


class BatchHeader(NamedTuple):
    """The 61-byte fixed header of one record batch. A named tuple: one is
    made per batch a produce, a fetch's walk or a recovery reads (a third
    of a frozen dataclass's cost to make; ``_replace`` makes a changed copy)."""

    base_offset: int
    batch_length: int
    leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def is_transactional(self) -> bool:
        return txn_flags(self.magic, self.attributes)[0]

    @property
    def is_control(self) -> bool:
        return txn_flags(self.magic, self.attributes)[1]

    @property
    def timestamp_type(self) -> int:
        """0 = create time (set by the producer), 1 = log append time."""
        return 1 if self.attributes & LOG_APPEND_TIME else 0


def read_header(buf, pos: int = 0) -> BatchHeader:
    """Parse and validate the header at ``buf[pos:]``; no CRC check.

    Raises ``CorruptRecordError`` (never anything else) when fewer than
    HEADER_SIZE bytes are there or a field is out of its domain.
    """
    return BatchHeader(*read_fields(buf, pos))


# The fields of a header as ``read_fields`` returns them (HEADER's order).
F_BASE_OFFSET, F_BATCH_LENGTH, F_MAGIC, F_CRC, F_ATTRIBUTES = 0, 1, 3, 4, 5
F_LAST_OFFSET_DELTA, F_FIRST_TIMESTAMP, F_RECORD_COUNT = 6, 7, 12
_BAD_ATTRIBUTES = ~KNOWN_ATTRIBUTES | COMPRESSION_MASK | ENCODING_MASK
_MIN_LENGTH = HEADER_SIZE - LOG_OVERHEAD


def read_fields(buf, pos: int = 0) -> tuple:
    """``read_header`` without the object: the header's fields as a tuple in
    ``HEADER``'s order (``F_*`` name the indexes), checked exactly as
    ``read_header`` checks them (same errors). For walks over many batches:
    the common, valid header costs one unpack and one comparison chain.

    Magic 1 (ours) and magic 2 (a Kafka batch stored as sent) are accepted;
    a magic-2 header is checked with Kafka's attribute bits (compression
    0..4, timestamp type, transactional, control; nothing else) and the
    same length, count and offset rules, after the magic-1 test failed (so
    the magic-1 path pays nothing for it)."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"batch header needs {HEADER_SIZE} bytes at position {pos}, "
                                 f"{max(0, len(buf) - pos)} available")
    f = HEADER.unpack_from(buf, pos)
    base, length, _, magic, _, attrs, delta, first, last, _, _, _, count = f
    if (magic == MAGIC and _MIN_LENGTH <= length <= MAX_BATCH_LENGTH
            and not attrs & _BAD_ATTRIBUTES and (attrs >> KEY_MODE_SHIFT) & 3 != 3
            and (attrs >> VALUE_MODE_SHIFT) & 3 != 3 and count >= 1 and delta == count - 1
            and base + delta <= MAX_OFFSET and last >= first):
        return f
    if (magic == KAFKA_MAGIC and _MIN_LENGTH <= length <= MAX_BATCH_LENGTH
            and not attrs & ~KAFKA_KNOWN_ATTRIBUTES and attrs & COMPRESSION_MASK <= KAFKA_MAX_CODEC
            and count >= 1 and delta == count - 1 and base + delta <= MAX_OFFSET
            and last >= first):
        return f  # the records are checked on produce (kafka_v2.check_batch), not here
    raise CorruptRecordError(f"{_header_problem(BatchHeader(*f))} at position {pos}")


def _header_problem(h: BatchHeader) -> str:
    """What is wrong with a header ``read_fields`` refused (the first rule broken)."""
    if h.magic not in (MAGIC, KAFKA_MAGIC):
        return f"unknown magic {h.magic}"
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or h.batch_length > MAX_BATCH_LENGTH:
        return f"batch length {h.batch_length} out of range"
    if h.magic == KAFKA_MAGIC:
        if h.attributes & ~KAFKA_KNOWN_ATTRIBUTES or h.attributes & COMPRESSION_MASK > KAFKA_MAX_CODEC:
            return f"unsupported attributes 0x{h.attributes:04x} (magic 2)"
    elif h.attributes & ~KNOWN_ATTRIBUTES or h.attributes & (COMPRESSION_MASK | ENCODING_MASK):
        return f"unsupported attributes 0x{h.attributes:04x}"
    elif (h.attributes >> KEY_MODE_SHIFT) & 3 == 3 or (h.attributes >> VALUE_MODE_SHIFT) & 3 == 3:
        return f"invalid column mode in attributes 0x{h.attributes:04x}"
    if h.record_count < 1 or h.last_offset_delta != h.record_count - 1:
        return f"record count {h.record_count} / last offset delta {h.last_offset_delta} mismatch"
    if h.base_offset + h.last_offset_delta > MAX_OFFSET:
        return f"offset {h.base_offset} out of range"
    return "max timestamp below first timestamp"


def compute_crc(buf, pos: int, size: int) -> int:
    """CRC32C of the CRC-covered part of the batch at ``buf[pos:pos+size]``."""
    return crc32c.crc32c(memoryview(buf)[pos + CRC_START:pos + size])


def check_crc(buf, pos: int, header: BatchHeader) -> None:
    """Raise ``CorruptRecordError`` unless the stored CRC matches the bytes."""
    actual = compute_crc(buf, pos, header.size)
    if actual != header.crc:
        raise CorruptRecordError(
            f"CRC mismatch at position {pos} (offset {header.base_offset}): "
            f"stored 0x{header.crc:08x}, computed 0x{actual:08x}")


def stamp(header_bytes, base_offset: int, leader_epoch: int) -> bytes:
    """The 16 stamped leading bytes of a batch: new base offset and epoch.

    ``header_bytes`` is the batch (or at least its first 16 bytes); the batch
    length is kept. The CRC does not cover these bytes, so records are never
    re-encoded or re-checksummed.
    """
    _, length, _ = STAMP.unpack_from(header_bytes, 0)
    return STAMP.pack(base_offset, length, leader_epoch)
