"""Flexible versions (KIP-482) in the Kafka codec, and ApiVersions v3 served
(issue 15: librdkafka starts its handshake at v3 and, refused, logged a parse
failure and fell back to v0).

The primitives (unsigned varint, compact strings, bytes and arrays,
tagged-field sections): round trips, golden bytes, malformed input raising
only ``KafkaDecodeError``; a hypothesis fuzz of the v3 request decoder and
of the v3 response decoder with a bound on memory per input byte; and real
processes: a broker with ``--kafka-port 0`` answering raw v3 requests, kcat
and confluent-kafka (``debug=protocol``: the v3 request answered at v3, no
fallback to v0, no parse failure or underflow), kafka-python and aiokafka
producing and fetching a record. kcat's test skips without kcat unless
LOGBROKER_KCAT_REQUIRED=1; a missing Python client skips its test."""

from __future__ import annotations

import logging
import random
import struct
import subprocess
import time
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.kafka_adapters import _Lines, adapter, kcat_path, protocol_failures
from tests.support.kafka_raw import WAIT, Raw, kafka_broker
from logbroker.kafka import api_versions as av
from logbroker.kafka import primitives as p
from logbroker.kafka.codec import (RequestHeader, ResponseHeader, decode_request,
                                   decode_request_header, decode_response, encode_request,
                                   encode_response)
from logbroker.kafka.errors import KafkaDecodeError, KafkaEncodeError, KafkaUnsupportedVersionError
from logbroker.kafka.schema import Array, F, Out, S, decoder, encoder, min_size

QUICK = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def uvarint(n: int) -> bytes:
    out = bytearray()
    p.write_uvarint(n, out)
    return bytes(out)


def tags(*fields) -> bytes:
    """A tagged-field section of ``(tag, data)`` fields."""
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


def compact(text: str) -> bytes:
    data = text.encode()
    return uvarint(len(data) + 1) + data


def v3_frame(name="librdkafka", version="2.0.2", header_tags=b"\x00", body_tags=b"\x00",
             cid=5, client="kcat") -> bytes:
    """An ApiVersions v3 request frame (no size prefix), built by hand."""
    head = struct.pack(">hhih", 18, 3, cid, len(client)) + client.encode()
    return head + header_tags + compact(name) + compact(version) + body_tags


# -- unsigned varints ---------------------------------------------------------------------
@pytest.mark.parametrize("value,wire", [(0, "00"), (1, "01"), (127, "7f"), (128, "8001"),
                                        (300, "ac02"), (16383, "ff7f"), (16384, "808001"),
                                        ((1 << 28) - 1, "ffffff7f"), ((1 << 32) - 1, "ffffffff0f")])
