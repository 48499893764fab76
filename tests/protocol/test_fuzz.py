"""Property tests of the wire codec: whatever bytes a peer sends, FrameReader
and decode raise only LogbrokerError subclasses; messages survive a round trip."""

from __future__ import annotations

import os
import struct

import msgpack
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.support.fixtures import SAMPLES

from logbroker.errors import FrameTooLargeError, LogbrokerError
from logbroker.protocol import messages as m
from logbroker.protocol.codec import NEED_DATA, DecodeError, FrameReader, decode, encode_bytes
from logbroker.protocol.schema import MAX_INT, MIN_INT

# LOGBROKER_FUZZ_EXAMPLES=20000 for a longer run
FUZZ = settings(max_examples=int(os.environ.get("LOGBROKER_FUZZ_EXAMPLES", "500")), deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
VALID = [encode_bytes(s, i) for i, s in enumerate(SAMPLES)]


def consume(data: bytes, cuts: list[int], max_frame: int = 4096, scratch: int = 64) -> int:
    """Feed ``data`` cut at ``cuts``; decode every frame. Returns frames decoded."""
    reader, good, pos = FrameReader(max_frame_bytes=max_frame, scratch_bytes=scratch), 0, 0
    for cut in sorted(cuts) + [len(data)]:
        try:
            reader.receive_data(data[pos:max(pos, cut)])
        except (FrameTooLargeError, DecodeError):  # the connection would close
            return good
        pos = max(pos, cut)
        while (frame := reader.next_frame()) is not NEED_DATA:
            assert isinstance(frame, (bytes, bytearray)) and len(frame) <= max_frame
            try:
                env = decode(frame)
            except DecodeError as exc:
                check_decode_error(exc)
                continue
            good += 1
            check_envelope(env)
    return good


def check_decode_error(exc: DecodeError) -> None:
    assert exc.code == 42 and isinstance(exc.message, str)
    assert exc.cid is None or 0 <= exc.cid <= MAX_INT
    assert exc.cause is None or isinstance(exc.cause, LogbrokerError)
    if exc.cause is not None or exc.api is not None:
        assert exc.cid is not None and type(exc.api) is int


def check_envelope(env) -> None:
    msg = env.message
    assert type(msg) in (m.RESPONSES if msg.RESPONSE else m.REQUESTS).values()
    if msg.HAS_PAYLOAD:
        assert [len(p) for p in msg.payload] == [p[-1] for p in msg.parts]
    data = encode_bytes(msg, env.cid)  # a decoded message re-encodes to a stable form
    assert encode_bytes(decode(data[4:]).message, env.cid) == data


cut_lists = st.lists(st.integers(0, 1 << 12), max_size=8)


@FUZZ
@given(st.binary(max_size=2048), cut_lists)
def test_arbitrary_bytes_raise_only_logbroker_errors(data, cuts):
    consume(data, cuts)


@FUZZ
@given(st.binary(max_size=600), cut_lists)
def test_arbitrary_frames_with_plausible_lengths(body, cuts):
    """Random contents behind a correct length prefix reach decode()."""
    hlen = min(len(body), body[0] if body else 0)
    consume(struct.pack(">II", len(body) + 4, hlen) + body, cuts)


@st.composite
def mutated(draw):
    data = bytearray(b"".join(draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=3))))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "set", "insert", "delete", "u32", "truncate"]))
        pos = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and data:
            data[pos] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del data[pos:pos + draw(st.integers(1, 8))]
        elif kind == "u32" and len(data) >= pos + 4:
            struct.pack_into(">I", data, pos, draw(st.sampled_from(
                [0, 1, 3, 4, 5, 8, 64, 255, 1 << 16, 1 << 31, 0xFFFFFFFF])))
        elif kind == "truncate":
            del data[pos:]
    return bytes(data)


@FUZZ
@given(mutated(), cut_lists)
def test_mutated_valid_frames_raise_only_logbroker_errors(data, cuts):
    consume(data, cuts, max_frame=1 << 16)


scalars = (st.none() | st.booleans() | st.integers(-(1 << 64), (1 << 64) - 1) | st.floats()
           | st.text(max_size=6) | st.binary(max_size=6))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=4), inner, max_size=4),
                      max_leaves=12)
api_numbers = st.sampled_from(sorted(m.REQUESTS)) | st.integers(-2, 20)


