"""Kafka record batches (magic 2) in the log: appended as sent (header,
CRC, size and decompression checked; records walked only for a compacted
topic, decision 78), read back by every reader, found by timestamp,
surviving a crash, a torn tail, retention and replication; bad ones refused
with nothing stored, and a CRC-valid batch of malformed records stored and
got around by every reader (docs/format.md §9)."""

from __future__ import annotations

import os
import shutil

import pytest

from tests.support.fixtures import RawConn, batch, crash, open_store, values_of
from logbroker.errors import (CorruptRecordError, InvalidRecordError, LogbrokerError,
                              RecordTooLargeError)
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.protocol import messages as m
from logbroker.records import decode_batch, scan_batches
from logbroker.records import format as fmt
from logbroker.records.decoder import readable

CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy (xerial), lz4, zstd


def kbatch(values, ts=1_000_000, keys=None, compression=0, headers=(), **kw) -> bytes:
    """A Kafka batch of ``values`` (record i at ``ts + i``), as a Kafka client sends it."""
    keys = keys or [b"k%d" % i for i in range(len(values))]
    recs = [KafkaRecord(i, i, keys[i], v, headers if i == 0 else ()) for i, v in enumerate(values)]
    return build_batch(recs, base_timestamp=ts, compression=compression, **kw)


def records_of(log, start=0):
    out, offset = [], start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        for pos, h in scan_batches(data):
            out += [r for r in decode_batch(data[pos:pos + h.size]).records() if r.offset >= offset]
            offset = h.next_offset
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_batch_is_stored_as_sent_and_read_back(store_factory, codec):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"ours"])])
    sent = kbatch([b"a", None, b"c" * 300], compression=codec, headers=(("h", b"x"), ("n", None)))
    info = log.append([sent], leader_epoch=0)
    assert (info.first_offset, info.last_offset) == (1, 3)
    raw = log.read(1, 1 << 20)
    assert raw[16:] == sent[16:]  # only base offset and epoch stamped
    assert fmt.read_header(raw).base_offset == 1
    got = records_of(log)
    assert [r.value for r in got] == [b"ours", b"a", None, b"c" * 300]
    assert [r.key for r in got[1:]] == [b"k0", b"k1", b"k2"]
    assert got[1].headers == (("h", b"x"), ("n", None)) and got[2].headers == ()
    assert [r.timestamp for r in got[1:]] == [1_000_000, 1_000_001, 1_000_002]


def test_offset_for_timestamp_over_both_magics(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"x"], ts=500)])
    log.append([kbatch([b"a", b"b", b"c"], ts=1000, compression=1)])
    log.append([batch([b"y"], ts=5000)])
    assert (log.offset_for_timestamp(1001).offset, log.offset_for_timestamp(1001).timestamp) \
        == (2, 1001)
    assert log.offset_for_timestamp(1003).offset == 4
    assert log.offset_for_timestamp(0).offset == 0


def test_crash_recovery_and_torn_tail_keep_the_whole_kafka_batches(tmp_path):
    src = tmp_path / "src"
    s = open_store(src)
    s.create_topic("t")
    log = s.get_log("t", 0)
    sent = [kbatch([b"v%d-%d" % (i, j) for j in range(3)], compression=i % 5) for i in range(5)]
    for b in sent:
        log.append([b], sync=False)
    seg, end = log.active.path, log.active.size
    crash(s)
    for cut, expect in ((end, 15), (end - 1, 12), (end - len(sent[-1]) + 30, 12)):
        work = tmp_path / f"w{cut}"
        shutil.copytree(src, work)
        with open(work / "t-0" / os.path.basename(seg), "r+b") as fh:
            fh.truncate(cut)
        s2 = open_store(work)
        lg = s2.get_log("t", 0)
        assert lg.offline is None and lg.log_end_offset == expect
        assert values_of(lg)[-1] == (b"v4-2" if expect == 15 else b"v3-2")
        s2.close()


def test_replication_copies_kafka_batches_byte_for_byte(tmp_path):
    leader, follower = open_store(tmp_path / "l"), open_store(tmp_path / "f")
    for s in (leader, follower):
        s.create_topic("t")
    lg = leader.get_log("t", 0)
    lg.append([kbatch([b"a", b"b"], compression=4)], leader_epoch=0)
    lg.append([batch([b"c"])], leader_epoch=0)
    data = lg.read(0, 1 << 20)
    fl = follower.get_log("t", 0)
    fl.append_replicated(data)
    assert fl.read(0, 1 << 20) == data and values_of(fl) == [b"a", b"b", b"c"]
    leader.close()
    follower.close()


def test_retention_deletes_segments_of_kafka_batches(store_factory):
    s = store_factory(segment_bytes=300)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(6):
        log.append([kbatch([b"x" * 100, b"y"])])
    assert len(log.segments) > 2
    log.delete_before(6)
    assert log.log_start_offset == 6 and values_of(log, 6)[0] == b"x" * 100


