"""Produce v0-2 and legacy message sets (magic 0 / 1), up-converted to one
Kafka batch v2 (kafka/legacy_messages.py, docs/kafka.md §4.8, decision 81).

The message sets are written by kafka-python's own legacy encoder
(``LegacyRecordBatchBuilder``), not ours, and end to end by kafka-python's
producer told to speak an old broker's versions (``api_version``): Produce
v0 / v1 with magic 0 and Produce v2 with magic 1, every codec they had.
Bad sets (CRC, lengths, nesting, codes, bombs, the per-request budget) are
refused with CorruptRecordError / RecordTooLargeError, and a hypothesis
fuzz checks nothing else escapes."""

from __future__ import annotations

import struct
import time
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.kafka_raw import WAIT, Raw, batch_codecs, kafka_broker, read_back
from logbroker.errors import (CorruptRecordError, LogbrokerError, RecordTooLargeError,
                              UnsupportedCompressionTypeError)
from logbroker.kafka.legacy_messages import Budget, is_legacy, up_convert
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.records import format as fmt
from logbroker.records.kafka_v2 import kafka_records

legacy = pytest.importorskip("kafka.record.legacy_records")
T0 = 1_700_000_000_000
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
NOW = 1_800_000_000_000


def message_set(magic: int, codec: int, messages) -> bytes:
    """kafka-python's encoding of ``(key, value, timestamp)`` messages."""
    b = legacy.LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 22)
    for i, (key, value, ts) in enumerate(messages):
        assert b.append(i, timestamp=ts, key=key, value=value) is not None
    return bytes(b.build())


def read(batch: bytes) -> tuple:
    h = fmt.read_header(batch, 0)
    fmt.check_crc(batch, 0, h)
    return h, [KafkaRecord(*fields) for fields in kafka_records(batch, h)]


MESSAGES = [(b"k%d" % i, b"value-%d-" % i + b"x" * 50, T0 + 7 * i) for i in range(6)] + \
    [(None, b"no key", T0 + 100), (b"no value", None, T0 + 101)]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("magic", [0, 1])
def test_kafka_python_message_sets_convert_to_one_batch(magic, codec):
    if (magic, codec) == (0, "lz4"):  # Kafka 0.8/0.9's framing: refused, by name
        import cramjam
        data = _message(0, 3, None, bytes(cramjam.lz4.compress(message_set(0, 0, MESSAGES))))
        _refused(data, UnsupportedCompressionTypeError, match="magic 0")
        return
    data = message_set(magic, CODECS[codec], MESSAGES)
    assert is_legacy(data)
    out = up_convert(data, now_ms=NOW, limit=1 << 20)
    h, records = read(out.batch)
    assert (h.magic, h.attributes & 7, h.record_count, out.count) == \
        (2, CODECS[codec], len(MESSAGES), len(MESSAGES))
    assert (h.producer_id, h.base_sequence, h.last_offset_delta) == (-1, -1, len(MESSAGES) - 1)
    assert [(r.offset_delta, r.key, r.value, r.headers) for r in records] == \
        [(i, k, v, ()) for i, (k, v, _ts) in enumerate(MESSAGES)]
    if magic == 1:  # create time, the producer's
        assert h.timestamp_type == 0 and out.log_append_ms == -1
        assert [h.first_timestamp + r.timestamp_delta for r in records] == \
            [ts for _k, _v, ts in MESSAGES]
        assert h.max_timestamp == T0 + 101
    else:  # magic 0 has none: the broker's time, as log-append time
        assert h.timestamp_type == 1 and out.log_append_ms == NOW
        assert (h.first_timestamp, h.max_timestamp) == (NOW, NOW)


