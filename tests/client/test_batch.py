"""Client batch codec: producer encoding and consumer decoding (pure, no broker)."""

from __future__ import annotations

import asyncio
import random

import pytest

from logbroker.client.producer.batch import ProducerBatch
from logbroker.client.producer.handles import LoopSignal, RecordMetadata, ThreadSignal, new_handle
from logbroker.client.consumer.records import ConsumerRecord, batch_records
from logbroker.errors import InvalidRecordError, RequestTimedOutError
from logbroker.records import BatchBuilder, decode_batch, stamp
from logbroker.records.encoder import encode_batch


def _item(rnd: random.Random, mode: str):
    if mode == "none":
        return None
    if mode == "all":
        return rnd.randbytes(rnd.randint(0, 6))
    return rnd.choice([None, rnd.randbytes(rnd.randint(0, 6))])


def _random_records(rnd: random.Random):
    n = rnd.randint(1, 30)
    first = rnd.randint(0, 10**12)
    ts = [first] + [first + rnd.randint(-5000, 5000) for _ in range(n - 1)]
    key_mode, value_mode = rnd.choice(["none", "all", "some"]), rnd.choice(["none", "all", "some"])
    keys = [_item(rnd, key_mode) for _ in range(n)]
    values = [_item(rnd, value_mode) for _ in range(n)]
    headers = {}
    if rnd.random() < 0.5:
        for i in range(n):
            if rnd.random() < 0.4:
                headers[i] = tuple((rnd.choice(["a", "é", ""]), rnd.choice([None, b"", b"xy"]))
                                   for _ in range(rnd.randint(1, 3)))
    return ts, keys, values, headers


@pytest.mark.parametrize("seed", range(40))
def test_batch_builder_builds_what_the_producer_sends(seed):
    """The tests' BatchBuilder (record at a time) and the producer's batch
    (parallel lists, sparse headers) give the same bytes: one encoder."""
    rnd = random.Random(seed)
    ts, keys, values, headers = _random_records(rnd)
    builder = BatchBuilder(producer_id=7, producer_epoch=2, base_sequence=11)
    for i, t in enumerate(ts):
        builder.append(values[i], keys[i], headers.get(i, ()), t)
    batch = ProducerBatch("t", 0, 0.0, ThreadSignal())
    batch.timestamps, batch.keys, batch.values, batch.headers = ts, keys, values, headers
    assert batch.encode(producer_id=7, producer_epoch=2, base_sequence=11) == builder.build()


@pytest.mark.parametrize("seed", range(40))
def test_bulk_decoding_matches_record_by_record_decoding(seed):
    rnd = random.Random(1000 + seed)
    ts, keys, values, headers = _random_records(rnd)
    raw = encode_batch(ts, keys, values, headers)
    raw = stamp(raw, 500, 3) + raw[16:]
    batch = decode_batch(raw)
    expected = [ConsumerRecord("t", 4, r.offset, r.timestamp, r.key, r.value, r.headers)
                for r in batch.records()]
    assert batch_records(batch, "t", 4) == expected
    start = 500 + rnd.randint(0, len(ts))
    assert batch_records(batch, "t", 4, start) == [r for r in expected if r.offset >= start]


def test_empty_batch_is_refused():
    with pytest.raises(InvalidRecordError):
        encode_batch([], [], [], {})


def _batch(n=3, signal=None) -> ProducerBatch:
    b = ProducerBatch("t", 1, 0.0, signal or ThreadSignal())
    for i in range(n):
        b.timestamps.append(1000 + i)
        b.keys.append(None)
        b.values.append(b"v%d" % i)
    return b


def test_handle_offset_is_base_plus_index_and_resolves_once():
    b = _batch()
    handles = [new_handle(b, i) for i in range(3)]
    calls = []
    handles[0].add_done_callback(lambda h: calls.append(h))
    assert not handles[1].done()
    b.complete(40, None)
    b.complete(99, RequestTimedOutError("late"))  # ignored: already resolved
    assert [h.result(0) for h in handles] == [RecordMetadata("t", 1, 40 + i, 1000 + i)
                                             for i in range(3)]
    assert handles[2].exception() is None
    handles[1].add_done_callback(lambda h: calls.append(h))  # after completion: runs now
    assert calls == [handles[0], handles[1]]
    assert b.data is None  # bytes released once acknowledged


def test_handle_raises_the_batch_error_and_times_out_while_pending():
    b = _batch()
    h = new_handle(b, 0)
    with pytest.raises(TimeoutError):
        h.result(0.01)
    b.complete(-1, RequestTimedOutError("t[1]: gave up"))
    with pytest.raises(RequestTimedOutError, match="gave up"):
        h.result()
    assert isinstance(h.exception(), RequestTimedOutError)
    assert (h.topic, h.partition, h.timestamp) == ("t", 1, 1000)


def test_a_failing_callback_does_not_break_completion(caplog):
    b = _batch()
    h = new_handle(b, 0)
    h.add_done_callback(lambda _: 1 / 0)
    b.complete(5, None)
    assert h.result(0).offset == 5
    assert "callback failed" in caplog.text


def test_loop_signal_makes_handles_awaitable():
    async def main():
        loop = asyncio.get_running_loop()
        b = _batch(2, LoopSignal(loop))
        h = new_handle(b, 1)
        with pytest.raises(RuntimeError):
            h.result()  # not delivered yet: await instead
        loop.call_soon(b.complete, 10, None)
        return await h

    assert asyncio.run(main()) == RecordMetadata("t", 1, 11, 1001)


def test_encoded_batch_carries_the_idempotence_fields():
    b = _batch(4)
    raw = b.encode(producer_id=12, producer_epoch=0, base_sequence=40)
    header = decode_batch(raw).header
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (12, 0, 40)
    assert header.record_count == 4 and b.data == raw
