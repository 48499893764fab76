"""Kafka's ConsumerProtocol: the subscription a consumer puts in its
JoinGroup metadata and the assignment its leader puts in SyncGroup, for
the group protocol type ``consumer`` (pure bytes).

Both are an int16 version followed by a struct of that version (Kafka's
ConsumerProtocolSubscription / ConsumerProtocolAssignment message specs),
written here as schemas for the generic codec (schema.py):

- Subscription v0: topics, user_data (nullable bytes); v1+ owned
  partitions by topic; v2+ generation id (-1 when none); v3+ rack id
  (nullable string).
- Assignment v0 (v1-v3 are the same fields): partitions by topic,
  user_data (nullable bytes).

Decoding is tolerant, as the bytes are a client's own business (Kafka's
classic coordinator never reads them; the listener reads them only to
translate for a logbroker member of the same group): the version says
which fields *may* follow, the bytes say which do. The first field (the
topics, the assigned partitions) must read; each later field of the
version is read while bytes remain, and a field missing at the end takes
its default. So a version newer than the newest known reads as the
newest known, and clients that write a higher version number with an
older layout (version 4 or version 1 over version 0's fields) read fine.
A later field that does not parse ends the reading (it and the rest at
their defaults) and bytes after the fields read are ignored.
``decode_*`` raise ``KafkaDecodeError`` when the version is negative or the
first field does not read.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import primitives as p
from .errors import KafkaDecodeError
from .schema import Array, F, Out, S, decoder, encoder

SUBSCRIPTION_VERSION = 3  # the newest version known (decoded, and the newest written)
ASSIGNMENT_VERSION = 3

_TOPIC_PARTITIONS = S("ConsumerProtocolTopicPartition",
                      F("topic", "string"),
                      F("partitions", Array("int32")))

SUBSCRIPTION = S(
    "ConsumerProtocolSubscription",
    F("topics", Array("string")),
    F("user_data", "bytes", nullable="0+", default=None),
    F("owned_partitions", Array(_TOPIC_PARTITIONS), "1+"),
    F("generation_id", "int32", "2+", default=-1),
    F("rack_id", "string", "3+", nullable="3+", default=None),
)

ASSIGNMENT = S(
    "ConsumerProtocolAssignment",
    F("assigned_partitions", Array(_TOPIC_PARTITIONS)),
    F("user_data", "bytes", nullable="0+", default=None),
)


@dataclass(frozen=True)
class KafkaSubscription:
    """A decoded ConsumerProtocol subscription (pairs of owned partitions
    in the order written)."""

    topics: tuple
    user_data: "bytes | None" = None
    owned: tuple = ()  # (topic, partition)
    generation: int = -1
    rack: "str | None" = None


@dataclass(frozen=True)
class KafkaAssignment:
    """A decoded ConsumerProtocol assignment."""

    partitions: tuple = ()  # (topic, partition)
    user_data: "bytes | None" = None


_ONE_FIELD = {id(f): S(f.name, f) for st in (SUBSCRIPTION, ASSIGNMENT) for f in st.fields}


def _tolerant(struct, data: bytes, newest: int) -> dict:
    """The fields of ``struct`` read from ``data`` (module docstring): name -> value."""
    view = memoryview(data)
    version, pos = p.dec_int16(view, 0)
    if version < 0:
        raise KafkaDecodeError(f"ConsumerProtocol version {version} is negative")
    version = min(version, newest)
    out: dict = {}
    for i, f in enumerate(struct.fields):
        if version not in f.versions:
            continue
        if i and pos >= len(view):
            break  # an older layout under a newer version number: the rest at defaults
        try:
            value, pos = decoder(_ONE_FIELD[id(f)], version)(view, pos)
        except KafkaDecodeError:
            if not i:
                raise
            break  # a later field that does not parse: it and the rest at defaults
        out[f.name] = getattr(value, f.name)
    return out


def _pairs(groups) -> tuple:
    return tuple((g.topic, part) for g in groups or () for part in g.partitions)


def _grouped(pairs) -> list:
    groups: dict = {}
    for topic, part in pairs:
        groups.setdefault(topic, []).append(part)
    return [{"topic": t, "partitions": parts} for t, parts in groups.items()]


def decode_subscription(data: bytes) -> KafkaSubscription:
    got = _tolerant(SUBSCRIPTION, data, SUBSCRIPTION_VERSION)
    return KafkaSubscription(tuple(got["topics"]), _bytes(got.get("user_data")),
                             _pairs(got.get("owned_partitions")), got.get("generation_id", -1),
                             got.get("rack_id"))


def encode_subscription(sub: KafkaSubscription, version: "int | None" = None) -> bytes:
    """At ``version`` (default: 1, or 2 with a generation, 3 with a rack)."""
    if version is None:
        version = 3 if sub.rack is not None else 2 if sub.generation >= 0 else 1
    out = Out()
    out += p.I16.pack(version)
    encoder(SUBSCRIPTION, version)({
        "topics": list(sub.topics), "user_data": sub.user_data,
        "owned_partitions": _grouped(sub.owned), "generation_id": sub.generation,
        "rack_id": sub.rack}, out)
    return bytes(out)


def decode_assignment(data: bytes) -> KafkaAssignment:
    got = _tolerant(ASSIGNMENT, data, ASSIGNMENT_VERSION)
    return KafkaAssignment(_pairs(got["assigned_partitions"]), _bytes(got.get("user_data")))


def encode_assignment(a: KafkaAssignment, version: int = 0) -> bytes:
    out = Out()
    out += p.I16.pack(version)
    encoder(ASSIGNMENT, version)({"assigned_partitions": _grouped(a.partitions),
                                  "user_data": a.user_data}, out)
    return bytes(out)


def _bytes(value) -> "bytes | None":
    return None if value is None else bytes(value)
