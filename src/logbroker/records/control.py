"""Control batches: the commit / abort markers of transactions (pure bytes).

The broker writes every marker as a Kafka RecordBatch v2 control batch
(docs/format.md §10, decision in docs/architecture.md): one format every
reader knows. Kafka consumers get it by ``sendfile`` as it lies; our readers
skip it by its header bits (``format.txn_flags``) without decoding it.

    header   magic 2, attributes TRANSACTIONAL | CONTROL (0x30), producer id
             and epoch of the transaction, base sequence -1, one record
    record   key   = int16 version 0, int16 type (0 abort, 1 commit)
             value = int16 version 0, int32 coordinator epoch

``read_marker`` also reads the magic-1 layout: one of our columnar batches
with attributes TRANSACTIONAL | CONTROL and the same key and value bytes in
its one record (the broker never writes it; a reader accepts it).
"""

from __future__ import annotations

import struct

import crc32c

from ..errors import CorruptRecordError
from . import format as fmt
from .columns import decode_ours
from .encoder import encode_batch
from .kafka_v2 import section, walk

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinator epoch
_KAFKA_ATTRS = fmt.KAFKA_TRANSACTIONAL | fmt.KAFKA_CONTROL


def _record(commit: bool, coordinator_epoch: int) -> bytes:
    """The one Kafka v2 record of a marker: length 16, attributes 0,
    timestamp delta 0, offset delta 0, key (4 bytes), value (6 bytes), no
    headers (varints zigzag-encoded)."""
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    body = b"\x00\x00\x00" + bytes([len(key) << 1]) + key + bytes([len(value) << 1]) + value + b"\x00"
    return bytes([len(body) << 1]) + body


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp_ms: int) -> bytes:
    """A whole unstamped magic-2 control batch (base offset and leader epoch
    0: the Log stamps them) holding one marker of ``producer_id`` /
    ``producer_epoch``. Raises ``struct.error`` for fields out of their
    widths (callers pass checked values)."""
    body = _record(commit, coordinator_epoch)
    length = fmt.HEADER_SIZE - fmt.LOG_OVERHEAD + len(body)
    fields = [0, length, 0, fmt.KAFKA_MAGIC, 0, _KAFKA_ATTRS, 0, timestamp_ms, timestamp_ms,
              producer_id, producer_epoch, -1, 1]
    head = fmt.HEADER.pack(*fields)
    fields[4] = crc32c.crc32c(body, crc32c.crc32c(head[fmt.CRC_START:]))
    return fmt.HEADER.pack(*fields) + body


def read_marker(batch, header: "fmt.BatchHeader | None" = None) -> tuple[bool, int]:
    """``(commit, coordinator_epoch)`` of the whole control batch ``batch``
    (header at 0; ``header`` its parsed header if the caller has it), magic
    2 or 1. No CRC check (the caller's). Raises ``CorruptRecordError`` for
    anything that is not one well-formed marker: not a control batch, not
    exactly one record, a key other than version 0 with type 0 or 1, a
    value shorter than 6 bytes or of another version."""
    mv = memoryview(batch).cast("B")
    h = fmt.read_header(mv, 0) if header is None else header
    transactional, control = fmt.txn_flags(h.magic, h.attributes)
    if not control or not transactional:
        raise CorruptRecordError(f"batch at offset {h.base_offset} is not a control batch "
                                 f"(attributes 0x{h.attributes:04x})")
    if h.record_count != 1 or h.size > len(mv):
        raise CorruptRecordError(f"control batch at offset {h.base_offset} holds "
                                 f"{h.record_count} records, or fewer bytes than it announces")
    if h.magic == fmt.KAFKA_MAGIC:
        w = walk(section(mv[:h.size], h, 1 << 16), 1, 0, fields=True)
        key, value = w.keys[0], w.values[0]
    else:
        rb = decode_ours(mv, 0, h.size, h, verify=False)
        key, value = rb.keys.get(0), rb.values.get(0)
    if key is None or len(key) != _KEY.size or value is None or len(value) < _VALUE.size:
        raise CorruptRecordError(f"control batch at offset {h.base_offset}: a marker's key is 4 "
                                 "bytes and its value at least 6")
    version, kind = _KEY.unpack(bytes(key))
    value_version, coordinator_epoch = _VALUE.unpack_from(bytes(value), 0)
    if version != 0 or kind not in (ABORT, COMMIT) or value_version != 0:
        raise CorruptRecordError(f"control batch at offset {h.base_offset}: unknown marker "
                                 f"(key version {version}, type {kind}, value version "
                                 f"{value_version})")
    return kind == COMMIT, coordinator_epoch


def marker_of_ours(producer_id: int, producer_epoch: int, commit: bool,
                   coordinator_epoch: int, timestamp_ms: int) -> bytes:
    """The magic-1 layout of a marker (what ``read_marker`` also accepts;
    the broker never writes it): for tests and tools."""
    raw = bytearray(encode_batch([timestamp_ms], [_KEY.pack(0, COMMIT if commit else ABORT)],
                                 [_VALUE.pack(0, coordinator_epoch)], {},
                                 producer_id=producer_id, producer_epoch=producer_epoch,
                                 transactional=True))
    attrs = fmt.HEADER.unpack_from(raw, 0)[fmt.F_ATTRIBUTES] | fmt.CONTROL
    struct.pack_into(">H", raw, fmt.CRC_START, attrs)
    struct.pack_into(">I", raw, fmt.CRC_OFFSET, crc32c.crc32c(bytes(raw[fmt.CRC_START:])))
    return bytes(raw)
