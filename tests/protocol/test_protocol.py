"""Unit tests of the wire codec (src/logbroker/protocol) and of docs/protocol.md."""

from __future__ import annotations

import random
import re
import tracemalloc
import struct
from pathlib import Path

import msgpack
import pytest

from logbroker import errors
from logbroker.errors import (FrameTooLargeError, InvalidRequestError, LogbrokerError,
                              UnsupportedVersionError)
from logbroker.protocol import codec
from logbroker.protocol import messages as m
from logbroker.protocol.codec import (NEED_DATA, DecodeError, Envelope, FrameReader, decode,
                                      encode, encode_bytes)
from logbroker.protocol.schema import MAX_INT, MIN_INT, Map, Opt, check
from logbroker.records import build_batch

from tests.support.fixtures import B1, B2, SAMPLES, T0

DOC = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"


def raw(header, payload: bytes = b"") -> bytes:
    """A frame as FrameReader returns it (no length prefix) from a header object."""
    h = msgpack.packb(header)
    return struct.pack(">I", len(h)) + h + payload


def hdr(api=6, cid=9, resp=False, v=1, body=None, **extra):
    body = {"max_wait_ms": 1, "min_bytes": 1, "max_bytes": 1, "parts": []} if body is None else body
    return {"api": api, "cid": cid, "resp": resp, "v": v, "body": body, **extra}


def payload_bytes(msg) -> list[bytes]:
    return [bytes(p) for p in msg.payload]


def decode_error(frame) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        decode(frame)
    return info.value


# -- round trips ------------------------------------------------------------------------------
def test_samples_cover_every_message_class():
    assert {type(s) for s in SAMPLES} == set(m.REQUESTS.values()) | set(m.RESPONSES.values())


@pytest.mark.parametrize("msg", SAMPLES, ids=lambda s: type(s).__name__)
def test_round_trip(msg):
    data = encode_bytes(msg, 12345)
    assert struct.unpack_from(">I", data)[0] == len(data) - 4
    env = decode(data[4:])
    assert env == Envelope(12345, msg) and type(env.message) is type(msg)
    if msg.HAS_PAYLOAD:
        assert payload_bytes(env.message) == payload_bytes(msg)
        assert [p[-1] for p in env.message.parts] == [len(p) for p in payload_bytes(msg)]


def test_payload_is_never_copied():
    produce = next(s for s in SAMPLES if type(s) is m.Produce)
    bufs = encode(produce, 1)  # [prefix + header, B1, B2]
    assert bufs[1] is B1 and bufs[2] is B2 and encode(m.ListGroups(), 1)[1:] == []
    assert len(bufs[0]) == 8 + struct.unpack_from(">I", bufs[0], 4)[0]
    frame = bytearray(b"".join(bufs)[4:])
    env = decode(frame)
    assert all(isinstance(p, memoryview) and p.obj is frame for p in env.message.payload)


def test_cid_extremes_and_response_flag():
    for cid in (0, MAX_INT):
        assert decode(encode_bytes(m.ListGroups(), cid)[4:]).cid == cid
    header = msgpack.unpackb(encode_bytes(m.ListGroupsResponse(), 3)[8:])
    assert header == {"api": 10, "cid": 3, "resp": True, "v": 1,
                      "body": {"error": 0, "message": "", "groups": [], "kinds": []}}


def test_unknown_header_keys_and_body_fields_are_ignored():
    body = {"max_wait_ms": 1, "min_bytes": 1, "max_bytes": 1, "parts": [], "future": [1, 2]}
    env = decode(raw(hdr(body=body, trace="abc")))
    assert env.message == m.Fetch(max_wait_ms=1, min_bytes=1, max_bytes=1)


# -- FrameReader ----------------------------------------------------------------------------
STREAM = [encode_bytes(s, i) for i, s in enumerate(SAMPLES)]
WIRE, FRAMES = b"".join(STREAM), [s[4:] for s in STREAM]