def bad_crc(raw: bytes) -> bytes:
    b = bytearray(raw)
    b[-1] ^= 1
    return bytes(b)


def recrc(raw: bytearray) -> bytes:
    raw[fmt.CRC_OFFSET:fmt.CRC_START] = fmt.compute_crc(raw, 0, len(raw)).to_bytes(4, "big")
    return bytes(raw)


def with_header(raw: bytes, offset: int, value: bytes) -> bytes:
    b = bytearray(raw)
    b[offset:offset + len(value)] = value
    return recrc(b)


def cut(raw: bytes, n: int) -> bytes:
    """``raw`` without its last ``n`` bytes, length and CRC fixed up."""
    b = bytearray(raw[:-n])
    b[8:12] = (len(b) - 12).to_bytes(4, "big")
    return recrc(b)


def test_bad_kafka_batches_are_refused_with_nothing_stored(store_factory):
    s = store_factory(max_batch_bytes=4096)
    s.create_topic("t")
    log = s.get_log("t", 0)
    good = kbatch([b"a", b"b"])
    cases = [
        (bad_crc(good), CorruptRecordError, "CRC"),
        (with_header(good[:fmt.HEADER_SIZE + 10], 8, (fmt.HEADER_SIZE - 2).to_bytes(4, "big")),
         CorruptRecordError, "2 records cannot fit in a 10-byte records section"),
        (cut(kbatch([b"a"], compression=1), 3), CorruptRecordError, "gzip"),
        (with_header(good, 57, (3).to_bytes(4, "big")), CorruptRecordError, "mismatch"),
        (kbatch([b"a"], attributes=fmt.KAFKA_TRANSACTIONAL), InvalidRecordError, "transactional"),
        (kbatch([b"a"], attributes=fmt.KAFKA_CONTROL), InvalidRecordError, "control"),
        (with_header(good, 21, (0x40).to_bytes(2, "big")), CorruptRecordError, "attributes"),
        (with_header(good, 35, (999_999).to_bytes(8, "big")), CorruptRecordError, "max timestamp"),
        (with_header(good, 35, (1_000_000 + 2**31).to_bytes(8, "big")), CorruptRecordError,
         "span more than"),
        (kbatch([b"z" * 5000]), RecordTooLargeError, "max_batch_bytes"),
        (kbatch([b"\0" * 70_000], compression=3), RecordTooLargeError, "decompresses"),
    ]
    for raw, error, words in cases:
        with pytest.raises(error, match=words):
            log.append([good, raw])
    assert log.log_end_offset == 0
    log.append([good])
    assert values_of(log) == [b"a", b"b"]


BAD_OFFSETS = build_batch([KafkaRecord(1, 0, b"k", b"a"), KafkaRecord(1, 0, b"k", b"b")],
                          base_timestamp=2_000)  # CRC-valid, records malformed


def test_compacted_topic_refuses_a_kafka_record_without_key(store_factory):
    """A compacted topic's Kafka batches are walked: keys, and every record rule."""
    s = store_factory()
    s.create_topic("c", cleanup_policy="compact")
    log = s.get_log("c", 0)
    with pytest.raises(InvalidRecordError, match="key"):
        log.append([kbatch([b"a", b"b"], keys=[b"k", None])])
    with pytest.raises(CorruptRecordError, match="offset delta 1, expected 0"):
        log.append([BAD_OFFSETS])
    log.append([kbatch([b"a"], keys=[b"k"])])
    assert log.log_end_offset == 1


@pytest.mark.parametrize("codec", (1, 2, 3, 4))
def test_every_zip_bomb_is_refused_within_the_bound(store_factory, codec):
    s = store_factory(max_batch_bytes=256 << 10)  # sections decompress to 16x that at most
    s.create_topic("t")
    log = s.get_log("t", 0)
    bomb = kbatch([b"\0" * (5 << 20)], compression=codec)  # 5 MiB of zeros
    assert len(bomb) < 256 << 10
    with pytest.raises(RecordTooLargeError, match="decompresses to more than 4194304"):
        log.append([bomb])
    assert log.log_end_offset == 0


def test_our_produce_request_carries_kafka_batches(broker):
    c = RawConn(broker.port)
    sent = [kbatch([b"p%d" % i, b"q%d" % i], compression=i % 5) for i in range(5)]
    for b in sent:
        resp = c.call(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                                parts=(("kt", 0, len(b)),), payload=(b,)))
        assert resp.parts[0][2] == 0, resp
    resp = c.call(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                            parts=(("kt", 0, len(sent[0])),), payload=(bad_crc(sent[0]),)))
    assert resp.parts[0][2] == CorruptRecordError.code and "CRC" in resp.parts[0][3]
    fetched = c.call(m.Fetch(max_wait_ms=0, parts=(("kt", 0, 0, 1 << 20),)))
    data = bytes(fetched.payload[0])
    values = [r.value for pos, h in scan_batches(data)
              for r in decode_batch(data[pos:pos + h.size]).records()]
    assert values == [v for i in range(5) for v in (b"p%d" % i, b"q%d" % i)]
    assert [data[pos + 16] for pos, _ in scan_batches(data)] == [2] * 5