def test_uvarint_golden_and_round_trip(value, wire):
    assert uvarint(value).hex() == wire
    assert p.read_uvarint(memoryview(bytes.fromhex(wire) + b"\xaa"), 0) == (value, len(wire) // 2)


@pytest.mark.parametrize("data,message", [
    (b"", "runs past the end"), (b"\x80\x80", "runs past the end"),
    (b"\xff\xff\xff\xff\x7f", r"unsigned varint 34359738367 out of range"),
    (b"\x80\x80\x80\x80\x80\x01", "longer than 5 bytes")])
def test_uvarint_malformed(data, message):
    with pytest.raises(KafkaDecodeError, match=message):
        p.read_uvarint(memoryview(data), 0)


def test_uvarint_encode_range():
    for bad in (-1, 1 << 32):
        with pytest.raises(KafkaEncodeError, match="out of range for an unsigned varint"):
            p.write_uvarint(bad, bytearray())


# -- compact strings and bytes ------------------------------------------------------------
@pytest.mark.parametrize("value", ["", "a", "tópico ✓", "x" * 127, "y" * 300, None])
def test_compact_string_round_trip(value):
    out = bytearray()
    p.string_encoder(True, compact=True)(value, out)
    n = -1 if value is None else len(value.encode())
    assert bytes(out[:len(uvarint(n + 1))]) == uvarint(n + 1)  # length + 1, 0 for null
    assert p.string_decoder(True, compact=True)(memoryview(bytes(out)), 0) == (value, len(out))


@pytest.mark.parametrize("value", [b"", b"\x00", b"z" * 200, None])
def test_compact_bytes_round_trip(value):
    out = bytearray()
    p.bytes_encoder(True, compact=True)(value, out)
    assert p.bytes_decoder(True, compact=True)(memoryview(bytes(out)), 0) == (value, len(out))
    view_dec = p.bytes_decoder(True, view_only=True, compact=True)
    got, _ = view_dec(memoryview(bytes(out)), 0)
    assert (None if got is None else bytes(got)) == value


@pytest.mark.parametrize("data,message", [
    (b"\x00", r"string length -1 is negative \(not nullable\)"),
    (b"\x05ab", "string length 4 exceeds the 2 bytes left"),
    (b"\xff\xff\xff\xff\x0f", "string length 4294967294 exceeds the 0 bytes left"),
    (b"\x03\xff\xfe", "not valid UTF-8"),
    (b"\x80", "string length runs past the end")])
def test_compact_string_malformed(data, message):
    with pytest.raises(KafkaDecodeError, match=message):
        p.string_decoder(False, compact=True)(memoryview(data), 0)


def test_compact_string_above_the_int16_limit():
    data = uvarint(0x8000 + 1) + b"a" * 0x8000  # present, but longer than any Kafka string
    with pytest.raises(KafkaDecodeError, match="string length 32768 above the limit 32767"):
        p.string_decoder(False, compact=True)(memoryview(data), 0)
    with pytest.raises(KafkaEncodeError, match="string of 32768 bytes"):
        p.string_encoder(False, compact=True)("a" * 0x8000, bytearray())


def test_compact_null_bytes_refused_when_not_nullable():
    with pytest.raises(KafkaDecodeError, match=r"bytes length -1 is negative \(not nullable\)"):
        p.bytes_decoder(False, compact=True)(memoryview(b"\x00"), 0)
    with pytest.raises(KafkaEncodeError, match="null for non-nullable bytes"):
        p.bytes_encoder(False, compact=True)(None, bytearray())


# -- tagged-field sections ----------------------------------------------------------------
def test_tagged_fields_are_skipped_within_bounds():
    section = tags((0, b"abc"), (7, b""), (300, b"\x01" * 200))
    assert p.skip_tagged_fields(memoryview(section + b"rest"), 0) == len(section)
    assert p.skip_tagged_fields(memoryview(b"\x00"), 0) == 1
    assert p.EMPTY_TAGGED_FIELDS == tags()


@pytest.mark.parametrize("data,message", [
    (b"", "tagged field count runs past the end"),
    (b"\xff\xff\xff\xff\x0f", "4294967295 tagged fields need at least 8589934590 bytes, 0 left"),
    (b"\x01\x05\x0a" + b"x" * 3, "tagged field 5 of 10 bytes exceeds the 3 bytes left"),
    (b"\x02\x00\x00", "2 tagged fields need at least 4 bytes, 2 left"),  # before reading
    (b"\x01\x80\x80", "tag runs past the end"),
    (b"\x01\x01\xff\xff\xff\xff\x7f", "tagged field 1 size 34359738367 out of range")])
def test_tagged_fields_malformed(data, message):
    with pytest.raises(KafkaDecodeError, match=message):
        p.skip_tagged_fields(memoryview(data), 0)


# -- schemas compiled for a flexible version ----------------------------------------------
THING = S("Thing",
          F("name", "string"),
          F("note", "string", nullable="0+", default=None),
          F("blob", "bytes", nullable="0+", default=None),
          F("items", Array(S("Item", F("k", "int32"), F("labels", Array("string")))),
            nullable="0+"),
          F("records", "records", nullable="0+"))


def _encode_thing(value, flexible=True) -> bytes:
    out = Out()
    encoder(THING, 0, flexible)(value, out)
    data, start = bytearray(), 0
    for pos, obj in out.attached:
        data += out[start:pos] + bytes(obj)
        start = pos
    return bytes(data + out[start:])


def test_a_struct_round_trips_compact_with_empty_tag_sections():
    value = {"name": "n", "note": None, "blob": b"\x01\x02", "records": b"R" * 3,
             "items": [{"k": 1, "labels": ["a", ""]}, {"k": -1, "labels": []}]}
    wire = _encode_thing(value)
    assert wire == bytes.fromhex(
        "026e" "00" "03" "0102"  # name "n", note null, blob of 2
        "03" "00000001" "03" "0261" "01" "00" "ffffffff" "01" "00"  # 2 items, each with tags
        "04" "525252" "00")  # records of 3, the struct's tags
    got, end = decoder(THING, 0, True)(memoryview(wire), 0)
    assert end == len(wire) and got.items[0].labels == ("a", "") and bytes(got.records) == b"RRR"
    assert _encode_thing(got) == wire
    assert _encode_thing({**value, "items": None})[6] == 0  # a null compact array: 0
    assert len(_encode_thing(value, flexible=False)) > len(wire)
    assert min_size(THING, 0, True) == 6 and min_size(THING, 0) == 2 + 2 + 4 + 4 + 4


def test_unknown_tags_in_nested_structs_are_skipped():
    wire = (compact("n") + b"\x00\x00" + b"\x02" + struct.pack(">i", 9) + b"\x01"
            + tags((3, b"xyz")) + b"\x00" + tags((0, b""), (1, b"\xff")))
    got, end = decoder(THING, 0, True)(memoryview(wire), 0)
    assert end == len(wire) and got.items[0].k == 9 and got.records is None


def test_announced_compact_array_is_checked_before_allocating():
    wire = compact("n") + b"\x00\x00" + uvarint(1 << 31)
    with pytest.raises(KafkaDecodeError, match=r"items: array of 2147483647 entries needs at "
                                               r"least 12884901882 bytes, 0 left"):
        decoder(THING, 0, True)(memoryview(wire), 0)
    with pytest.raises(KafkaDecodeError, match=r"items\[0\]\.tagged_fields: tagged field 4 of "
                                               r"9 bytes exceeds"):
        decoder(THING, 0, True)(memoryview(compact("n") + b"\x00\x00\x02" + b"\x00" * 4
                                          + b"\x01" + b"\x01\x04\x09" + b"\x00" * 3), 0)


# -- ApiVersions v3 through the codec -----------------------------------------------------
def test_v3_request_with_unknown_tags_in_header_and_body():
    frame = v3_frame(header_tags=tags((0, b"hdr")), body_tags=tags((9, b"x" * 20)))
    header, body = decode_request(frame)
    assert header == RequestHeader(18, 3, 5, "kcat")
    assert (body.client_software_name, body.client_software_version) == ("librdkafka", "2.0.2")
    assert decode_request_header(frame)[1] == 2 + 2 + 4 + 2 + 4 + len(tags((0, b"hdr")))
    # our encoding writes no tags: the same request, shorter
    assert encode_request(header, body)[4:] == v3_frame()


@pytest.mark.parametrize("frame,message", [
    # without header v2's tags the name's length (11) reads as their count
    (v3_frame(header_tags=b""), (r"request header: tagged_fields: 11 tagged fields need at "
                                 r"least 22 bytes, 17 left")),
    (v3_frame(header_tags=b"\x01"), r"request header: tagged_fields: tagged field 11 of 108 bytes"),
    (v3_frame(body_tags=b""), r"ApiVersions v3 request: tagged_fields: tagged field count runs"),
    (v3_frame()[:-3], r"client_software_version: string length 5 exceeds the 3 bytes left")])
def test_v3_request_malformed(frame, message):
    with pytest.raises(KafkaDecodeError, match=message):
        decode_request(frame)


@pytest.mark.parametrize("name,version,ok", [
    ("librdkafka", "2.0.2", True), ("confluent-kafka-python", "2.16.1-rdkafka-2.16.0", True),
    ("apache-kafka-java", "4.0.0", True), ("a", "1", True), ("A.b-C", "0", True),
    ("", "1", False), ("x", "", False), ("-x", "1", False), ("x-", "1", False),
    ("x", ".1", False), ("a b", "1", False), ("kcat_1", "1", False), ("é", "1", False),
    ("x\n", "1", False)])
def test_v3_client_software_is_checked_as_kafka_does(name, version, ok):
    header, body = decode_request(v3_frame(name, version))
    v, answer = av.answer_api_versions(header, 3, request=body)
    assert v == 3
    if ok:
        assert answer["error_code"] == 0 and (18, 0, 3) in {
            (k["api_key"], k["min_version"], k["max_version"]) for k in answer["api_keys"]}
    else:
        assert answer == {"error_code": 42, "api_keys": [], "throttle_time_ms": 3}
    wire = encode_response(header, 18, v, answer)
    assert decode_response(wire[4:], 18, 3)[1].error_code == (0 if ok else 42)


def test_newer_api_versions_still_get_the_v0_answer_with_range_0_3():
    frame = v3_frame()
    frame = frame[:2] + struct.pack(">h", 4) + frame[4:]
    with pytest.raises(KafkaUnsupportedVersionError) as info:
        decode_request(frame)
    reply = av.unsupported_version_reply(info.value.header)
    head, body = decode_response(reply[4:], 18, 0)
    assert head == ResponseHeader(5) and body.error_code == 35
    assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]


