"""Kafka RecordBatch v2 (src/logbroker/kafka/record_batch.py): build and read,
the header's layout against ours, CRC and malformed records; batches built
and read by kafka-python when it is importable."""

from __future__ import annotations

import struct

import pytest

from logbroker.errors import CorruptRecordError
from logbroker.kafka import record_batch as rb
from logbroker.kafka.errors import KafkaEncodeError
from logbroker.kafka.record_batch import KafkaRecord, build_batch, read_records
from logbroker.records import format as ours

RECORDS = (KafkaRecord(0, 0, b"k", b"v", (("h", b"x"), ("n", None))),
           KafkaRecord(1, 5, None, b"", ()),
           KafkaRecord(2, -3, b"", None, (("", b""),)),
           KafkaRecord(3, 1 << 40, b"\x00" * 300, b"w" * 70000, tuple((f"k{i}", b"v") for i in range(70))))


def test_build_and_read_round_trip():
    batch = build_batch(RECORDS, base_offset=10, base_timestamp=1_700_000_000_000,
                        producer_id=7, producer_epoch=2, base_sequence=30,
                        attributes=rb.TRANSACTIONAL | rb.TIMESTAMP_TYPE)
    header, records = read_records(batch)
    assert records == RECORDS
    assert (header.base_offset, header.last_offset_delta, header.record_count) == (10, 3, 4)
    assert header.max_timestamp == 1_700_000_000_000 + (1 << 40)
    assert header.is_transactional and header.timestamp_type == 1 and not header.is_control
    assert header.partition_leader_epoch == -1 and header.size == len(batch)
    assert read_records(memoryview(bytearray(batch)))[1] == RECORDS


def test_header_layout_matches_ours_except_magic_and_signedness():
    """Same offsets and widths: one header parser could read both (docs/kafka.md)."""
    assert rb.HEADER.size == ours.HEADER_SIZE == 61
    assert [struct.calcsize(c) for c in rb.HEADER.format[1:]] == \
        [struct.calcsize(c) for c in ours.HEADER.format[1:]]
    assert (rb.CRC_OFFSET, rb.CRC_START, rb.LOG_OVERHEAD) == \
        (ours.CRC_OFFSET, ours.CRC_START, ours.LOG_OVERHEAD)
    batch = build_batch(RECORDS[:1])
    assert batch[16] == 2 and ours.HEADER.unpack_from(batch)[3] == 2
    assert ours.read_header(batch).magic == 2  # our reader takes a Kafka batch (docs/format.md §9)
    with pytest.raises(CorruptRecordError, match="unknown magic 3"):
        ours.read_header(batch[:16] + b"\x03" + batch[17:])


def test_crc_and_header_checks():
    batch = bytearray(build_batch(RECORDS[:2]))
    batch[-1] ^= 1
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        read_records(bytes(batch))
    for offset, value, message in ((16, 1, "magic 1 is not 2"), (22, 5, "unknown compression"),
                                   (11, 3, "shorter than the header")):
        bad = bytearray(build_batch(RECORDS[:1]))
        bad[offset] = value
        with pytest.raises(CorruptRecordError, match=message):
            read_records(bytes(bad))
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        rb.read_batch_header(b"\x00" * 60)
    with pytest.raises(CorruptRecordError, match="only 61 present"):
        rb.check_crc(bytes(batch[:20]) + b"\x00" * 41)


def _rebuild(batch: bytearray) -> bytes:
    """``batch`` with its length and CRC made right again after an edit."""
    struct.pack_into(">i", batch, 8, len(batch) - rb.LOG_OVERHEAD)
    import crc32c
    struct.pack_into(">I", batch, rb.CRC_OFFSET, crc32c.crc32c(bytes(batch[rb.CRC_START:])))
    return bytes(batch)


def test_malformed_records_with_valid_crc():
    good = bytearray(build_batch([KafkaRecord(0, 0, b"k", b"v")]))
    cases = [(good + b"\x00", "1 bytes after the last record"),
             (good[:-1], "runs past|exceeds|disagrees"),
             (good[:61] + b"\x02" + good[62:], "disagrees|runs past")]
    count = bytearray(good)
    struct.pack_into(">i", count, 57, 1000)
    cases.append((count, "1000 records cannot fit"))
    for batch, message in cases:
        with pytest.raises(CorruptRecordError, match=message):
            read_records(_rebuild(bytearray(batch)))
    compressed = bytearray(good)
    compressed[22] |= 1
    with pytest.raises(CorruptRecordError, match="gzip batches are not supported yet"):
        read_records(_rebuild(compressed))


def test_iter_batches_stops_at_an_incomplete_tail():
    a, b = build_batch(RECORDS[:1]), build_batch(RECORDS[1:3], base_offset=1)
    got = list(rb.iter_batches(a + b + b[:30]))
    assert [(pos, h.record_count) for pos, h in got] == [(0, 1), (len(a), 2)]


def test_build_refuses_what_it_cannot_write():
    with pytest.raises(KafkaEncodeError, match="at least one record"):
        build_batch([])
    with pytest.raises(KafkaEncodeError, match="compression"):
        build_batch(RECORDS[:1], attributes=2)
    with pytest.raises(KafkaEncodeError, match="out of range"):
        build_batch([KafkaRecord(1 << 31, 0, None, None)])


# -- kafka-python, when importable ---------------------------------------------------------
def test_kafka_python_batches_read_and_ours_read_by_it():
    default_records = pytest.importorskip("kafka.record.default_records")
    builder = default_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=0, producer_id=9, producer_epoch=1,
        base_sequence=4, batch_size=1 << 20)
    for r in RECORDS:
        builder.append(r.offset_delta, 1000 + r.timestamp_delta, r.key, r.value, list(r.headers))
    theirs = bytes(builder.build())
    header, records = read_records(theirs)
    assert records == RECORDS and header.producer_id == 9 and header.base_timestamp == 1000
    mine = build_batch(records, base_timestamp=1000, producer_id=9, producer_epoch=1,
                       base_sequence=4, partition_leader_epoch=header.partition_leader_epoch)
    assert mine == theirs  # byte for byte
    read = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
            for r in default_records.DefaultRecordBatch(build_batch(RECORDS, base_offset=5))]
    assert read == [(5 + r.offset_delta, r.timestamp_delta, r.key, r.value, list(r.headers))
                    for r in RECORDS]
