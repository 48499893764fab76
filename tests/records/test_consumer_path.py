"""The consumer's decoding path (``format.read_fields``, ``records_into``,
``batches_into`` over one partition's batches of a fetch answer)
against the reference path (``read_header``, ``decode_batch`` +
``batch_records``): the same records, and the same errors for damaged
bytes (pure, no broker)."""

from __future__ import annotations

import random

import pytest

from logbroker.client.consumer.records import batch_records, batches_into, records_into
from logbroker.errors import CorruptRecordError
from logbroker.records import decode_batch, format as fmt, read_header, stamp
from logbroker.records.control import marker_batch
from logbroker.records.encoder import encode_batch
from logbroker.records.txn_filter import BatchFilter
from logbroker.records.walker import scan_fields


def _column(rnd: random.Random, n: int, mode: str) -> list:
    if mode == "none":
        return [None] * n
    if mode == "fixed":
        size = rnd.choice([0, 1, 16, 100])
        return [rnd.randbytes(size) for _ in range(n)]
    if mode == "varied":
        return [rnd.randbytes(rnd.randint(0, 9)) for _ in range(n)]
    return [rnd.choice([None, rnd.randbytes(rnd.randint(0, 5))]) for _ in range(n)]


def _batch(rnd: random.Random, base: int = 500) -> bytes:
    n = rnd.choice([1, 2, 7, rnd.randint(1, 60)])
    first = rnd.randint(0, 10**12)
    ts = [first] + [first + rnd.randint(-5000, 5000) for _ in range(n - 1)]
    keys = _column(rnd, n, rnd.choice(["none", "fixed", "varied", "nulls"]))
    values = _column(rnd, n, rnd.choice(["none", "fixed", "fixed", "varied", "nulls"]))
    headers = {i: (("h", b"x"),) for i in range(n) if rnd.random() < 0.1}
    raw = encode_batch(ts, keys, values, headers)
    return stamp(raw, base, 3) + raw[16:]


def _reference(data: bytes, start: int, verify: bool = True):
    """batch_records(decode_batch(...)), or the CorruptRecordError's message."""
    try:
        return batch_records(decode_batch(data, verify=verify), "t", 4, start)
    except CorruptRecordError as exc:
        return exc.message


def _consumer_path(data: bytes, start: int, verify: bool = True):
    out = ["before"]
    try:
        fields = fmt.read_fields(data, 0)
        records_into(out, data, 0, fields, "t", 4, start, verify)
    except CorruptRecordError as exc:
        assert out == ["before"]  # nothing appended on an error
        return exc.message
    return out[1:]


@pytest.mark.parametrize("seed", range(60))
def test_records_into_gives_what_batch_records_gives(seed):
    rnd = random.Random(seed)
    data = _batch(rnd)
    n = read_header(data).record_count
    for start in (0, 500, 500 + rnd.randint(0, n)):
        assert _consumer_path(data, start) == _reference(data, start)


@pytest.mark.parametrize("seed", range(60))
def test_damaged_records_sections_fail_or_decode_alike(seed):
    """Bytes of the records section changed (CRC not checked, as with
    ``check_crcs=False``): both paths raise the same error or give the same
    records, e.g. offsets that no longer describe the layout."""
    rnd = random.Random(10_000 + seed)
    data = bytearray(_batch(rnd))
    for _ in range(rnd.randint(1, 3)):
        pos = rnd.randrange(fmt.HEADER_SIZE, len(data))
        data[pos] = rnd.choice([0, 1, 0xFF, data[pos] ^ (1 << rnd.randrange(8))])
    data = bytes(data)
    assert _consumer_path(data, 0, verify=False) == _reference(data, 0, verify=False)


def test_equal_sized_entries_that_are_not_aligned_are_split_by_their_offsets():
    """Lengths 15 + 17 add up like two 16-byte keys: the offsets decide."""
    keys, values = [b"a" * 15, b"b" * 17], [b"x" * 16, b"y" * 16]
    raw = encode_batch([1, 2], keys, values, {})
    out = []
    records_into(out, raw, 0, fmt.read_fields(raw, 0), "t", 0)
    assert [r.key for r in out] == keys and [r.value for r in out] == values


def test_a_crc_mismatch_is_reported_as_check_crc_reports_it():
    rnd = random.Random(7)
    data = bytearray(_batch(rnd))
    data[-1] ^= 0x40
    data = bytes(data)
    assert "CRC mismatch" in _consumer_path(data, 0)
    assert _consumer_path(data, 0) == _reference(data, 0)
    assert _consumer_path(data, 0, verify=False) == _reference(data, 0, verify=False)


def test_a_batch_longer_than_its_buffer_is_refused():
    data = _batch(random.Random(3))
    fields = fmt.read_fields(data, 0)
    with pytest.raises(CorruptRecordError, match="announces"):
        records_into([], data[:-1], 0, fields, "t", 0)