def drain(reader: FrameReader) -> list:
    return list(iter(reader.next_frame, NEED_DATA))


def test_reader_whole_stream_in_one_chunk():
    r = FrameReader()
    r.receive_data(WIRE)
    frames = drain(r)
    assert frames == FRAMES and all(type(f) is bytes for f in frames)
    assert [decode(f).cid for f in frames] == list(range(len(SAMPLES)))
    assert r.buffered_bytes == 0 and r.next_frame() is NEED_DATA


def test_reader_byte_by_byte():
    r, frames = FrameReader(scratch_bytes=128), []
    for i in range(len(WIRE)):
        r.receive_data(WIRE[i:i + 1])
        frames += drain(r)
    assert [bytes(f) for f in frames] == FRAMES


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("scratch", [8, 13, 64, 256, 1 << 18])
def test_reader_random_splits(scratch, trusted):
    rng = random.Random(scratch)
    for _ in range(20):
        r, frames, pos = FrameReader(scratch_bytes=scratch, trusted=trusted), [], 0
        while pos < len(WIRE):
            n = rng.randint(1, 300)
            r.receive_data(memoryview(WIRE)[pos:pos + n])
            pos += n
            frames += drain(r)
        assert [bytes(f) for f in frames] == FRAMES
        assert r.buffered_bytes == 0


@pytest.mark.parametrize("trusted", [False, True])
def test_reader_through_get_buffer_with_short_writes(trusted):
    rng = random.Random(1)
    r, frames, pos = FrameReader(scratch_bytes=100, trusted=trusted), [], 0
    while pos < len(WIRE):
        buf = r.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), rng.randint(1, 150), len(WIRE) - pos)
        buf[:n] = WIRE[pos:pos + n]
        r.buffer_updated(n)
        pos += n
        frames += drain(r)
    assert [bytes(f) for f in frames] == FRAMES


def test_a_long_frame_gets_its_own_buffer_once_a_quarter_of_it_came():
    """Chunks no larger than what already came, then the frame's own buffer
    for the rest, written in place (no copy of it in Python)."""
    big = build_batch([(b"z" * (4 << 20), None, (), T0)])
    data = encode_bytes(m.Produce(parts=(("t", 0, len(big)),), payload=(big,)), 5)
    small = encode_bytes(m.ListGroups(), 4)
    r = FrameReader()
    r.receive_data(small + data[:1000])
    assert bytes(r.next_frame()) == small[4:] and r.next_frame() is NEED_DATA
    assert r.buffered_bytes == 996 and r.in_frame
    pos = 1000
    while True:
        buf = r.get_buffer()
        if len(buf.obj) == len(data) - 4:
            break
        assert len(buf) <= max(pos - 4, codec.SCRATCH_BYTES)
        n = len(buf) // 2 + 1  # short reads too
        buf[:n] = data[pos:pos + n]
        r.buffer_updated(n)
        pos += n
        assert r.buffered_bytes == pos - 4 and r.next_frame() is NEED_DATA
    assert 4 * (pos - 4) >= len(data) - 4 and len(buf) == len(data) - pos
    target = buf.obj
    buf[:] = data[pos:]
    r.buffer_updated(len(buf))
    frame = r.next_frame()
    assert frame is target and frame == data[4:] and not r.in_frame
    assert bytes(decode(frame).message.payload[0]) == big
    r.receive_data(small)  # the scratch buffer is used again afterwards
    assert bytes(r.next_frame()) == small[4:]


def _long_frame(cid: int, fill: bytes, size: int) -> bytes:
    return encode_bytes(m.Produce(parts=(("t", 0, size),), payload=(fill * size,)), cid)


def _receive(r: FrameReader, data: bytes, step: int) -> list:
    pos = 0
    while pos < len(data):
        buf = r.get_buffer()
        n = min(len(buf), step, len(data) - pos)
        buf[:n] = data[pos:pos + n]
        r.buffer_updated(n)
        pos += n
    return drain(r)


