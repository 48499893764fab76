"""Every message of our protocol encodes to the same bytes as before its
parts had names (golden frames, tests/protocol/golden/frames.json): a sample
of each request and response class, built from its schema, encoded, and its
frame's SHA-256 compared; and the frame decodes back to an equal message
whose parts are read by name."""

from __future__ import annotations

import hashlib
import json

import pytest
from pathlib import Path

from logbroker.protocol import messages as m
from logbroker.protocol.codec import decode, encode_bytes
from logbroker.protocol.schema import Map, Opt, fields_of

GOLDEN = Path(__file__).resolve().parent / "golden" / "frames.json"


def sample(spec, seed: int):
    """A deterministic value of ``spec`` (varied by ``seed``)."""
    if isinstance(spec, Opt):
        return None if seed % 3 == 0 else sample(spec.spec, seed + 1)
    if isinstance(spec, Map):
        return {"retention_ms": 1000 + seed, "cleanup_policy": "compact"}
    if isinstance(spec, list):
        return tuple(sample(spec[0], seed * 7 + i) for i in range(2))
    items = fields_of(spec)
    if items is not None:
        return spec(*[sample(s, seed * 5 + i) for i, s in enumerate(items)])
    if isinstance(spec, tuple):
        return tuple(sample(s, seed * 5 + i) for i, s in enumerate(spec))
    if spec is int:
        return seed * 31 - 7
    if spec is bool:
        return seed % 2 == 0
    if spec is str:
        return f"s{seed}"
    if spec is bytes:
        return bytes([seed % 256]) * (seed % 5)
    if spec is object:
        return seed
    raise AssertionError(spec)


def build(cls):
    """A sample ``cls``; with a payload, each part's last field (its
    ``nbytes``) is made non-negative and the payload holds that many bytes."""
    values = {name: sample(spec, i + cls.API) for i, (name, spec) in enumerate(cls.SCHEMA.items())}
    if cls.HAS_PAYLOAD:
        values["parts"] = tuple(type(p)(*p[:-1], abs(p[-1])) if type(p) is not tuple
                                else (*p[:-1], abs(p[-1])) for p in values["parts"])
        values["payload"] = tuple(b"x" * abs(p[-1]) for p in values["parts"])
    return cls(**values)


def classes():
    return sorted(list(m.REQUESTS.values()) + list(m.RESPONSES.values()),
                  key=lambda c: (c.API, c.RESPONSE))


def frames() -> dict:
    return {cls.__name__: hashlib.sha256(encode_bytes(build(cls), 42)).hexdigest()
            for cls in classes()}


def test_frames_are_the_golden_ones():
    assert frames() == json.loads(GOLDEN.read_text())


def test_a_golden_frame_decodes_to_the_message_it_was():
    for cls in classes():
        if cls.HAS_PAYLOAD:
            continue
        msg = build(cls)
        back = decode(encode_bytes(msg, 7)[4:]).message  # the reader strips the length
        assert back == msg, cls.__name__


def test_a_message_from_an_older_peer_without_its_later_fields_decodes_with_their_defaults():
    """Fields added after a message shipped (``LATER``) may be absent: the
    decoder takes the dataclass default; any other missing field is refused."""
    import msgpack

    from logbroker.errors import InvalidRequestError
    from logbroker.protocol.codec import DecodeError

    def frame(cls, body: dict) -> bytes:
        header = msgpack.packb({"cid": 1, "api": cls.API, "resp": cls.RESPONSE, "v": 1,
                                "body": body})
        return len(header).to_bytes(4, "big") + header

    old_fetch = {"max_wait_ms": 5, "min_bytes": 1, "max_bytes": 100, "parts": []}
    got = decode(frame(m.Fetch, old_fetch)).message
    assert got == m.Fetch(max_wait_ms=5, min_bytes=1, max_bytes=100) and got.isolation == 0
    got = decode(frame(m.InitProducerId, {})).message
    assert got.transactional_id is None and got.producer_id == -1
    assert decode(frame(m.FindCoordinator, {"group": "g"})).message.key_type == 0
    with pytest.raises(DecodeError) as info:
        decode(frame(m.Fetch, {"max_wait_ms": 5, "min_bytes": 1, "parts": []}))
    assert "max_bytes" in str(info.value) and InvalidRequestError.code
