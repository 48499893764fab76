"""The assignors' value objects and their msgpack encodings.

``Subscription`` is what a member sends in JoinGroup (per assignor), ``Assignment``
what the group leader sends back per member in SyncGroup, ``Member`` one
member as the leader sees it. All are frozen; their constructors normalize
(topics and partitions sorted and unique, lists turned into tuples), so two
equal values encode to the same bytes.

Encodings (msgpack maps, ``v`` is the format version):

- Subscription: ``{"v": 0, "topics": [name, ...], "owned": [[topic, [partition, ...]], ...],
  "generation": int}``
- Assignment: ``{"v": 0, "partitions": [[topic, [partition, ...]], ...]}``

``decode`` accepts exactly what some ``encode`` could have produced, plus keys
it does not know (a newer member's additions are ignored, as Kafka's
ConsumerProtocol reads a newer version as its own) and lists in any order or
with repeats (normalized). Anything else raises ``InvalidRequestError`` and
nothing else: bad msgpack, trailing bytes, wrong types, a version below 0,
names that break the topic rule, partitions outside 0..MAX_PARTITIONS-1,
generations outside -1..2**31-1, or more than MAX_TOPICS topics or
MAX_PARTITIONS_PER_MEMBER partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import msgpack

from ..errors import InvalidRequestError, InvalidTopicError
from ..limits import MAX_INT32, MAX_PARTITIONS, check_int, check_partition, \
    check_topic_name

VERSION = 0
NO_GENERATION = -1
MAX_TOPICS = 10_000  # topics one member may subscribe to or be assigned partitions of
MAX_PARTITIONS_PER_MEMBER = 100_000  # owned or assigned partitions of one member
MAX_ENCODED_BYTES = 8 << 20  # a generous bound: MAX_TOPICS names of 249 characters fit
MAX_KEYS = 64  # keys of one map (room for a newer version's fields)

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class Subscription:
    """A member's JoinGroup metadata: the topics it subscribes to and, for the
    cooperative protocol, the partitions it owns now and the generation in
    which it got them (``NO_GENERATION`` when it never had an assignment)."""

    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...] = ()
    generation: int = NO_GENERATION

    def __post_init__(self) -> None:
        object.__setattr__(self, "topics", tuple(sorted(set(self.topics))))
        object.__setattr__(self, "owned", _partitions(self.owned))

    def encode(self) -> bytes:
        return msgpack.packb({"v": VERSION, "topics": list(self.topics),
                              "owned": _grouped(self.owned), "generation": self.generation})

    @classmethod
    def decode(cls, data: bytes) -> "Subscription":
        """The Subscription in ``data``; ``InvalidRequestError`` if malformed."""
        body = _unpack(data, "subscription")
        topics = _list(body.get("topics"), "subscription.topics", MAX_TOPICS)
        return cls(tuple(_topic(t, "subscription.topics") for t in topics),
                   _ungrouped(body.get("owned", []), "subscription.owned"),
                   check_int(body.get("generation", NO_GENERATION), "subscription.generation",
                             NO_GENERATION, MAX_INT32))


@dataclass(frozen=True)
class Assignment:
    """The partitions the leader gives one member in one generation (sorted)."""

    partitions: tuple[TopicPartition, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "partitions", _partitions(self.partitions))

    def encode(self) -> bytes:
        return msgpack.packb({"v": VERSION, "partitions": _grouped(self.partitions)})

    @classmethod
    def decode(cls, data: bytes) -> "Assignment":
        """The Assignment in ``data``; ``InvalidRequestError`` if malformed."""
        body = _unpack(data, "assignment")
        return cls(_ungrouped(body.get("partitions"), "assignment.partitions"))


@dataclass(frozen=True)
class Member:
    """One group member as the leader's assignor sees it. ``group_instance_id``
    is set for static members (KIP-345); assignors that order members order
    static ones by it, so a restarted static member gets the same partitions."""

    member_id: str
    subscription: Subscription
    group_instance_id: "str | None" = None


def _partitions(items: Iterable[TopicPartition]) -> tuple[TopicPartition, ...]:
    return tuple(sorted({(t, p) for t, p in items}))


def _grouped(partitions: tuple[TopicPartition, ...]) -> list:
    """Sorted (topic, partition) pairs as [[topic, [partition, ...]], ...]."""
    groups: list = []
    for topic, partition in partitions:
        if not groups or groups[-1][0] != topic:
            groups.append([topic, []])
        groups[-1][1].append(partition)
    return groups


def _unpack(data: object, what: str) -> dict:
    """The top-level map of an encoding, its version checked."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidRequestError(f"{what}: expected bytes, got {type(data).__name__}")
    if len(data) > MAX_ENCODED_BYTES:
        raise InvalidRequestError(f"{what}: {len(data)} bytes exceed {MAX_ENCODED_BYTES}")
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True,
                               max_array_len=MAX_PARTITIONS_PER_MEMBER, max_map_len=MAX_KEYS)
    except Exception as exc:  # noqa: BLE001 - msgpack raises many types (ExtraData, ValueError, ...)
        raise InvalidRequestError(f"{what} is not valid msgpack: {type(exc).__name__}") from None
    if not isinstance(body, dict):
        raise InvalidRequestError(f"{what}: expected a map, got {type(body).__name__}")
    check_int(body.get("v"), f"{what}.v", 0, MAX_INT32)
    return body


def _list(value: Any, what: str, limit: int) -> list:
    if not isinstance(value, list):
        raise InvalidRequestError(f"{what}: expected a list")
    if len(value) > limit:
        raise InvalidRequestError(f"{what}: {len(value)} items exceed {limit}")
    return value


def _topic(value: Any, what: str) -> str:
    try:
        return check_topic_name(value)
    except InvalidTopicError as exc:
        raise InvalidRequestError(f"{what}: {exc.message}") from None


def _ungrouped(value: Any, what: str) -> list[TopicPartition]:
    """[[topic, [partition, ...]], ...] checked and flattened."""
    pairs: list[TopicPartition] = []
    for group in _list(value, what, MAX_TOPICS):
        if not isinstance(group, list) or len(group) != 2:
            raise InvalidRequestError(f"{what}: expected [topic, [partition, ...]] pairs")
        topic = _topic(group[0], what)
        numbers = _list(group[1], f"{what}[{topic}]", MAX_PARTITIONS)
        pairs.extend((topic, check_partition(p)) for p in numbers)
        if len(pairs) > MAX_PARTITIONS_PER_MEMBER:
            raise InvalidRequestError(f"{what}: more than {MAX_PARTITIONS_PER_MEMBER} partitions")
    return pairs