def test_a_trusted_reader_receives_a_long_frame_in_place_from_its_prefix():
    a = _long_frame(1, b"a", 300 << 10)
    r = FrameReader(trusted=True)
    r.receive_data(a[:4])
    buf = r.get_buffer()
    assert len(buf) == len(a) - 4  # the whole frame's room at once, no chunks
    (frame,) = _receive(r, a[4:], 64 << 10)
    assert frame == a[4:] and len(frame) == len(a) - 4 and not r.in_frame


def test_a_trusted_reader_reuses_a_buffer_only_when_no_frame_holds_it():
    """A later frame is written into the last one's buffer only once that
    frame, and every view of it, is gone: what a caller still holds never
    changes under it."""
    a, b, c = (_long_frame(i, fill, (300 - 10 * i) << 10) for i, fill in enumerate((b"a", b"b", b"c")))
    r = FrameReader(trusted=True)
    (fa,) = _receive(r, a, 40_000)
    payload = decode(fa).message.payload[0]
    id_a = id(fa.obj)  # ids, not references: holding a buffer would keep it from reuse
    del fa
    (fb,) = _receive(r, b, 40_000)  # the payload view still holds a's buffer
    assert id(fb.obj) != id_a and payload.tobytes() == b"a" * (300 << 10)
    assert fb == b[4:]
    id_b = id(fb.obj)
    del fb
    (fc,) = _receive(r, c, 40_000)  # nothing holds b's buffer: reused, shorter view
    assert id(fc.obj) == id_b and fc == c[4:] and len(fc) == len(c) - 4
    assert bytes(decode(fc).message.payload[0]) == b"c" * (280 << 10)