# -- fuzz: only our decode error, and memory bounded per input byte ------------------------
def _valid_v3() -> list:
    rng, out = random.Random(482), []
    for _ in range(12):
        name = rng.choice(["librdkafka", "a", "", "tópico", "x" * 200])
        htags = tags(*[(rng.randint(0, 300), rng.randbytes(rng.randint(0, 9)))
                       for _ in range(rng.randint(0, 2))])
        btags = tags(*[(rng.randint(0, 5), rng.randbytes(rng.randint(0, 200)))
                       for _ in range(rng.randint(0, 3))])
        out.append(v3_frame(name, rng.choice(["1", "2.0.2", ""]), htags, btags,
                            client=rng.choice(["", "kcat", "c" * 50])))
    return out


V3 = _valid_v3()
V3_RESPONSE = encode_response(ResponseHeader(1), 18, 3, av.api_versions_body())[4:]
HOSTILE = [b"\x00", b"\x01", b"\x7f", b"\x80\x01", b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f",
           b"\x80\x80\x80\x80\x80", uvarint(1 << 20), uvarint(0x8000)]
edit = st.tuples(st.sampled_from(["flip", "cut", "insert", "uvarint"]), st.integers(0, 1 << 12),
                 st.binary(min_size=1, max_size=8), st.sampled_from(HOSTILE))


