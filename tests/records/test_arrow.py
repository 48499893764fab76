"""Record batches as Arrow arrays (src/logbroker/records/arrow.py)."""

from __future__ import annotations

import struct
from datetime import datetime, timezone

import crc32c
import pytest

pa = pytest.importorskip("pyarrow")

from tests.support.fixtures import RECORDS, T0

from logbroker.errors import CorruptRecordError  # noqa: E402
from logbroker.records import HEADER_SIZE, build_batch, decode_batch, stamp  # noqa: E402
from logbroker.records import format as fmt  # noqa: E402
from logbroker.records.arrow import HEADERS_TYPE, Piece, pieces_timestamps, to_arrow  # noqa: E402

SCHEMA = [
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("offset", pa.int64()),
    ("timestamp", pa.timestamp("us", tz="UTC")),
    ("timestampType", pa.int32()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
]


def patch(buf: bytes, pos: int, fmt_: str, value: int) -> bytes:
    out = bytearray(buf)
    struct.pack_into(fmt_, out, pos, value)
    struct.pack_into(">I", out, fmt.CRC_OFFSET, crc32c.crc32c(bytes(out[fmt.CRC_START:])))
    return bytes(out)


def ms(ts: datetime) -> int:
    delta = ts - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def test_schema_types_exactly():
    rb = to_arrow(decode_batch(build_batch(RECORDS)), include_headers=True)
    assert [(f.name, f.type) for f in rb.schema] == SCHEMA
    assert HEADERS_TYPE == SCHEMA[-1][1]
    rb.validate(full=True)
    plain = to_arrow(decode_batch(build_batch(RECORDS)))
    assert [(f.name, f.type) for f in plain.schema] == SCHEMA[:-1]


@pytest.mark.parametrize("recs", [
    RECORDS,
    [(b"a", None, (), T0), (b"b", None, (), T0)],  # keys absent, no headers
    [(None, None, (), T0), (None, None, (), T0 + 1)],  # keys and values absent
    [(None, b"", [("k", None)], T0)],  # values absent, all header values null
])
def test_values_equal_records(recs):
    raw = stamp(build_batch(recs), 5000, 9)
    raw += build_batch(recs)[16:]
    batch = decode_batch(raw)
    rb = to_arrow(batch, include_headers=True)
    assert rb.num_rows == len(batch)
    records = batch.records()
    assert rb.column("key").to_pylist() == [r.key for r in records]
    assert rb.column("value").to_pylist() == [r.value for r in records]
    assert rb.column("offset").to_pylist() == [r.offset for r in records] == list(range(5000, 5000 + len(recs)))
    assert [ms(t) for t in rb.column("timestamp").to_pylist()] == [r.timestamp for r in records]
    assert rb.column("timestampType").to_pylist() == [0] * len(recs)
    assert [[(h["key"], h["value"]) for h in hs] for hs in rb.column("headers").to_pylist()] == \
        [list(r.headers) for r in records]


def test_all_null_columns_are_typed_nulls():
    rb = to_arrow(decode_batch(build_batch([(None, None, (), T0)] * 3)))
    for name in ("key", "value"):
        col = rb.column(name)
        assert col.type == pa.binary() and col.null_count == 3


def test_log_append_time_is_timestamp_type_1():
    rb = to_arrow(decode_batch(build_batch([(b"x", None, (), T0)] * 4, log_append_time=True)))
    assert rb.column("timestampType").to_pylist() == [1] * 4


def test_offsets_beyond_cached_range():
    recs = [(b"%d" % i, None, (), T0 + i) for i in range(5000)]
    raw = build_batch(recs)
    batch = decode_batch(stamp(raw, 1 << 40, 0) + raw[16:])
    rb = to_arrow(batch)
    assert rb.column("offset").to_pylist() == list(range(1 << 40, (1 << 40) + 5000))
    assert rb.column("value").to_pylist() == [v for v, *_ in recs]


def test_value_buffers_point_into_the_batch():
    raw = build_batch(RECORDS)
    base = pa.py_buffer(raw).address
    batch = decode_batch(raw)
    rb = to_arrow(batch, include_headers=True)

    def same_memory(buf, view: memoryview) -> bool:
        assert view.obj is raw  # the decoder's view is a slice of the batch
        start = pa.py_buffer(view).address
        return buf.address == start and buf.size == len(view) and base <= start < base + len(raw)

    value_bufs = rb.column("value").buffers()  # [validity, offsets, data]
    assert same_memory(value_bufs[0], batch.values.validity)
    assert same_memory(value_bufs[1], batch.values.offsets)
    assert same_memory(value_bufs[2], batch.values.data)
    key_bufs = rb.column("key").buffers()
    assert same_memory(key_bufs[1], batch.keys.offsets) and same_memory(key_bufs[2], batch.keys.data)
    # data bytes of record 0 sit exactly where the batch holds them
    assert value_bufs[2].address == base + raw.index(b"v0\x00\xff")


def test_header_arrays_share_the_batch_memory():
    raw = build_batch(RECORDS)
    base = pa.py_buffer(raw).address
    headers = to_arrow(decode_batch(raw), include_headers=True).column("headers")
    items = headers.values
    for arr in (items.field("key"), items.field("value")):
        for buf in arr.buffers()[1:]:
            assert base <= buf.address < base + len(raw)


def test_timestamps_out_of_order():
    rb = to_arrow(decode_batch(build_batch(RECORDS)))
    assert [ms(t) for t in rb.column("timestamp").to_pylist()] == [ts for *_, ts in RECORDS]


def test_timestamp_not_representable_in_microseconds():
    batch = decode_batch(build_batch([(b"v", None, (), 1 << 62)]))
    assert batch.records()[0].timestamp == 1 << 62
    with pytest.raises(CorruptRecordError, match="timestamp"):
        to_arrow(batch)


def test_timestamps_of_several_pieces_are_each_batchs_own():
    """Several batches' ranges in one column: each record keeps its own
    batch's first timestamp plus its delta (run-end spread, not the first
    batch's base for all)."""
    a = decode_batch(build_batch([(b"v", None, (), 1_000 + i) for i in range(5)]))
    b = decode_batch(build_batch([(b"v", None, (), 9_000_000 - i) for i in range(4)]))
    c = decode_batch(build_batch([(b"v", None, (), 42)]))
    pieces = [Piece(a, 1, 4), Piece(b, 0, 4), Piece(c, 0, 1), Piece(a, 4, 5)]
    want = [1_001, 1_002, 1_003, 9_000_000, 8_999_999, 8_999_998, 8_999_997, 42, 1_004]
    assert [ms(t) for t in pieces_timestamps(pieces).to_pylist()] == want
    assert [ms(t) for t in pieces_timestamps([Piece(b, 2, 4)]).to_pylist()] == want[5:7]


def test_timestamp_overflow_in_a_later_piece_is_corrupt():
    ok = decode_batch(build_batch([(b"v", None, (), 5)]))
    big = decode_batch(build_batch([(b"v", None, (), 1 << 62)]))
    with pytest.raises(CorruptRecordError, match="timestamp"):
        pieces_timestamps([Piece(ok, 0, 1), Piece(big, 0, 1)])


def test_corrupt_offsets_raise_corrupt_record_error():
    raw = build_batch([(b"ab", b"k", (), T0), (b"cd", b"l", (), T0)])
    keys_at = HEADER_SIZE + 8
    batch = decode_batch(patch(raw, keys_at + 4, "<i", 5))  # key offsets [0, 5, 2]
    with pytest.raises(CorruptRecordError):
        to_arrow(batch)


def test_corrupt_header_counts_raise_corrupt_record_error():
    raw = build_batch([(b"a", None, [("k", b"v")], T0), (b"b", None, [("k", b"v")], T0)])
    counts_at = HEADER_SIZE + 8 + 12 + 2
    for bad in (3, -1):  # header counts [0, 3, 2] and [0, -1, 2]
        batch = decode_batch(patch(raw, counts_at + 4, "<i", bad))
        to_arrow(batch)  # headers not asked for: fine
        with pytest.raises(CorruptRecordError):
            to_arrow(batch, include_headers=True)


def test_non_utf8_header_key_raises_corrupt_record_error():
    raw = build_batch([(b"a", None, [("k", b"v")], T0), (b"b", None, [("k", b"v")], T0)])
    key_data_at = HEADER_SIZE + 8 + 12 + 2 + 12 + 12
    batch = decode_batch(patch(raw, key_data_at, ">B", 0xFF))
    with pytest.raises(CorruptRecordError):
        to_arrow(batch, include_headers=True)
