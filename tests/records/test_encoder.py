"""The one batch encoder (records/encoder.py): a record set the format cannot
hold is refused with InvalidRecordError naming the problem, never
struct.error / OverflowError / TypeError; whatever it accepts decodes back."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logbroker.client.producer.batch import ProducerBatch
from logbroker.client.producer.handles import ThreadSignal
from logbroker.errors import InvalidRecordError
from logbroker.records import Record, build_batch, decode_batch
from logbroker.records import format as fmt
from logbroker.records.encoder import encode_batch, size_bound

T0 = 1_700_000_000_000
I32 = (1 << 31) - 1
I64 = (1 << 63) - 1


@pytest.mark.parametrize("timestamps, keys, values, headers, kwargs, match", [
    ([T0, T0 + I32 + 1], [None] * 2, [b"a"] * 2, {}, {}, "more than 2\\^31-1 ms from the batch's first"),
    ([T0, T0 - I32 - 2], [None] * 2, [b"a"] * 2, {}, {}, "more than 2\\^31-1 ms"),
    ([T0, T0 + (1 << 40)], [None] * 2, [b"a"] * 2, {}, {}, "put it in another batch"),
    ([I64 + 1], [None], [b"a"], {}, {}, "outside int64"),
    ([-I64 - 2], [None], [b"a"], {}, {}, "outside int64"),
    ([T0, 1.5], [None] * 2, [b"a"] * 2, {}, {}, "timestamp must be an int"),
    (["now"], [None], [b"a"], {}, {}, "timestamp must be an int"),
    ([T0], [None], ["text"], {}, {}, "value #0 must be bytes or None, got str"),
    ([T0, T0], [b"k", 7], [b"a", b"b"], {}, {}, "key #1 must be bytes or None, got int"),
    ([T0], [None], [b"a"], {0: ((b"k", b"v"),)}, {}, "header key of record #0 must be str"),
    ([T0], [None], [b"a"], {0: (("\ud800", b"v"),)}, {}, "not valid Unicode"),
    ([T0], [None], [b"a"], {0: (("k", "v"),)}, {}, "header value #0 must be bytes"),
    ([T0, T0], [None] * 2, [b"a"] * 2, {1: (("k",),)}, {}, "header of record #1 must be a \\(str, bytes"),
    ([T0], [None], [b"a"], {0: (("k", b"v", b"w"),)}, {}, "header of record #0 must be a \\(str, bytes"),
    ([T0], [None], [b"a"], {}, {"producer_id": 1 << 63}, "producer fields out of range"),
    ([T0], [None], [b"a"], {}, {"producer_epoch": 1 << 15}, "producer_epoch"),
    ([T0], [None], [b"a"], {}, {"base_sequence": 1 << 31}, "base_sequence"),
    ([T0, T0], [None], [b"a"] * 2, {}, {}, "one of each per record"),
    ([], [], [], {}, {}, "at least one record"),
])
def test_refused_with_a_clear_error(timestamps, keys, values, headers, kwargs, match):
    with pytest.raises(InvalidRecordError, match=match):
        encode_batch(timestamps, keys, values, headers, **kwargs)


def test_the_producer_batch_refuses_what_it_cannot_hold():
    """The sender's path (ProducerBatch.encode) gets the same clear error."""
    batch = ProducerBatch("t", 0, 0.0, ThreadSignal())
    batch.timestamps, batch.keys, batch.values = [T0, T0 + I32 + 1], [None, None], [b"a", b"b"]
    with pytest.raises(InvalidRecordError, match="int32 deltas"):
        batch.encode(producer_id=1, producer_epoch=0, base_sequence=0)
    assert batch.data is None


def test_the_widest_timestamp_span_is_held():
    for low, high in ((T0, T0 + I32), (T0, T0 - I32 - 1), (-I64 - 1, -I64 - 1 + I32), (I64 - I32, I64)):
        raw = encode_batch([low, high], [None, None], [b"a", b"b"], {})
        assert decode_batch(raw).timestamps() == [low, high]


def test_headers_flag_only_when_a_record_has_a_header():
    bare = encode_batch([T0, T0], [None] * 2, [b"a", b"b"], {})
    assert encode_batch([T0, T0], [None] * 2, [b"a", b"b"], {0: (), 1: ()}) == bare
    assert not decode_batch(bare).header.attributes & fmt.HAS_HEADERS
    assert build_batch([(b"a", None, (), T0), (b"b", None, [], T0)]) == bare


anything = st.one_of(st.none(), st.binary(max_size=6), st.text(max_size=3), st.integers(), st.floats())
timestamps = st.one_of(st.integers(-(1 << 64), 1 << 64), st.integers(T0 - (1 << 32), T0 + (1 << 32)),
                       st.floats(allow_nan=False), st.none())


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(timestamps, anything, anything,
                          st.lists(st.tuples(anything, anything), max_size=2)), min_size=1, max_size=8),
       st.integers(-(1 << 64), 1 << 64))
def test_any_input_is_encoded_faithfully_or_refused(recs, producer_id):
    ts = [r[0] for r in recs]
    keys, values = [r[1] for r in recs], [r[2] for r in recs]
    headers = {i: tuple(r[3]) for i, r in enumerate(recs) if r[3]}
    try:
        raw = encode_batch(ts, keys, values, headers, producer_id=producer_id)
    except InvalidRecordError as exc:
        assert "\n" not in str(exc)
        return
    batch = decode_batch(raw)
    assert batch.header.producer_id == producer_id
    assert batch.records() == [Record(i, t, k, v, tuple(headers.get(i, ())))
                               for i, (t, k, v) in enumerate(zip(ts, keys, values))]
    data = sum(len(x) for x in keys + values if x is not None)
    pairs = [p for hs in headers.values() for p in hs]
    data += sum(len(k.encode()) + len(v or b"") for k, v in pairs)
    assert len(raw) <= size_bound(len(ts), data, len(pairs))