def _mutate(frame: bytes, how) -> bytes:
    kind, at, data, number = how
    at %= len(frame) + 1
    if kind == "flip":
        return frame[:at] + data[:1] + frame[at + 1:]
    if kind == "cut":
        return frame[:at]
    if kind == "insert":
        return frame[:at] + data + frame[at:]
    return frame[:at] + number + frame[at + len(number):]  # a hostile length or count


def _decode_request(frame: bytes) -> None:
    try:
        decode_request(frame)
    except KafkaDecodeError:
        pass


def _decode_response(frame: bytes) -> None:
    try:
        decode_response(frame, 18, 3)
    except KafkaDecodeError:
        pass


def test_every_valid_v3_decodes_and_every_cut_fails_cleanly():
    for frame in V3:
        decode_request(frame)
        for cut in range(len(frame)):
            with pytest.raises(KafkaDecodeError):
                decode_request(frame[:cut])
    for cut in range(len(V3_RESPONSE)):
        with pytest.raises(KafkaDecodeError):
            decode_response(V3_RESPONSE[:cut], 18, 3)


@QUICK
@given(st.binary(max_size=300))
def test_v3_request_random_body_raises_only_decode_errors(data):
    _decode_request(v3_frame()[:14] + data)  # a valid header v2, then anything
    _decode_response(data)


@QUICK
@given(st.sampled_from(range(len(V3))), st.lists(edit, min_size=1, max_size=3))
def test_v3_request_mutated_raises_only_decode_errors(index, hows):
    frame, resp = V3[index], V3_RESPONSE
    for how in hows:
        frame, resp = _mutate(frame, how), _mutate(resp, how)
    _decode_request(frame)
    _decode_response(resp)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(V3))), edit, st.booleans())
def test_v3_decoding_memory_is_bounded_per_input_byte(index, how, response):
    frame = _mutate(V3_RESPONSE if response else V3[index], how)
    tracemalloc.start()
    try:
        (_decode_response if response else _decode_request)(frame)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak <= 64 * 1024 + 100 * len(frame)


# -- real processes -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-flexible") / "data") as (_, addr):
        yield addr


def _send_raw(raw: Raw, frame: bytes) -> None:
    raw.sock.sendall(struct.pack(">i", len(frame)) + frame)


