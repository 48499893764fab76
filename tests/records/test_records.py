"""Unit tests of the record batch codec (src/logbroker/records, docs/format.md)."""

from __future__ import annotations

import struct
import time

import crc32c
import pytest
from tests.support.fixtures import RECORDS, T0

from logbroker.errors import CorruptRecordError, InvalidRecordError
from logbroker.records import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    BatchBuilder,
    Record,
    build_batch,
    check_crc,
    decode_batch,
    read_header,
    scan_batches,
    stamp,
)
from logbroker.records import format as fmt


def reseal(buf: bytes) -> bytes:
    """``buf`` with its CRC recomputed (to reach checks that come after the CRC)."""
    crc = crc32c.crc32c(buf[fmt.CRC_START:])
    return buf[:fmt.CRC_OFFSET] + struct.pack(">I", crc) + buf[fmt.CRC_START:]


def patch(buf: bytes, pos: int, fmt_: str, value: int, *, crc: bool = True) -> bytes:
    size = struct.calcsize(fmt_)
    out = buf[:pos] + struct.pack(fmt_, value) + buf[pos + size:]
    return reseal(out) if crc else out


def as_records(batch) -> list[tuple]:
    return [(r.value, r.key, list(r.headers), r.timestamp) for r in batch.records()]


def expected(records, base: int = 0) -> list[Record]:
    return [Record(base + i, ts, k, v, tuple(h)) for i, (v, k, h, ts) in enumerate(records)]


# --- round trips -------------------------------------------------------------

def test_round_trip_full_record_set():
    raw = build_batch(RECORDS)
    batch = decode_batch(raw)
    assert batch.records() == expected(RECORDS)
    assert len(batch) == len(RECORDS)
    h = batch.header
    assert (h.base_offset, h.leader_epoch, h.magic) == (0, 0, MAGIC)
    assert h.size == len(raw) == h.batch_length + LOG_OVERHEAD
    assert h.record_count == 5 and h.last_offset_delta == 4 and h.next_offset == 5
    assert h.first_timestamp == T0 and h.max_timestamp == T0 + (1 << 31) - 1
    assert h.timestamp_type == 0
    assert batch.timestamps() == [ts for *_, ts in RECORDS]
    assert h.attributes & fmt.HAS_HEADERS
    assert (h.attributes >> fmt.KEY_MODE_SHIFT) & 3 == fmt.COL_NULLABLE
    assert (h.attributes >> fmt.VALUE_MODE_SHIFT) & 3 == fmt.COL_NULLABLE


def test_values_only_default_timestamps_and_producer_fields():
    before = int(time.time() * 1000)
    raw = build_batch([b"a", b"bb", b"ccc"])
    after = int(time.time() * 1000)
    batch = decode_batch(raw)
    assert [r.value for r in batch.records()] == [b"a", b"bb", b"ccc"]
    assert [r.key for r in batch.records()] == [None] * 3
    assert all(before <= ts <= after for ts in batch.timestamps())
    h = batch.header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (-1, -1, -1)
    assert (h.attributes >> fmt.KEY_MODE_SHIFT) & 3 == fmt.COL_ABSENT
    assert (h.attributes >> fmt.VALUE_MODE_SHIFT) & 3 == fmt.COL_DENSE
    assert not h.attributes & fmt.HAS_HEADERS
    assert batch.header_counts is None and batch.header_keys is None


