"""Fuzz of the Kafka frame decoder, frame splitter and RecordBatch v2 reader
(records/format.py's header and CRC, records/kafka_v2.py's record walk):
random bytes and mutated valid frames raise KafkaDecodeError (record batches:
CorruptRecordError, or RecordTooLargeError from a codec bit) and nothing
else, and never allocate by a length a peer announced. A modest run by
default; ``-m slow`` runs many more examples."""

from __future__ import annotations

import random
import struct
import tracemalloc

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logbroker.errors import CorruptRecordError, RecordTooLargeError
from logbroker.kafka.codec import (RequestHeader, ResponseHeader, decode_request,
                                   decode_response, encode_request, encode_response)
from logbroker.kafka.errors import KafkaDecodeError
from logbroker.kafka.framing import NEED_DATA, KafkaFrameReader
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.records.format import read_header
from logbroker.records.kafka_v2 import kafka_records
from tests.support.kafka_cases import CASES, random_body

QUICK = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=4000, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _valid_frames() -> list:
    """One request and one response frame (no size prefix) per API x version."""
    rng, out = random.Random(15), []
    for api, v in CASES:
        req = encode_request(RequestHeader(api.key, v, 1, "fuzz"), random_body(api.request, v, rng))
        resp = encode_response(ResponseHeader(1), api.key, v, random_body(api.response, v, rng))
        out.append(("request", api.key, v, req[4:]))
        out.append(("response", api.key, v, resp[4:]))
    return out


FRAMES = _valid_frames()
case = st.sampled_from(range(len(FRAMES)))
mutation = st.tuples(st.sampled_from(["flip", "cut", "insert", "length"]),
                     st.integers(0, 1 << 16), st.binary(min_size=1, max_size=8),
                     st.sampled_from([-2, -1, 0x7FFF, 0x7FFFFFFF, 1 << 20, 3]))


def _mutate(frame: bytes, how) -> bytes:
    kind, at, data, number = how
    at %= len(frame) + 1
    if kind == "flip":
        return frame[:at] + bytes([data[0]]) + frame[at + 1:]
    if kind == "cut":
        return frame[:at]
    if kind == "insert":
        return frame[:at] + data + frame[at:]
    size = 2 if data[0] & 1 else 4  # a string or an array/bytes length field
    return frame[:at] + number.to_bytes(8, "big", signed=True)[-size:] + frame[at + size:]


def _decode(kind: str, key: int, version: int, frame: bytes) -> None:
    try:
        if kind == "request":
            decode_request(frame)
        else:
            decode_response(frame, key, version)
    except KafkaDecodeError:
        pass


def _check_random_bytes(data: bytes, index: int) -> None:
    _decode("request", 0, 0, data)
    _, key, version, _ = FRAMES[index]
    _decode("response", key, version, data)


def _check_mutated(index: int, how) -> None:
    kind, key, version, frame = FRAMES[index]
    _decode(kind, key, version, _mutate(frame, how))


def _check_memory(index: int, how) -> None:
    """Peak memory while decoding stays within a constant factor of the input
    (decoded objects are bigger than their bytes) whatever lengths it announces."""
    kind, key, version, frame = FRAMES[index]
    frame = _mutate(frame, how)
    tracemalloc.start()
    try:
        _decode(kind, key, version, frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 64 * 1024 + 100 * len(frame)


def _check_splitter(stream: bytes, cuts: list) -> None:
    reader, pos = KafkaFrameReader(max_frame_bytes=1 << 16), 0
    try:
        for cut in sorted(c % (len(stream) + 1) for c in cuts) + [len(stream)]:
            reader.receive_data(stream[pos:cut])
            pos = cut
            while (frame := reader.next_frame()) is not NEED_DATA:
                _decode("request", 0, 0, bytes(frame))
            assert reader.held_bytes <= 4 * max(reader.buffered_bytes, 1) + 64
    except KafkaDecodeError:
        pass


BATCH = build_batch([KafkaRecord(0, 0, b"key", b"value", (("h", b"1"),)),
                     KafkaRecord(1, 7, None, b"v" * 20, ())], base_timestamp=5)


def _check_batch(how, fix_crc: bool) -> None:
    batch = bytearray(_mutate(BATCH, how))
    if fix_crc and len(batch) >= 61:  # reach the record walk past the CRC check
        struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    try:
        kafka_records(batch, read_header(batch))
    except (CorruptRecordError, RecordTooLargeError):
        pass


# -- the default run -----------------------------------------------------------------------
@QUICK
@given(st.binary(max_size=300), case)
def test_random_bytes_raise_only_decode_errors(data, index):
    _check_random_bytes(data, index)


@QUICK
@given(case, mutation)
def test_mutated_frames_raise_only_decode_errors(index, how):
    _check_mutated(index, how)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case, mutation)
def test_decoding_never_allocates_beyond_the_input(index, how):
    _check_memory(index, how)


@QUICK
@given(st.binary(max_size=400), st.lists(st.integers(0, 1 << 12), max_size=6))
def test_splitter_on_random_streams(stream, cuts):
    _check_splitter(stream, cuts)


@QUICK
@given(mutation, st.booleans())
def test_mutated_batches_raise_only_our_errors(how, fix_crc):
    _check_batch(how, fix_crc)


def test_every_valid_frame_decodes_and_every_cut_fails_cleanly():
    for kind, key, version, frame in FRAMES:
        _decode(kind, key, version, frame)
        for cut in range(0, len(frame), max(1, len(frame) // 16)):
            with pytest.raises(KafkaDecodeError):
                (decode_request(frame[:cut]) if kind == "request"
                 else decode_response(frame[:cut], key, version))


# -- many more examples: -m slow -----------------------------------------------------------
@pytest.mark.slow
@MANY
@given(st.binary(max_size=2000), case)
def test_slow_random_bytes(data, index):
    _check_random_bytes(data, index)


@pytest.mark.slow
@MANY
@given(case, st.lists(mutation, min_size=1, max_size=4))
def test_slow_mutated_frames(index, hows):
    kind, key, version, frame = FRAMES[index]
    for how in hows:
        frame = _mutate(frame, how)
    _decode(kind, key, version, frame)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case, mutation)
def test_slow_memory(index, how):
    _check_memory(index, how)


@pytest.mark.slow
@MANY
@given(st.lists(mutation, min_size=1, max_size=3), st.booleans())
def test_slow_batches(hows, fix_crc):
    for how in hows:
        _check_batch(how, fix_crc)