def test_a_v2_batch_is_not_legacy_and_a_mixed_set_is_log_append_time():
    assert not is_legacy(build_batch([KafkaRecord(0, 0, None, b"v")]))
    assert not is_legacy(b"") and not is_legacy(b"\x00" * 16)
    mixed = message_set(1, 0, MESSAGES[:2]) + message_set(0, 0, MESSAGES[2:4])
    out = up_convert(mixed, now_ms=NOW, limit=1 << 20)
    h, records = read(out.batch)
    assert h.timestamp_type == 1 and [r.key for r in records] == [b"k0", b"k1", b"k2", b"k3"]
    negative = message_set(1, 0, [(b"k", b"v", -1)])
    assert read(up_convert(negative, now_ms=NOW, limit=100).batch)[0].first_timestamp == NOW


def _message(magic: int, attributes: int, key, value, ts: int = T0, offset: int = 0) -> bytes:
    def blob(x):
        return struct.pack(">i", -1) if x is None else struct.pack(">i", len(x)) + x
    body = struct.pack(">bB", magic, attributes) + (struct.pack(">q", ts) if magic else b"") \
        + blob(key) + blob(value)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(msg)) + msg


def _refused(data, error=CorruptRecordError, match: "str | None" = None, **kw) -> str:
    with pytest.raises(error, match=match) as info:
        up_convert(data, now_ms=NOW, limit=kw.pop("limit", 1 << 20), **kw)
    return str(info.value)


def test_malformed_message_sets_are_refused_with_a_reason():
    good = _message(1, 0, b"k", b"v")
    flipped = bytearray(good)
    flipped[-1] ^= 1
    _refused(bytes(flipped), match="CRC mismatch")
    _refused(good[:-3], match="size")
    _refused(good + good[:8], match="cut short")
    _refused(b"", match="empty message set")
    _refused(_message(1, 4, None, b"zstd?"), match="compression code 4")
    _refused(_message(1, 1, None, None), match="without a value")
    _refused(_message(1, 1, None, b"not gzip"), match="gzip")
    inner = _message(1, 1, None, zlib.compress(b"x"))
    import gzip
    _refused(_message(1, 1, None, gzip.compress(inner)), match="inside a compressed")
    _refused(_message(1, 1, None, gzip.compress(_message(0, 0, b"k", b"v"))),
             match="magic 0 message inside a magic 1")
    # a key length past the message
    body = struct.pack(">bB", 0, 0) + struct.pack(">i", 1000) + b"abc" + b"\x00" * 8
    msg = struct.pack(">I", zlib.crc32(body)) + body
    _refused(struct.pack(">qi", 0, len(msg)) + msg, match="length 1000")
    # trailing bytes inside a message
    body = struct.pack(">bB", 0, 0) + struct.pack(">ii", -1, -1) + b"!"
    msg = struct.pack(">I", zlib.crc32(body)) + body
    _refused(struct.pack(">qi", 0, len(msg)) + msg, match="ends at byte")


def test_a_zip_bomb_and_too_many_messages_are_refused():
    import gzip
    bomb = gzip.compress(b"\x00" * (8 << 20))  # ~8 KiB that decompress to 8 MiB
    _refused(_message(1, 1, None, bomb), RecordTooLargeError, limit=1 << 20)
    many = _message(1, 0, None, b"v") * 50
    up_convert(many, now_ms=NOW, limit=100, budget=Budget(50))
    budget = Budget(60)
    up_convert(many, now_ms=NOW, limit=100, budget=budget)
    _refused(many, RecordTooLargeError, match="at most", budget=budget)  # the request's 10 left
    # a request's partitions share 16 MiB of decompression (here 1 MiB)
    shared = Budget(inflated=1 << 20)
    one = _message(1, 1, None, gzip.compress(_message(1, 0, None, b"\x00" * (700 << 10))))
    up_convert(one, now_ms=NOW, limit=8 << 20, budget=shared)
    _refused(one, RecordTooLargeError, limit=8 << 20, budget=shared)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 7))