@pytest.mark.parametrize("pid,epoch,seq", [(0, 0, 0), (1 << 40, 7, 1234), ((1 << 63) - 1, 32767, (1 << 31) - 1)])
def test_producer_fields(pid, epoch, seq):
    raw = build_batch([(b"x", None, (), T0)], producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    h = decode_batch(raw).header
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (pid, epoch, seq)


def test_log_append_time_attribute():
    raw = build_batch([(b"x", None, (), T0)], log_append_time=True)
    h = decode_batch(raw).header
    assert h.attributes & fmt.LOG_APPEND_TIME and h.timestamp_type == 1


@pytest.mark.parametrize("keys,values,key_mode,value_mode", [
    ([None, None], [None, None], fmt.COL_ABSENT, fmt.COL_ABSENT),
    ([b"", b""], [b"", b""], fmt.COL_DENSE, fmt.COL_DENSE),
    ([None, b""], [b"", None], fmt.COL_NULLABLE, fmt.COL_NULLABLE),
    ([b"k", b"k"], [None, None], fmt.COL_DENSE, fmt.COL_ABSENT),
])
def test_column_modes_and_null_vs_empty(keys, values, key_mode, value_mode):
    recs = [(v, k, (), T0) for k, v in zip(keys, values)]
    batch = decode_batch(build_batch(recs))
    attrs = batch.header.attributes
    assert ((attrs >> fmt.KEY_MODE_SHIFT) & 3, (attrs >> fmt.VALUE_MODE_SHIFT) & 3) == (key_mode, value_mode)
    assert [r.key for r in batch.records()] == keys
    assert [r.value for r in batch.records()] == values


def test_all_null_header_values_and_unicode_keys():
    hdrs = [("\u65e5\u672c", None), ("\U0001f600", None)]
    batch = decode_batch(build_batch([(b"v", None, hdrs, T0), (b"w", None, [], T0)]))
    assert [r.headers for r in batch.records()] == [tuple(hdrs), ()]


def test_large_batch_round_trip():
    recs = [(b"%d" % i * (i % 7), None if i % 3 else b"k%d" % i, [], T0 + i) for i in range(2000)]
    assert decode_batch(build_batch(recs)).records() == expected(recs)


def test_decode_accepts_bytearray_memoryview_and_position():
    raw = build_batch(RECORDS)
    for buf in (bytearray(raw), memoryview(raw)):
        assert decode_batch(buf).records() == expected(RECORDS)
    assert decode_batch(b"\xaa" * 7 + raw, 7).records() == expected(RECORDS)


def test_columns_are_views_into_the_buffer():
    raw = bytearray(build_batch(RECORDS))
    batch = decode_batch(raw)
    assert batch.values.data.obj is raw and batch.keys.offsets.obj is raw
    raw[-1] ^= 0xFF  # mutating the buffer shows through the (unchecked) view
    assert batch.header_values.data[-1] == raw[-1]


def test_builder_rejects_bad_input():
    with pytest.raises(InvalidRecordError):
        BatchBuilder().build()
    with pytest.raises(InvalidRecordError):
        build_batch([(b"v", None, [(b"bytes-key", b"v")], T0)])
    b = BatchBuilder()
    b.append(b"v", timestamp_ms=T0)
    with pytest.raises(InvalidRecordError):
        b.append(b"v", timestamp_ms=T0 + (1 << 31))
    with pytest.raises(InvalidRecordError):
        b.append(b"v", timestamp_ms=T0 - (1 << 31) - 1)
    assert len(b) == 1


@pytest.mark.parametrize("recs", [
    [(b"v", None, (), T0)],
    [(b"v", b"k", [("k", b"v")], T0)],
    [(b"v", b"k" if i % 2 else None, [("k", b"v")] * (i % 4), T0) for i in range(100)],
    [(None, None, [("", None)], T0)] * 10,
])
def test_size_in_bytes_is_an_upper_bound(recs):
    b = BatchBuilder()
    for r in recs:
        b.append(*r)
    assert b.size_in_bytes >= len(b.build())


# --- corruption ----------------------------------------------------------------

def test_every_truncated_prefix_is_corrupt():
    raw = build_batch(RECORDS)
    for k in range(len(raw)):
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:k])
        with pytest.raises(CorruptRecordError):
            decode_batch(raw[:k], verify=False)


@pytest.mark.parametrize("extra", [b"\x00", b"garbage", bytes(100)])
def test_trailing_bytes_are_corrupt(extra):
    with pytest.raises(CorruptRecordError, match="announces"):
        decode_batch(build_batch(RECORDS) + extra)


def test_every_byte_flip_in_crc_region_is_a_crc_error():
    raw = build_batch(RECORDS)
    for pos in range(fmt.CRC_START, len(raw)):
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        hdr = fmt.BatchHeader(*fmt.HEADER.unpack_from(bad))  # unvalidated
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            check_crc(bad, 0, hdr)
        with pytest.raises(CorruptRecordError):
            decode_batch(bad)
        if pos >= HEADER_SIZE:  # header stays valid: the CRC is what catches it
            with pytest.raises(CorruptRecordError, match="CRC mismatch"):
                decode_batch(bad)


def test_flips_outside_crc_region():
    raw = build_batch(RECORDS)
    for pos in [*range(0, 8), *range(12, 16)]:  # base offset, leader epoch: not covered
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        assert decode_batch(bad).records()[0].value == b"v0"
    for pos in [*range(8, 12), 16, *range(17, 21)]:  # length, magic, the CRC itself
        bad = bytearray(raw)
        bad[pos] ^= 0x01
        with pytest.raises(CorruptRecordError):
            decode_batch(bad)