def test_only_logbroker_errors_for_truncated_kafka_records(store_factory):
    """Every prefix length of the records section, CRC fixed up: refused
    cleanly, or stored (records unwalked) and then read as a
    CorruptRecordError by a reader, as nothing by the broker's own."""
    s = store_factory()
    s.create_topic("t")
    s.create_topic("c", cleanup_policy="compact")
    log, compacted = s.get_log("t", 0), s.get_log("c", 0)
    good = kbatch([b"a" * 20, None], headers=(("h", b"v"),))
    stored = 0
    for cut in range(fmt.HEADER_SIZE, len(good)):
        raw = bytearray(good[:cut])
        raw[8:12] = (cut - 12).to_bytes(4, "big")
        with pytest.raises(LogbrokerError):
            compacted.append([recrc(raw)])
        try:
            log.append([recrc(raw)])
        except LogbrokerError:
            continue
        stored += 1
        data = log.read(log.log_end_offset - 2, 1 << 20)
        with pytest.raises(CorruptRecordError):
            decode_batch(data)
        assert readable(data) is None
    assert compacted.log_end_offset == 0
    assert 0 < stored < len(good) - fmt.HEADER_SIZE and log.log_end_offset == 2 * stored


def test_malformed_kafka_records_are_stored_and_the_broker_gets_around_them(tmp_path):
    """A CRC-valid Kafka batch whose records are malformed (decision 78):
    stored; offset-for-timestamp lands on it by its header; the console
    shows a row for it; compaction (the topic compact only later) keeps it
    whole and compacts the rest; decode_batch names the problem."""
    from tests.support.compaction import COMPACT, compact_all, open_compacted
    s = open_compacted(tmp_path / "d", cleanup_policy="delete")
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([kbatch([b"a", b"b"], ts=1_000, keys=[b"k", b"j"])])
    info = log.append([BAD_OFFSETS])
    log.append([kbatch([b"c"], ts=3_000, keys=[b"k"])])
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (2, 3, 5)
    data = log.read(2, 1 << 20)
    with pytest.raises(CorruptRecordError, match="offset delta 1, expected 0"):
        decode_batch(data[:fmt.read_header(data).size])
    assert log.offset_for_timestamp(1_500).offset == 2  # the bad batch's first offset
    assert log.offset_for_timestamp(2_500).offset == 4
    from logbroker.console.inputs import MessageQuery
    from logbroker.console.messages import read_page
    page = read_page(log, MessageQuery(topic="t", partition=0, offset=0, time_ms=None, limit=10,
                                       format="text"))
    assert [r["offset"] for r in page["records"]] == [0, 1, 2, 4]
    assert "do not decode" in page["records"][2]["skipped"] and page["next_offset"] == 5
    log.roll()
    log.append([kbatch([b"d"], ts=4_000, keys=[b"z"])])
    s.close()
    with open_compacted(tmp_path / "d") as s:  # now compact: key k's first record goes
        assert s.get_log("t", 0).config.cleanup_policy == COMPACT["cleanup_policy"]
        compact_all(s)
        log = s.get_log("t", 0)
        kept, offset = [], 0
        while offset < log.log_end_offset:  # a read stops at a segment's end
            for pos, h in scan_batches(log.read(offset, 1 << 20)):
                kept.append((h.base_offset, h.record_count))
                offset = h.next_offset
        assert kept == [(1, 1), (2, 2), (4, 1), (5, 1)]
        assert readable(log.read(2, 1 << 20)[:BAD_OFFSETS.__len__()]) is None


def test_snappy_in_several_xerial_blocks_and_raw(store_factory):
    """Kafka's Java client writes 32 KiB xerial blocks; librdkafka one raw block."""
    import struct

    import cramjam
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    plain = kbatch([b"%05d" % i * 200 for i in range(80)])  # ~80 KiB of records
    section = plain[fmt.HEADER_SIZE:]
    blocks = [bytes(cramjam.snappy.compress_raw(section[i:i + 32768]))
              for i in range(0, len(section), 32768)]
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + \
        b"".join(struct.pack(">I", len(b)) + b for b in blocks)
    raw = bytes(cramjam.snappy.compress_raw(section))
    for body in (xerial, raw):
        b = bytearray(plain[:fmt.HEADER_SIZE] + body)
        b[8:12] = (len(b) - 12).to_bytes(4, "big")
        b[21:23] = (2).to_bytes(2, "big")  # snappy
        log.append([recrc(b)])
    assert values_of(log) == [b"%05d" % i * 200 for i in range(80)] * 2