def test_fuzz_only_our_errors_escape(data, flip):
    seeds = [message_set(1, 1, MESSAGES[:2]), message_set(0, 2, MESSAGES[2:3]),
             message_set(1, 0, MESSAGES[:1])]
    seed = bytearray(seeds[flip % 3])
    cut = data[:len(seed)]
    seed[:len(cut)] = bytes(a ^ b for a, b in zip(seed, cut))
    for candidate in (bytes(seed), data, seeds[flip % 3][:flip * 7] + data):
        try:
            out = up_convert(candidate, now_ms=NOW, limit=1 << 16)
        except LogbrokerError:
            continue
        h, records = read(out.batch)
        assert h.record_count == len(records) == out.count


# -- end to end: kafka-python speaking an old broker's versions -----------------------------
@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-legacy") / "data") as started:
        yield started


def _old_producer(bootstrap: str, api_version: tuple, codec: str, topic: str, n: int) -> list:
    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=bootstrap, api_version=api_version, acks="all",
                      compression_type=None if codec == "none" else codec, linger_ms=50,
                      request_timeout_ms=int(WAIT * 1000))
    try:
        futures = [p.send(topic, key=b"k%d" % i, value=b"%s-%d-" % (codec.encode(), i) + b"y" * 80,
                          partition=0, timestamp_ms=T0 + i) for i in range(n)]
        p.flush(WAIT)
        return [f.get(WAIT) for f in futures]
    finally:
        p.close(WAIT)


@pytest.mark.parametrize("api_version,magic,codec", [
    ((0, 10, 1), 1, "gzip"), ((0, 10, 1), 1, "snappy"), ((0, 10, 1), 1, "lz4"),
    ((0, 10, 1), 1, "none"), ((0, 9), 0, "gzip"), ((0, 8, 2), 0, "none")],
    ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else str(v))
def test_kafka_python_old_protocol_versions_produce(kb, api_version, magic, codec):
    b, bootstrap = kb
    topic = f"legacy-{'.'.join(map(str, api_version))}-{codec}"
    before = int(time.time() * 1000)
    metas = _old_producer(bootstrap, api_version, codec, topic, 5)
    after = int(time.time() * 1000)
    assert [m.offset for m in metas] == list(range(5))
    got = read_back(b.bootstrap, topic, 5)
    assert [(r.offset, r.key, r.value) for r in got] == \
        [(i, b"k%d" % i, b"%s-%d-" % (codec.encode(), i) + b"y" * 80) for i in range(5)]
    if magic == 1:
        assert [r.timestamp for r in got] == [T0 + i for i in range(5)]
    else:
        assert all(before <= r.timestamp <= after for r in got)
    assert batch_codecs(bootstrap, topic) == {CODECS[codec]}


def test_a_corrupt_message_set_is_its_partitions_error_only(kb):
    _b, bootstrap = kb
    good = message_set(1, 0, MESSAGES[:3])
    bad = bytearray(good)
    bad[30] ^= 0xFF
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(0, 2, 1, {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "legacy-raw", "partition_data": [{"index": 0, "records": good}]},
            {"name": "legacy-raw-bad", "partition_data": [{"index": 0, "records": bytes(bad)}]}]}))
        _h, resp = raw.recv(0, 2)
        rows = {t.name: t.partition_responses[0] for t in resp.responses}
        assert (rows["legacy-raw"].error_code, rows["legacy-raw"].base_offset) == (0, 0)
        assert rows["legacy-raw"].log_append_time_ms == -1
        assert (rows["legacy-raw-bad"].error_code, rows["legacy-raw-bad"].base_offset) == (2, -1)
        # a v2 batch in Produce v0 is taken as it is (as Kafka does)
        raw.sock.sendall(raw.send(0, 0, 2, {"acks": 1, "timeout_ms": 5000, "topic_data": [
            {"name": "legacy-raw", "partition_data": [{"index": 0, "records": build_batch(
                [KafkaRecord(0, 0, b"v2", b"in v0")], base_timestamp=T0)}]}]}))
        _h, resp = raw.recv(0, 0)
        assert (resp.responses[0].partition_responses[0].error_code,
                resp.responses[0].partition_responses[0].base_offset) == (0, 3)
    finally:
        raw.close()