@pytest.mark.parametrize("pos,fmt_,value,match", [
    (16, ">B", 0, "magic"),
    (16, ">B", 2, "magic"),
    (8, ">I", HEADER_SIZE - LOG_OVERHEAD - 1, "length"),
    (8, ">I", 1 << 31, "length"),
    (21, ">H", 0x0001, "attributes"),  # compression
    (21, ">H", 0x0010, "attributes"),  # another encoding
    (21, ">H", 0x2000, "attributes"),  # unknown bit
    (21, ">H", 3 << fmt.KEY_MODE_SHIFT, "column mode"),
    (21, ">H", 3 << fmt.VALUE_MODE_SHIFT, "column mode"),
    (23, ">I", 0, "record count"),
    (57, ">I", 0, "record count"),
    (35, ">q", T0 - 1, "max timestamp"),
    (0, ">Q", 1 << 63, "offset"),
])
def test_header_field_out_of_domain(pos, fmt_, value, match):
    bad = patch(build_batch([(b"a", None, (), T0), (b"b", None, (), T0)]), pos, fmt_, value)
    with pytest.raises(CorruptRecordError, match=match):
        read_header(bad)
    with pytest.raises(CorruptRecordError, match=match):
        decode_batch(bad)


def test_last_offset_may_reach_but_not_pass_max_offset():
    raw = build_batch([(b"a", None, (), T0), (b"b", None, (), T0)])
    ok = stamp(raw, fmt.MAX_OFFSET - 1, 0) + raw[16:]
    assert decode_batch(ok).header.last_offset == fmt.MAX_OFFSET
    with pytest.raises(CorruptRecordError, match="offset"):
        decode_batch(stamp(raw, fmt.MAX_OFFSET, 0) + raw[16:])


def test_layout_errors_with_valid_crc():
    raw = build_batch([(b"ab", b"k", (), T0), (b"cd", b"l", (), T0)])
    keys_at = HEADER_SIZE + 8  # after two timestamp deltas: key offsets [0, 1, 2]
    with pytest.raises(CorruptRecordError, match="start at 0"):
        decode_batch(patch(raw, keys_at, "<i", 1))
    with pytest.raises(CorruptRecordError, match="too short"):
        decode_batch(patch(raw, keys_at + 8, "<i", 1000))
    with pytest.raises(CorruptRecordError, match="too short"):
        decode_batch(patch(raw, keys_at + 8, "<i", -1))
    longer = reseal(patch(raw + b"\x00", 8, ">I", len(raw) + 1 - LOG_OVERHEAD, crc=False))
    with pytest.raises(CorruptRecordError, match="unexpected bytes"):
        decode_batch(longer)
    # offsets out of order in the middle: decodes (zero-copy), fails on access
    batch = decode_batch(patch(raw, keys_at + 4, "<i", 5))
    with pytest.raises(CorruptRecordError, match="out of order"):
        batch.records()


def test_header_section_errors_with_valid_crc():
    raw = build_batch([(b"a", None, [("k", b"v")], T0), (b"b", None, [("k", b"v")], T0)])
    counts_at = HEADER_SIZE + 8 + 4 * 3 + 2  # deltas, value offsets + data
    assert struct.unpack_from("<3i", raw, counts_at) == (0, 1, 2)
    with pytest.raises(CorruptRecordError, match="header counts"):
        decode_batch(patch(raw, counts_at, "<i", 1))
    with pytest.raises(CorruptRecordError):
        decode_batch(patch(raw, counts_at + 8, "<i", -1))
    batch = decode_batch(patch(raw, counts_at + 4, "<i", 3))
    with pytest.raises(CorruptRecordError, match="header counts"):
        batch.records()
    key_data_at = counts_at + 12 + 12  # header key offsets [0, 1, 2], then "kk"
    batch = decode_batch(patch(raw, key_data_at, ">B", 0xFF))
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        batch.records()


# --- scan_batches --------------------------------------------------------------

def _log(n: int = 4) -> tuple[bytes, list[int]]:
    batches = [build_batch([(b"v%d" % j, None, [("i", b"%d" % i)] * (i % 2), T0) for j in range(i + 1)])
               for i in range(n)]
    starts, pos = [], 0
    for b in batches:
        starts.append(pos)
        pos += len(b)
    return b"".join(batches), starts


def test_scan_whole_log():
    log, starts = _log()
    found = list(scan_batches(log))
    assert [p for p, _ in found] == starts
    assert [h.record_count for _, h in found] == [1, 2, 3, 4]
    assert sum(h.size for _, h in found) == len(log)
    assert [p for p, _ in scan_batches(log, starts[2])] == starts[2:]
    assert list(scan_batches(b"")) == []


