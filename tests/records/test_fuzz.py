"""Property tests of the record batch codec: malformed input only ever raises
CorruptRecordError, and any record list survives a round trip."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pa = pytest.importorskip("pyarrow")

from logbroker.errors import CorruptRecordError  # noqa: E402
from logbroker.records import (BatchBuilder, Record, decode_batch, read_header,  # noqa: E402
                               scan_batches, stamp)
from logbroker.records import format as fmt  # noqa: E402
from logbroker.records.arrow import to_arrow  # noqa: E402

FUZZ = settings(max_examples=300, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
T0 = 1_700_000_000_000
I32 = (1 << 31) - 1

blobs = st.binary(max_size=12)
nullable_blobs = st.none() | blobs
header_lists = st.lists(st.tuples(st.text(max_size=4), nullable_blobs), max_size=3)
records = st.lists(st.tuples(nullable_blobs, nullable_blobs, header_lists,
                             st.integers(-(1 << 31), I32)), min_size=1, max_size=12)


def build(recs, first_ts: int = T0, **kwargs) -> bytes:
    b = BatchBuilder(**kwargs)
    b.append(recs[0][0], recs[0][1], recs[0][2], first_ts)
    for value, key, headers, delta in recs[1:]:
        b.append(value, key, headers, first_ts + delta)
    return b.build()


def exercise(buf, *, verify: bool) -> None:
    """Decode and read everything; any failure must be a CorruptRecordError."""
    try:
        batch = decode_batch(buf, verify=verify)
    except CorruptRecordError:
        return
    for step in (batch.records, batch.timestamps, lambda: to_arrow(batch, include_headers=True)):
        try:
            out = step()
        except CorruptRecordError:
            continue
        if isinstance(out, pa.RecordBatch):
            out.validate(full=True)
            # every value read back; timestamps as their int64 ms (a valid Arrow timestamp
            # may lie outside Python datetime's years 1-9999, which to_pylist would raise on)
            pa.RecordBatch.from_arrays(
                [c.cast(pa.int64()) if pa.types.is_timestamp(c.type) else c for c in out.columns],
                names=out.schema.names).to_pylist()


def scan_all(buf, *, verify: bool) -> None:
    try:
        for _pos, header in scan_batches(buf, verify=verify):
            assert header.size >= fmt.HEADER_SIZE
    except CorruptRecordError:
        pass


# --- (a) arbitrary bytes ---------------------------------------------------------

@FUZZ
@given(st.binary(max_size=200), st.booleans())
def test_arbitrary_bytes(buf, verify):
    exercise(buf, verify=verify)
    scan_all(buf, verify=verify)


def _plausible_header(attributes: int, count: int, tail: bytes) -> bytes:
    """A header that passes read_header, followed by arbitrary records bytes."""
    size = fmt.HEADER_SIZE + len(tail)
    head = fmt.HEADER.pack(0, size - fmt.LOG_OVERHEAD, 0, fmt.MAGIC, 0, attributes, count - 1,
                           T0, T0, -1, -1, -1, count)
    return head + tail


@FUZZ
@given(st.sampled_from([0, 1, 2]), st.sampled_from([0, 1, 2]), st.booleans(), st.booleans(),
       st.integers(1, 6), st.binary(max_size=160))
def test_valid_header_arbitrary_section(key_mode, value_mode, headers, lat, count, tail):
    attrs = key_mode << fmt.KEY_MODE_SHIFT | value_mode << fmt.VALUE_MODE_SHIFT
    attrs |= (fmt.HAS_HEADERS if headers else 0) | (fmt.LOG_APPEND_TIME if lat else 0)
    exercise(_plausible_header(attrs, count, tail), verify=False)


# --- (b) mutated valid batches, CRC not checked ----------------------------------

def _fix_length(buf: bytearray) -> bytearray:
    if len(buf) >= 12:
        struct.pack_into(">I", buf, 8, max(0, len(buf) - fmt.LOG_OVERHEAD) & 0xFFFFFFFF)
    return buf


mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10_000), st.integers(0, 255)),
    st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
    st.tuples(st.just("insert"), st.integers(0, 10_000), st.binary(min_size=1, max_size=9)),
    st.tuples(st.just("delete"), st.integers(0, 10_000), st.integers(1, 9)),
    st.tuples(st.just("truncate"), st.integers(0, 10_000), st.just(0)),
    st.tuples(st.just("i32"), st.integers(0, 10_000), st.integers(-(1 << 31), I32)),
    st.tuples(st.just("attrs"), st.integers(0, fmt.KNOWN_ATTRIBUTES), st.just(0)),
    st.tuples(st.just("count"), st.integers(1, 40), st.just(0)),
)


def mutate(raw: bytes, ops, fix_length: bool) -> bytes:
    buf = bytearray(raw)
    for op, at, arg in ops:
        pos = at % (len(buf) + 1)
        if op == "set" and pos < len(buf):
            buf[pos] = arg
        elif op == "flip" and pos < len(buf):
            buf[pos] ^= 1 << arg
        elif op == "insert":
            buf[pos:pos] = arg
        elif op == "delete":
            del buf[pos:pos + arg]
        elif op == "truncate":
            del buf[pos:]
        elif op == "i32" and fmt.HEADER_SIZE <= pos <= len(buf) - 4:
            struct.pack_into("<i", buf, pos, arg)  # a plausible-looking offset or count
        elif op == "attrs" and len(buf) >= fmt.HEADER_SIZE and at & 0x37 == 0 and (at >> 6) & 3 != 3 \
                and (at >> 8) & 3 != 3:
            struct.pack_into(">H", buf, 21, at)
        elif op == "count" and len(buf) >= fmt.HEADER_SIZE:
            struct.pack_into(">I", buf, 23, at - 1)
            struct.pack_into(">I", buf, 57, at)
    return bytes(_fix_length(buf) if fix_length else buf)


@FUZZ
@given(records, st.lists(mutation, min_size=1, max_size=4), st.booleans())
def test_mutated_batches(recs, ops, fix_length):
    bad = mutate(build(recs), ops, fix_length)
    exercise(bad, verify=False)
    exercise(bad, verify=True)
    scan_all(bad, verify=False)


@FUZZ
@given(records, records, st.integers(0, 10_000), st.integers(0, 10_000), st.booleans())
def test_spliced_batches(recs_a, recs_b, cut_a, cut_b, fix_length):
    a, b = build(recs_a), build(recs_b, log_append_time=True)
    spliced = bytearray(a[:cut_a % (len(a) + 1)] + b[cut_b % (len(b) + 1):])
    if fix_length:
        _fix_length(spliced)
    exercise(bytes(spliced), verify=False)
    scan_all(bytes(spliced), verify=False)


@FUZZ
@given(records, st.integers(0, 10_000))
def test_truncations(recs, cut):
    raw = build(recs)
    k = cut % len(raw)
    with pytest.raises(CorruptRecordError):
        decode_batch(raw[:k], verify=False)
    assert list(scan_batches(raw[:k])) == []


# --- (c) round trip ---------------------------------------------------------------

@FUZZ
@given(records, st.integers(-(1 << 40), 1 << 45), st.integers(0, (1 << 62)), st.integers(0, (1 << 32) - 1),
       st.integers(-1, (1 << 63) - 1), st.integers(-1, (1 << 15) - 1), st.integers(-1, I32), st.booleans())
def test_round_trip(recs, first_ts, base, epoch, pid, pepoch, seq, lat):
    raw = build(recs, first_ts, producer_id=pid, producer_epoch=pepoch, base_sequence=seq,
                log_append_time=lat)
    b = BatchBuilder()
    for value, key, headers, delta in recs:
        b.append(value, key, headers, first_ts + (delta if b else 0))
    assert b.size_in_bytes >= len(raw)
    raw = stamp(raw, base, epoch) + raw[16:]
    batch = decode_batch(raw)
    h = batch.header
    assert (h.base_offset, h.leader_epoch, h.producer_id, h.producer_epoch, h.base_sequence) == \
        (base, epoch, pid, pepoch, seq)
    assert h.timestamp_type == int(lat) and h.size == len(raw)
    timestamps = [first_ts] + [first_ts + d for *_, d in recs[1:]]
    assert h.first_timestamp == first_ts and h.max_timestamp == max(timestamps)
    want = [Record(base + i, ts, k, v, tuple(hs)) for i, ((v, k, hs, _), ts) in enumerate(zip(recs, timestamps))]
    assert batch.records() == want
    assert read_header(raw) == h and list(scan_batches(raw + raw)) == [(0, h), (len(raw), h)]
    rb = to_arrow(batch, include_headers=True)
    assert rb.column("key").to_pylist() == [r.key for r in want]
    assert rb.column("value").to_pylist() == [r.value for r in want]
    assert rb.column("offset").to_pylist() == [r.offset for r in want]
    us = rb.column("timestamp").cast(pa.int64()).to_pylist()
    assert us == [ts * 1000 for ts in timestamps]
    assert [[(x["key"], x["value"]) for x in hs] for hs in rb.column("headers").to_pylist()] == \
        [list(r.headers) for r in want]
