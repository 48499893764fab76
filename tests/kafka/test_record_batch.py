"""Kafka RecordBatch v2: ``build_batch`` (src/logbroker/kafka/record_batch.py)
read back by the broker's own readers (records/format.py's header and CRC,
records/kafka_v2.py's record walk), the header's layout against ours, CRC and
malformed records; batches built and read by kafka-python when it is importable."""

from __future__ import annotations

import struct

import pytest

from logbroker.errors import CorruptRecordError
from logbroker.kafka import record_batch as rb
from logbroker.kafka.errors import KafkaEncodeError
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.records import format as ours
from logbroker.records import kafka_v2
from logbroker.records.decoder import decode_batch
from logbroker.records.walker import scan_batches

RECORDS = (KafkaRecord(0, 0, b"k", b"v", (("h", b"x"), ("n", None))),
           KafkaRecord(1, 5, None, b"", ()),
           KafkaRecord(2, -3, b"", None, (("", b""),)),
           KafkaRecord(3, 1 << 40, b"\x00" * 300, b"w" * 70000, tuple((f"k{i}", b"v") for i in range(70))))


def read(batch, *, verify: bool = True) -> tuple:
    """``(header, records)`` of the whole Kafka batch ``batch``, read as the
    broker reads a stored one (``records`` as ``KafkaRecord``s)."""
    header = ours.read_header(batch)
    fields = kafka_v2.kafka_records(batch, header, verify=verify)
    return header, tuple(KafkaRecord(*f) for f in fields)


def test_build_and_read_round_trip():
    batch = build_batch(RECORDS, base_offset=10, base_timestamp=1_700_000_000_000,
                        producer_id=7, producer_epoch=2, base_sequence=30,
                        attributes=ours.KAFKA_TRANSACTIONAL | rb.TIMESTAMP_TYPE)
    header, records = read(batch)
    assert records == RECORDS
    assert (header.base_offset, header.last_offset_delta, header.record_count) == (10, 3, 4)
    assert header.max_timestamp == 1_700_000_000_000 + (1 << 40)
    assert header.attributes & ours.KAFKA_TRANSACTIONAL and header.timestamp_type == 1
    assert not header.attributes & ours.KAFKA_CONTROL
    assert header.leader_epoch == 0xFFFFFFFF and header.size == len(batch)  # Kafka's -1, unsigned
    assert read(memoryview(bytearray(batch)))[1] == RECORDS
    for codec in range(1, 5):  # gzip, snappy (xerial), lz4, zstd
        assert read(build_batch(RECORDS, compression=codec))[1] == RECORDS
    odd = KafkaRecord(0, 0, b"k", b"v", (), attributes=5)
    assert read(build_batch([odd]))[1] == (odd,)  # the attributes byte, as written
    with pytest.raises(CorruptRecordError, match="2\\^31-1 ms"):
        decode_batch(batch)  # 1 << 40 ms: Kafka's deltas are 64-bit, our columns' 32


def test_header_layout_matches_ours_except_magic_and_signedness():
    """Same offsets and widths: one header parser reads both (docs/kafka.md)."""
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
        read(bytes(batch))
    for offset, value, message in ((16, 3, "unknown magic 3"),
                                   (22, 5, r"unsupported attributes 0x0005 \(magic 2\)"),
                                   (11, 3, "batch length 3 out of range")):
        bad = bytearray(build_batch(RECORDS[:1]))
        bad[offset] = value
        with pytest.raises(CorruptRecordError, match=message):
            read(bytes(bad))
    ours_magic = bytearray(build_batch(RECORDS[:1]))
    ours_magic[16] = 1  # our magic over Kafka's records: not columns
    with pytest.raises(CorruptRecordError):
        decode_batch(bytes(ours_magic))
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        ours.read_header(b"\x00" * 60)
    cut = bytes(batch[:61])  # the header of a batch whose records are not there
    with pytest.raises(CorruptRecordError, match="announces 84 bytes, buffer holds 61"):
        decode_batch(cut)
    with pytest.raises(CorruptRecordError, match="CRC mismatch"):
        read(cut)
    with pytest.raises(CorruptRecordError, match="2 records cannot fit in a 0-byte"):
        read(cut, verify=False)


def _rebuild(batch: bytearray) -> bytes:
    """``batch`` with its length and CRC made right again after an edit."""
    struct.pack_into(">i", batch, 8, len(batch) - rb.LOG_OVERHEAD)
    import crc32c
    struct.pack_into(">I", batch, rb.CRC_OFFSET, crc32c.crc32c(bytes(batch[rb.CRC_START:])))
    return bytes(batch)


def test_malformed_records_with_valid_crc():
    good = bytearray(build_batch([KafkaRecord(0, 0, b"k", b"v")]))
    cases = [(good + b"\x00", "1 bytes after the last Kafka record"),
             (good[:-1], "runs past|exceeds|disagrees"),
             (good[:61] + b"\x02" + good[62:], "disagrees|runs past"),
             (build_batch([KafkaRecord(1, 0, b"k", b"v"), KafkaRecord(1, 0, b"k", b"v")]),
              "Kafka record 0: offset delta 1, expected 0")]
    count = bytearray(good)
    struct.pack_into(">i", count, 57, 1000)  # record count
    struct.pack_into(">i", count, 23, 999)  # last offset delta, as the header's rule wants
    cases.append((count, "1000 records cannot fit"))
    for batch, message in cases:
        with pytest.raises(CorruptRecordError, match=message):
            read(_rebuild(bytearray(batch)))
    compressed = bytearray(good)
    compressed[22] |= 1  # says gzip, is not
    with pytest.raises(CorruptRecordError, match="gzip records section"):
        read(_rebuild(compressed))


def test_scan_stops_at_an_incomplete_tail():
    a, b = build_batch(RECORDS[:1]), build_batch(RECORDS[:2], base_offset=1)
    for tail in (b[:30], b[:70]):
        got = list(scan_batches(a + b + tail))
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
    header, records = read(theirs)
    assert records == RECORDS and header.producer_id == 9 and header.first_timestamp == 1000
    mine = build_batch(records, base_timestamp=1000, producer_id=9, producer_epoch=1,
                       base_sequence=4, partition_leader_epoch=header.leader_epoch)
    assert mine == theirs  # byte for byte
    theirs_read = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers])
                   for r in default_records.DefaultRecordBatch(build_batch(RECORDS, base_offset=5))]
    assert theirs_read == [(5 + r.offset_delta, r.timestamp_delta, r.key, r.value,
                            list(r.headers)) for r in RECORDS]