def test_raw_v3_answered_at_v3_and_a_bad_software_name_invalid_request(bootstrap):
    raw = Raw(bootstrap)
    try:
        _send_raw(raw, v3_frame(cid=1, header_tags=tags((0, b"h")), body_tags=tags((2, b"b"))))
        head, body = raw.recv(18, 3)
        assert head.correlation_id == 1 and body.error_code == 0
        table = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
        assert table[18] == (0, 3) and table[0] == (0, 8) and table[1] == (4, 11)
        _send_raw(raw, v3_frame("bad name", cid=2))  # answered, connection kept (as Kafka)
        head, body = raw.recv(18, 3)
        assert (head.correlation_id, body.error_code, body.api_keys) == (2, 42, ())
        raw.sock.sendall(raw.send(18, 2, 3, {}))
        assert raw.recv(18, 2)[1].error_code == 0
        newer = v3_frame(cid=4)
        _send_raw(raw, newer[:2] + struct.pack(">h", 9) + newer[4:])
        head, body = raw.recv(18, 0)
        assert head.correlation_id == 4 and body.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]
    finally:
        raw.close()
    bad = Raw(bootstrap)  # a malformed v3 closes only its connection
    try:
        _send_raw(bad, v3_frame(body_tags=b"\x05"))
        assert bad.closed_by_peer()
    finally:
        bad.close()


def _handshake_problems(lines: list) -> list:
    """The handshake went v3 -> v3: the lines that say otherwise."""
    text = "\n".join(lines)
    problems = protocol_failures(lines)
    problems += [line for line in lines if "retrying with v" in line]
    if "Sent ApiVersionRequest (v3" not in text:
        problems.append("no ApiVersionRequest v3 sent")
    if "Received ApiVersionResponse (v3" not in text:
        problems.append("no ApiVersionResponse v3 received")
    return problems


def test_kcat_handshake_at_v3_without_fallback(bootstrap):
    done = subprocess.run([kcat_path(), "-L", "-b", bootstrap, "-d", "protocol"], text=True,
                          capture_output=True, timeout=3 * WAIT)
    assert done.returncode == 0, done.stderr
    assert f"broker 0 at {bootstrap}" in done.stdout
    lines = done.stderr.splitlines()
    assert not _handshake_problems(lines), [line for line in lines if "ApiVersion" in line]


def test_confluent_kafka_handshake_at_v3_and_a_record_both_ways(bootstrap):
    ck = pytest.importorskip("confluent_kafka")
    logger = logging.getLogger("test.rdkafka.flexible")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    captured = _Lines()
    logger.addHandler(captured)
    try:
        prod = ck.Producer({"bootstrap.servers": bootstrap, "debug": "protocol"}, logger=logger)
        prod.produce("flex-ck", value=b"librdkafka", partition=0)
        assert prod.flush(WAIT) == 0
        cons = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                            "enable.auto.commit": False, "debug": "protocol"}, logger=logger)
        try:
            cons.assign([ck.TopicPartition("flex-ck", 0, 0)])
            msg, deadline = None, time.monotonic() + WAIT
            while msg is None and time.monotonic() < deadline:
                msg = cons.poll(0.2)
        finally:
            cons.close()
    finally:
        logger.removeHandler(captured)
    assert msg is not None and msg.error() is None and msg.value() == b"librdkafka"
    assert not _handshake_problems(captured.lines), \
        [line for line in captured.lines if "ApiVersion" in line]


@pytest.mark.parametrize("client", ["kafka-python", "aiokafka"])
def test_python_clients_still_connect(bootstrap, client):
    """kafka-python starts at ApiVersions v4 (answered v0, range 0-3) and
    retries at v3; aiokafka asks v0: both produce and fetch a record."""
    kafka_client = adapter(client)
    topic = f"flex-{client}"
    kafka_client.produce(bootstrap, topic, [(b"k", client.encode(), 1_000)], acks=1,
                         idempotent=False, compression="none")
    assert kafka_client.from_offset(bootstrap, topic, 0, 1) == [(0, b"k", client.encode())]


def test_librdkafkas_all_topics_metadata_v9_with_its_placeholder_is_read():
    # librdkafka 2.16's request for every topic at Metadata v9: the 4-byte
    # array-count placeholder stays (uvarint 0 = null, then three zero bytes
    # Kafka never reads), then its booleans and tags: bytes as captured
    frame = bytes.fromhex("0003" "0009" "00000003" "0007") + b"rdkafka" + bytes.fromhex(
        "00" "00000000" "00" "00" "00" "00")
    header, body = decode_request(frame)
    assert (header.api_key, header.api_version, header.client_id) == (3, 9, "rdkafka")
    assert body.topics is None  # every topic