@pytest.mark.parametrize("seed", range(200))
def test_read_fields_accepts_and_refuses_what_read_header_does(seed):
    rnd = random.Random(seed)
    data = bytearray(_batch(rnd, base=rnd.choice([0, 7, fmt.MAX_OFFSET - 3])))
    for _ in range(rnd.randint(0, 2)):
        pos = rnd.randrange(fmt.HEADER_SIZE)
        data[pos] = rnd.choice([0, 1, 3, 0xFF, data[pos] ^ (1 << rnd.randrange(8))])
    try:
        expected = tuple(read_header(data, 0))
    except CorruptRecordError as exc:
        with pytest.raises(CorruptRecordError) as info:
            fmt.read_fields(data, 0)
        assert info.value.message == exc.message
    else:
        assert fmt.read_fields(data, 0) == expected
    with pytest.raises(CorruptRecordError, match="needs 61 bytes"):
        fmt.read_fields(data[:60], 0)


@pytest.mark.parametrize("keys", [[None] * 3, [b"k1", b"k2", b"k3"]])
@pytest.mark.parametrize("values", [[None] * 3, [b"v" * 100] * 3, [b"a", b"bb", b""]])
def test_keyless_and_valueless_batches_take_the_split_path(monkeypatch, keys, values):
    """Absent columns (every entry null: keyless records, the common case)
    are split like dense ones, without building ``decode_batch``'s objects."""
    import logbroker.client.consumer.records as mod

    def refuse(*_a, **_k):
        raise AssertionError("decode_batch called")
    monkeypatch.setattr(mod, "decode_batch", refuse)
    raw = encode_batch([5, 6, 7], keys, values, {})
    out = []
    records_into(out, raw, 0, fmt.read_fields(raw, 0), "t", 2)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in out] == \
        [(i, 5 + i, k, v) for i, (k, v) in enumerate(zip(keys, values))]


def _chunk(*batches: bytes) -> "tuple[bytes, list]":
    """Batches stamped at consecutive offsets from 0, as one answer's bytes
    of a partition, and their ``scan_fields`` list."""
    out, offset = [], 0
    for raw in batches:
        out.append(stamp(raw, offset, 0) + raw[16:])
        offset += fmt.read_fields(raw, 0)[fmt.F_LAST_OFFSET_DELTA] + 1
    data = b"".join(out)
    return data, list(scan_fields(data))


def test_a_chunk_is_decoded_across_batches_and_stops_at_a_control_batch_after_records():
    """Records of several batches in one call, up to ``want`` (whole
    batches); a control batch after records ends the call, and the next
    call passes it, naming the offset after it; the reference path gives
    the same records."""
    a = encode_batch([1, 2, 3], [None] * 3, [b"a" * 8] * 3, {})
    b = encode_batch([4, 5], [b"k1", b"k2"], [b"b" * 8, None], {})
    c = encode_batch([6], [None], [b"c" * 8], {})
    data, batches = _chunk(a, b, marker_batch(7, 0, True, 0, 9), c)
    skip = BatchFilter().skip_fields
    out: list = []
    assert batches_into(out, data, batches, 0, 4, "t", 2, 0, True, skip) == (2, None, None)
    assert [r.offset for r in out] == [0, 1, 2, 3, 4]  # whole batches: past want
    assert [r.value for r in out] == [b"a" * 8] * 3 + [b"b" * 8, None]
    assert [r.key for r in out] == [None] * 3 + [b"k1", b"k2"]
    assert batches_into(out, data, batches, 2, 100, "t", 2, 5, True, skip) == (2, None, None)
    rest: list = []  # once they are taken: the marker passed, offset 6 named
    assert batches_into(rest, data, batches, 2, 100, "t", 2, 5, True, skip) == (4, 6, None)
    assert [(r.offset, r.value, r.timestamp) for r in rest] == [(6, b"c" * 8, 6)]
    size = fmt.F_BATCH_LENGTH
    reference = [r for pos, f in batches if not f[fmt.F_ATTRIBUTES] & fmt.KAFKA_CONTROL
                 for r in batch_records(decode_batch(data[pos:pos + f[size] + fmt.LOG_OVERHEAD]),
                                        "t", 2)]
    assert out + rest == reference


def test_a_damaged_batch_in_a_chunk_names_its_index_after_the_records_before_it():
    a = encode_batch([1, 2], [None] * 2, [b"a" * 4] * 2, {})
    b = encode_batch([3, 4], [None] * 2, [b"b" * 4] * 2, {})
    data, batches = _chunk(a, b, a)
    damaged = bytearray(data)
    damaged[batches[1][0] + fmt.HEADER_SIZE + 2] ^= 0x01  # a timestamp delta of the second
    out: list = []
    i, passed, error = batches_into(out, bytes(damaged), batches, 0, 100, "t", 0, 0, True,
                                    BatchFilter().skip_fields)
    assert (i, passed, [r.offset for r in out]) == (1, None, [0, 1])
    assert "CRC mismatch" in error.message
    out = []
    assert batches_into(out, bytes(damaged), batches, 0, 100, "t", 0, 0, False,
                        BatchFilter().skip_fields) == (3, None, None)
    assert len(out) == 6  # unchecked, the damaged delta decodes (check_crcs=False)