def test_scan_every_growing_prefix():
    log, starts = _log()
    ends = starts[1:] + [len(log)]
    for k in range(len(log) + 1):
        want = [s for s, e in zip(starts, ends) if e <= k]
        assert [p for p, _ in scan_batches(log[:k])] == want
        assert [p for p, _ in scan_batches(log[:k], verify=False)] == want


def _scan_until_error(buf) -> tuple[list[int], "CorruptRecordError | None"]:
    seen = []
    try:
        for pos, _ in scan_batches(buf):
            seen.append(pos)
    except CorruptRecordError as exc:
        return seen, exc
    return seen, None


@pytest.mark.parametrize("garbage", [b"\x00" * 60, b"\xff" * 7, b"x" * 61, bytes(200), b"\x01" * 500])
def test_scan_with_garbage_tail(garbage):
    log, starts = _log()
    seen, err = _scan_until_error(log + garbage)
    assert seen == starts
    if len(garbage) < HEADER_SIZE:
        assert err is None  # an incomplete tail: stop silently
    else:
        assert err is not None and f"position {len(log)}" in str(err)


def test_scan_header_announcing_more_than_present_is_an_incomplete_tail():
    log, starts = _log()
    torn = build_batch([(b"x" * 100, None, (), T0)])[:80]
    assert [p for p, _ in scan_batches(log + torn)] == starts


def test_scan_crc_error_in_the_middle():
    log, starts = _log()
    bad = bytearray(log)
    bad[starts[2] + HEADER_SIZE] ^= 0x80
    seen, err = _scan_until_error(bad)
    assert seen == starts[:2] and "CRC mismatch" in str(err) and f"position {starts[2]}" in str(err)
    assert [p for p, _ in scan_batches(bad, verify=False)] == starts


# --- stamp -----------------------------------------------------------------------

def test_stamp_sets_base_offset_and_epoch_keeping_crc():
    raw = build_batch(RECORDS)
    head = stamp(raw, 1_000_000, 42)
    assert len(head) == fmt.STAMP_SIZE == 16
    assert stamp(raw[:16], 1_000_000, 42) == head  # the first 16 bytes suffice
    stamped = head + raw[16:]
    assert stamped[fmt.CRC_OFFSET:] == raw[fmt.CRC_OFFSET:]
    batch = decode_batch(stamped)  # CRC verified
    h = batch.header
    assert (h.base_offset, h.leader_epoch, h.batch_length) == (1_000_000, 42, len(raw) - LOG_OVERHEAD)
    assert (h.last_offset, h.next_offset) == (1_000_004, 1_000_005)
    assert batch.records() == expected(RECORDS, base=1_000_000)


def test_stamp_in_place_inside_a_log():
    log, starts = _log()
    buf = bytearray(log)
    next_offset = 100
    for pos, h in list(scan_batches(buf)):
        buf[pos:pos + 16] = stamp(buf[pos:pos + 16], next_offset, 3)
        next_offset += h.record_count
    offsets = [r.offset for pos, h in scan_batches(buf)
               for r in decode_batch(memoryview(buf)[pos:pos + h.size]).records()]
    assert offsets == list(range(100, 110))


DOC_DUMP = """
0000  00 00 00 00 00 00 00 2a 00 00 00 75 00 00 00 03
0010  01 d8 70 39 46 06 80 00 00 00 01 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 05 00 00 00 00 00
0030  00 00 07 00 00 00 00 00 00 00 00 00 02 00 00 00
0040  00 05 00 00 00 01 00 00 00 00 01 00 00 00 01 00
0050  00 00 6b 01 00 00 00 00 02 00 00 00 02 00 00 00
0060  68 69 00 00 00 00 01 00 00 00 01 00 00 00 00 00
0070  00 00 01 00 00 00 68 01 00 00 00 00 01 00 00 00
0080  78
"""


def test_worked_example_in_docs():
    """docs/format.md section 8 shows these exact bytes."""
    raw = build_batch([(b"hi", b"k", [("h", b"x")], T0), (None, None, [], T0 + 5)],
                      producer_id=7, producer_epoch=0, base_sequence=0)
    raw = stamp(raw, 42, 3) + raw[16:]
    assert raw == bytes.fromhex("".join(line[6:] for line in DOC_DUMP.strip().splitlines()))
    restamped = stamp(raw, 1000, 4) + raw[16:]
    assert [i for i in range(len(raw)) if raw[i] != restamped[i]] == [6, 7, 15]