@st.composite
def structured_headers(draw):
    """Headers close to valid ones: right keys, body fields of the api's schema,
    some of them replaced by arbitrary msgpack values."""
    api, resp = draw(api_numbers), draw(st.booleans())
    cls = (m.RESPONSES if resp else m.REQUESTS).get(api)
    body = {}
    if cls is not None:
        sample = next((s for s in SAMPLES if type(s) is cls), None)
        for name in cls.SCHEMA:
            choice = draw(st.integers(0, 7))
            if choice == 0:
                body[name] = draw(values)
            elif choice >= 2 and sample is not None:
                body[name] = getattr(sample, name)
    cid = draw(st.integers(0, MAX_INT)) if draw(st.integers(0, 7)) else draw(values)
    header = {"api": api, "cid": cid, "resp": resp,
              "v": draw(st.sampled_from([1] * 6 + [0, 2, "1"])), "body": body}
    for key in draw(st.lists(st.sampled_from(sorted(header)), max_size=1)):
        header[key] = draw(values)
    return header


def pack(obj) -> bytes | None:
    try:
        return msgpack.packb(obj)
    except (OverflowError, ValueError, TypeError):
        return None


@FUZZ
@given(structured_headers(), st.binary(max_size=400))
def test_structured_headers_raise_only_logbroker_errors(header, payload):
    h = pack(header)
    if h is None:
        return
    frame = struct.pack(">I", len(h)) + h + payload
    try:
        env = decode(frame)
    except DecodeError as exc:
        check_decode_error(exc)
        event(exc.message.split(":")[0][:24])
        return
    event("decoded")
    check_envelope(env)


# -- round trips ---------------------------------------------------------------------------------
i64 = st.integers(MIN_INT, MAX_INT)
names = st.text(max_size=20)
cids = st.integers(0, MAX_INT)


@st.composite
def produces(draw):
    blobs = draw(st.lists(st.binary(max_size=300), max_size=5))
    parts = tuple((draw(names), draw(i64), len(b)) for b in blobs)
    return m.Produce(acks=draw(st.sampled_from([0, 1, -1]) | i64), timeout_ms=draw(i64),
                     producer_id=draw(i64), producer_epoch=draw(i64), parts=parts,
                     payload=tuple(blobs))


@st.composite
def fetch_responses(draw):
    blobs = draw(st.lists(st.binary(max_size=300), max_size=5))
    parts = tuple((draw(names), draw(i64), draw(i64), draw(names), draw(i64), draw(i64), len(b))
                  for b in blobs)
    return m.FetchResponse(error=draw(i64), message=draw(names), parts=parts,
                           payload=tuple(blobs))


fetches = st.builds(m.Fetch, max_wait_ms=i64, min_bytes=i64, max_bytes=i64,
                    parts=st.lists(st.tuples(names, i64, i64, i64), max_size=5).map(tuple))


@FUZZ
@given(produces() | fetches | fetch_responses(), cids, st.integers(8, 512), cut_lists)
def test_round_trip_through_the_reader(msg, cid, scratch, cuts):
    data = encode_bytes(msg, cid)
    reader, frames, pos = FrameReader(scratch_bytes=scratch), [], 0
    for cut in sorted(cuts) + [len(data)]:
        reader.receive_data(data[pos:max(pos, cut)])
        pos = max(pos, cut)
        while (frame := reader.next_frame()) is not NEED_DATA:
            frames.append(frame)
    assert len(frames) == 1 and reader.buffered_bytes == 0
    env = decode(frames[0])
    assert env.cid == cid and env.message == msg
    if msg.HAS_PAYLOAD:
        assert [bytes(p) for p in env.message.payload] == [bytes(p) for p in msg.payload]


@FUZZ
@given(st.integers(65, 4096), st.lists(st.integers(1, 1024), min_size=1, max_size=40),
       st.integers(1, 3))
def test_memory_held_follows_the_bytes_received(length, reads, frames):
    """Whatever the announced lengths and the read sizes, a reader holds at
    most four times the bytes of its incomplete frame (issue 9)."""
    body = struct.pack(">I", 4) + b"\x00" * (length - 4)  # header length 4, then zeros
    data = (struct.pack(">I", length) + body) * frames
    reader, pos, done, i = FrameReader(scratch_bytes=64), 0, 0, 0
    while pos < len(data):  # each turn moves at least one byte
        buf = reader.get_buffer()
        n = min(reads[i % len(reads)], len(buf), len(data) - pos)
        i += 1
        buf[:n] = data[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
        while reader.next_frame() is not NEED_DATA:
            done += 1
        assert reader.held_bytes <= 4 * reader.buffered_bytes, (pos, reader.held_bytes)
    assert done == frames and reader.held_bytes == 0 and not reader.in_frame