def traced(work) -> int:
    """Bytes of Python heap that ``work()`` allocated and still holds."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        keep = work()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del keep
    return after - before


def vm_rss() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmRSS"))


def test_an_idle_reader_holds_no_buffer():
    assert traced(lambda: [FrameReader() for _ in range(100)]) < 100 * 2048


@pytest.mark.parametrize("prefix", [b"\x03", b"\x03\xff\xff", struct.pack(">I", (64 << 20) - 1),
                                    struct.pack(">I", 200 << 10)])
def test_an_announced_length_allocates_nothing(prefix):
    """Memory follows the bytes received, never the length a peer announces."""
    def work():
        readers = [FrameReader(max_frame_bytes=64 << 20, scratch=shared) for _ in range(16)]
        for r in readers:
            r.get_buffer()[:len(prefix)] = prefix
            r.buffer_updated(len(prefix))
            assert r.in_frame and r.next_frame() is NEED_DATA
        return readers

    shared = codec.new_scratch()
    rss = vm_rss()
    assert traced(work) < 16 * 2048
    assert vm_rss() - rss < 8 << 20  # 16 x 64 MiB announced


def test_a_big_frame_grows_with_the_bytes_received():
    r = FrameReader(max_frame_bytes=64 << 20)
    frame = encode_bytes(m.Produce(parts=(("t", 0, 48 << 20),), payload=(b"\1" * (48 << 20),)), 1)
    rss = vm_rss()
    r.receive_data(frame[:1 << 20])
    assert vm_rss() - rss < 8 << 20
    r.receive_data(frame[1 << 20:])
    assert bytes(decode(r.next_frame()).message.payload[0][:3]) == b"\1\1\1"


def test_readers_sharing_a_scratch_buffer():
    shared = codec.new_scratch(64)
    readers = [FrameReader(scratch=shared) for _ in range(3)]
    got = [[] for _ in readers]
    rng, pos = random.Random(3), [0] * len(readers)
    while any(p < len(WIRE) for p in pos):
        i = rng.randrange(len(readers))
        if pos[i] < len(WIRE):
            buf = readers[i].get_buffer()
            n = min(len(buf), rng.randint(1, 90), len(WIRE) - pos[i])
            buf[:n] = WIRE[pos[i]:pos[i] + n]
            readers[i].buffer_updated(n)
            pos[i] += n
            got[i] += drain(readers[i])
    assert all([bytes(f) for f in frames] == FRAMES for frames in got)
    assert sum(r.frames_read for r in readers) == 3 * len(FRAMES)


def test_trailing_partial_frame_needs_data():
    r = FrameReader()
    r.receive_data(STREAM[0] + STREAM[1][:-1])
    assert bytes(r.next_frame()) == STREAM[0][4:]
    assert r.next_frame() is NEED_DATA
    assert r.buffered_bytes == len(STREAM[1]) - 1
    r.receive_data(STREAM[1][-1:])
    assert bytes(r.next_frame()) == STREAM[1][4:]
    r.receive_data(b"\x00\x00")  # half a length prefix
    assert r.next_frame() is NEED_DATA and r.buffered_bytes == 2


@pytest.mark.parametrize("length", [1025, 0xFFFFFFFF])
def test_length_out_of_bounds_is_frame_too_large(length):
    r = FrameReader(max_frame_bytes=1024)
    with pytest.raises(FrameTooLargeError):
        r.receive_data(STREAM[0] + struct.pack(">I", length))


@pytest.mark.parametrize("length", [0, 1, 3])
def test_length_below_a_header_field_is_a_decode_error(length):
    r = FrameReader(max_frame_bytes=1024)
    with pytest.raises(DecodeError, match="shorter than a header length field"):
        r.receive_data(STREAM[0] + struct.pack(">I", length))


def test_length_at_the_limit_is_accepted():
    r = FrameReader(max_frame_bytes=len(STREAM[0]) - 4, scratch_bytes=16)
    r.receive_data(STREAM[0])
    assert bytes(r.next_frame()) == STREAM[0][4:]
    with pytest.raises(FrameTooLargeError):
        FrameReader(max_frame_bytes=len(STREAM[0]) - 5).receive_data(STREAM[0])


# -- decode errors ------------------------------------------------------------------------------
def test_frame_shorter_than_header_length_field():
    for frame in (b"", b"\x00\x00\x00"):
        err = decode_error(frame)
        assert err.cid is None and err.code == InvalidRequestError.code


def test_header_length_past_the_frame_or_the_limit(monkeypatch):
    frame = raw(hdr())
    err = decode_error(struct.pack(">I", len(frame) - 3) + frame[4:])
    assert err.cid is None and "exceeds the frame" in err.message
    monkeypatch.setattr(codec, "MAX_HEADER", len(frame) - 5)
    assert decode_error(frame).cid is None


@pytest.mark.parametrize("header", [b"\xc1", b"\x92\x01", b"\xa3ab", b"\x81\xa1a\x01\x02",
                                    b"\x81\x01\x02", b"\xa2\xff\xfe", b""])
def test_bad_msgpack_header(header):
    err = decode_error(struct.pack(">I", len(header)) + header)
    assert err.cid is None and err.api is None and "msgpack" in err.message


@pytest.mark.parametrize("value", [[1, 2], "map", 7, None])
def test_header_not_a_map(value):
    err = decode_error(raw(value))
    assert err.message == "header is not a map" and err.cid is None
    assert isinstance(err, InvalidRequestError) and isinstance(err, LogbrokerError)
    assert err.code == 42 and err.name == "INVALID_REQUEST"


@pytest.mark.parametrize("changes, cid", [
    ({"cid": None}, None), ({"cid": -1}, None), ({"cid": 1 << 63}, None), ({"cid": "9"}, None),
    ({"cid": True}, None), ({"api": "6"}, 9), ({"api": None}, 9), ({"resp": 0}, 9),
    ({"resp": None}, 9)])
def test_ill_typed_header_fields(changes, cid):
    header = {k: v for k, v in {**hdr(), **changes}.items() if v is not None}
    err = decode_error(raw(header))
    assert err.cid == cid and err.api is None and err.cause is None


@pytest.mark.parametrize("v", [0, 2, "1", None])
def test_wrong_version(v):
    err = decode_error(raw(hdr(api=5, cid=77, v=v)))
    assert (err.cid, err.api) == (77, 5)
    assert isinstance(err.cause, UnsupportedVersionError) and err.cause.code == 35
    assert "version" in err.message


@pytest.mark.parametrize("api, resp", [(99, False), (-1, False), (99, True), (1 << 40, False)])
def test_unknown_api_keeps_api_and_cid(api, resp):
    err = decode_error(raw(hdr(api=api, cid=31, resp=resp)))
    assert (err.cid, err.api, err.cause) == (31, api, None)
    assert err.code == InvalidRequestError.code and f"unknown api {api}" in err.message


@pytest.mark.parametrize("changes, path", [
    ({"max_wait_ms": None}, "field 'max_wait_ms' is missing"),
    ({"max_wait_ms": "1"}, "max_wait_ms: expected an integer"),
    ({"max_wait_ms": 1.0}, "max_wait_ms: expected an integer"),
    ({"min_bytes": True}, "min_bytes: expected an integer"),
    ({"parts": {}}, "parts: expected a list"),
    ({"parts": [["t", 0, 0]]}, "parts[0]: expected a list of 4 items"),
    ({"parts": [["t", 0, 0, 1], [b"t", 0, 0, 1]]}, "parts[1][0]: expected str"),
    ({"parts": [["t", 0, 1 << 63, 1]]}, "parts[0][2]: expected an integer"),
])
def test_missing_and_ill_typed_fields_name_the_path(changes, path):
    body = {"max_wait_ms": 1, "min_bytes": 1, "max_bytes": 1, "parts": [], **changes}
    err = decode_error(raw(hdr(body={k: v for k, v in body.items() if v is not None})))
    assert (err.cid, err.api) == (9, 6)
    assert err.message == f"Fetch: {path}"


def test_body_must_be_a_map():
    for body in ([], "x", 1):
        assert decode_error(raw(hdr(body=body))).message == "Fetch: body: expected dict"
    header = hdr()
    del header["body"]
    assert "body" in decode_error(raw(header)).message


def test_nested_paths_in_maps_and_optional_lists():
    body = {"topics": [["t", 1, {"retention_ms": [1]}]]}
    err = decode_error(raw(hdr(api=2, body=body)))
    assert err.message == "CreateTopics: topics[0][2].retention_ms: expected a scalar"
    err = decode_error(raw(hdr(api=1, body={"topics": ["a", 3], "auto_create": False})))
    assert err.message == "Metadata: topics[1]: expected str"


def produce_frame(parts, payload: bytes) -> bytes:
    body = {"acks": 1, "timeout_ms": 10, "producer_id": -1, "producer_epoch": -1, "parts": parts}
    return raw(hdr(api=5, cid=4, body=body), payload)


def test_payload_split_by_parts():
    env = decode(produce_frame([["a", 0, 3], ["b", 1, 0], ["c", 2, 2]], b"xyzuv"))
    assert payload_bytes(env.message) == [b"xyz", b"", b"uv"]


@pytest.mark.parametrize("parts, payload, why", [
    ([["a", 0, 4]], b"xyz", "part sizes exceed the payload"),
    ([["a", 0, -1], ["b", 0, 4]], b"xyz", "part sizes exceed the payload"),
    ([["a", 0, 2]], b"xyz", "1 payload bytes belong to no part"),
    ([], b"xyz", "3 payload bytes belong to no part"),
])
def test_payload_size_mismatch(parts, payload, why):
    err = decode_error(produce_frame(parts, payload))
    assert (err.cid, err.api) == (4, 5) and err.message == f"Produce: {why}"


def test_payload_on_a_message_without_one():
    err = decode_error(encode_bytes(m.ListGroups(), 3)[4:] + b"!")
    assert (err.cid, err.api) == (3, 10) and "carries no payload" in err.message


# -- schema.check ------------------------------------------------------------------------------
def test_check_converts_lists_to_tuples():
    assert check([["x", 1], ("y", 2)], [(str, int)]) == (("x", 1), ("y", 2))
    assert check(None, Opt([int])) is None and check([1, 2], Opt([int])) == (1, 2)
    assert check({"k": [3]}, Map([int])) == {"k": (3,)} and check([], [int]) == ()


@pytest.mark.parametrize("value, spec, ok", [
    (MAX_INT, int, True), (MIN_INT, int, True), (MAX_INT + 1, int, False), (MIN_INT - 1, int, False),
    (True, int, False), (1.0, int, False), (True, bool, True), (1, bool, False),
    ("s", str, True), (b"s", str, False), (b"s", bytes, True), (None, str, False),
    (None, Opt(str), True), ("s", Opt(str), True), (1, Opt(str), False),
    (1.5, object, True), (None, object, True), ("s", object, True), ([1], object, False),
    ({}, object, False), ({"a": 1}, Map(int), True), ({1: 1}, Map(int), False),
    ([1], Map(int), False), ((1, 2), [int], True), ({1: 2}, [int], False),
    ([1, "a"], (int, str), True), ([1], (int, str), False), ([1, "a", 2], (int, str), False),
])
def test_check_accepts_and_refuses(value, spec, ok):
    if ok:
        check(value, spec)
    else:
        with pytest.raises(InvalidRequestError):
            check(value, spec)


def test_check_names_the_path():
    bad = [["t", [[1, {"x": True}], [2, {"y": 3}]]]]
    with pytest.raises(InvalidRequestError) as info:
        check(bad, [(str, [(int, Map(bool))])], "parts")
    assert info.value.message == "parts[0][1][1][1].y: expected true or false"
    with pytest.raises(InvalidRequestError) as info:
        check("x", int)
    assert info.value.message == "message: expected an integer"


# -- docs/protocol.md --------------------------------------------------------------------------
def doc_section(marker: str) -> str:
    text = DOC.read_text()
    start = text.index(f"<!-- {marker} -->")
    end = text.find("\n\n", start)
    return text[start:] if end < 0 else text[start:end]


def test_doc_hex_example_is_what_the_encoder_writes():
    batch = build_batch([(b"hi", None, (), 1700000000000)])
    msg = m.Produce(acks=-1, timeout_ms=5000, parts=(("logs", 0, len(batch)),), payload=(batch,))
    data = encode_bytes(msg, 7)
    lines = re.findall(r"^([0-9a-f]{4})  ((?:[0-9a-f]{2} ?)+)$", doc_section("produce-example-hex"),
                       re.MULTILINE)
    assert [int(off, 16) for off, _ in lines] == list(range(0, len(data), 16))
    assert bytes.fromhex("".join(h for _, h in lines)) == data
    assert len(data) == 173


def test_doc_error_table_matches_the_registry():
    rows = re.findall(r"^\| (-?\d+) \| (\w+) \| (yes|no) \| (.+) \|$", doc_section("error-table"),
                      re.MULTILINE)
    documented = {int(code): (name, flag == "yes") for code, name, flag, _ in rows}
    assert len(documented) == len(rows), "a code is documented twice"
    registry = {e.code: (e.name, e.retriable) for e in errors.all_errors()}
    assert documented == registry
    assert all(meaning.strip() for *_, meaning in rows)


def test_doc_lists_every_api():
    text = DOC.read_text()
    for api, cls in m.REQUESTS.items():
        assert f"| {api:<3} | {cls.__name__:<14} | {m.RESPONSES[api].__name__:<24} |" in text
        assert f"**{api} {cls.__name__}**" in text
