"""Group member bytes between Kafka's ConsumerProtocol and ours (pure).

The coordinator keeps every member's subscription and assignment as the
member (or its leader) wrote them, tagged with whose encoding they are
in: Kafka's ConsumerProtocol for a member of the Kafka listener, ours
(protocol/consumer_protocol.py: msgpack maps) for a member of ours. Bytes
go to a reader of the same encoding byte for byte (Kafka's classic
coordinator treats them as opaque too); only where a Kafka member and a
logbroker member share a ``consumer`` group are they translated, by
``for_reader`` (docs/architecture.md, decision 79):

- A Kafka member's subscription becomes ours: topics, owned partitions and
  generation map field by field; Kafka's ``user_data`` and rack id ride
  along under the keys ``kafka_user_data`` and ``kafka_rack`` (our decoders
  ignore keys they do not know).
- Our subscription goes to a Kafka leader in Kafka's encoding (v1, v2 with
  a generation, v3 with a rack), the extra keys restored.
- A Kafka leader's assignment becomes ours, user_data kept the same way;
  ours goes to a Kafka member as Kafka's (v0).

Nothing here raises: Kafka's bytes are read tolerantly
(kafka/consumer_protocol.py: unknown versions, missing or trailing
optional fields); bytes that still do not read, or name topics our rules
refuse, give that one member an empty subscription or assignment (a debug
line says why), never a refusal of the group's requests. Empty bytes stay
empty.
"""

from __future__ import annotations

import logging

import msgpack

from ..protocol.consumer_protocol import VERSION, Assignment, Subscription
from ..errors import LogbrokerError
from .errors import KafkaDecodeError
from .consumer_protocol import (KafkaAssignment, KafkaSubscription, decode_assignment,
                                decode_subscription, encode_assignment, encode_subscription)

log = logging.getLogger("logbroker.kafka")
USER_DATA, RACK = "kafka_user_data", "kafka_rack"


def _grouped(pairs) -> list:
    groups: list = []
    for topic, partition in sorted(set(pairs)):
        if not groups or groups[-1][0] != topic:
            groups.append([topic, []])
        groups[-1][1].append(partition)
    return groups


def _extras(data: bytes) -> dict:
    """Our map's Kafka-only keys (the map itself was checked by our decoder)."""
    body = msgpack.unpackb(data, raw=False, strict_map_key=False)
    user_data, rack = body.get(USER_DATA), body.get(RACK)
    return {"user_data": user_data if isinstance(user_data, bytes) else None,
            "rack": rack if isinstance(rack, str) else None}


def subscription_to_ours(data: bytes) -> bytes:
    """A Kafka member's subscription in our encoding (unreadable: an empty one)."""
    try:
        return _subscription_to_ours(data)
    except (KafkaDecodeError, LogbrokerError) as exc:
        log.debug("a Kafka member's subscription does not read (%s): given as empty", exc)
        return Subscription(()).encode()


def _subscription_to_ours(data: bytes) -> bytes:
    sub = decode_subscription(data)
    body = {"v": VERSION, "topics": sorted(set(sub.topics)), "owned": _grouped(sub.owned),
            "generation": max(sub.generation, -1)}
    if sub.user_data is not None:
        body[USER_DATA] = sub.user_data
    if sub.rack is not None:
        body[RACK] = sub.rack
    out = msgpack.packb(body, use_bin_type=True)
    Subscription.decode(out)  # our rules for names and numbers: InvalidRequestError
    return out


def _ours(cls, data: bytes):
    """(value, Kafka-only keys) of our bytes, or None if they do not parse."""
    try:
        return cls.decode(data), _extras(data)
    except (LogbrokerError, ValueError) as exc:
        log.debug("a member's %s does not parse (%s): given as empty", cls.__name__, exc)
        return None


def subscription_to_kafka(data: bytes) -> bytes:
    """Any member's subscription (ours) in Kafka's encoding, for a Kafka leader."""
    if not data:
        return b""
    got = _ours(Subscription, data)
    if got is None:
        return encode_subscription(KafkaSubscription(()))
    sub, extras = got
    return encode_subscription(KafkaSubscription(sub.topics, extras["user_data"], sub.owned,
                                                 sub.generation, extras["rack"]))


def assignment_to_ours(data: bytes) -> bytes:
    """A Kafka leader's assignment for one member, in our encoding
    (unreadable: empty bytes, no partitions)."""
    if not data:
        return b""
    try:
        return _assignment_to_ours(data)
    except (KafkaDecodeError, LogbrokerError) as exc:
        log.debug("a Kafka leader's assignment does not read (%s): given as empty", exc)
        return b""


def _assignment_to_ours(data: bytes) -> bytes:
    a = decode_assignment(data)
    body = {"v": VERSION, "partitions": _grouped(a.partitions)}
    if a.user_data is not None:
        body[USER_DATA] = a.user_data
    out = msgpack.packb(body, use_bin_type=True)
    Assignment.decode(out)
    return out


def assignment_to_kafka(data: bytes) -> bytes:
    """A member's assignment (ours) in Kafka's encoding, for a Kafka member."""
    if not data:
        return b""
    got = _ours(Assignment, data)
    if got is None:
        return encode_assignment(KafkaAssignment())
    return encode_assignment(KafkaAssignment(got[0].partitions, got[1]["user_data"]))


SUBSCRIPTION, ASSIGNMENT = "subscription", "assignment"
_TRANSLATE = {(SUBSCRIPTION, True): subscription_to_kafka,
              (SUBSCRIPTION, False): subscription_to_ours,
              (ASSIGNMENT, True): assignment_to_kafka, (ASSIGNMENT, False): assignment_to_ours}


def for_reader(kind: str, data: bytes, kafka_bytes: bool, kafka_reader: bool) -> bytes:
    """``data`` (a ``kind`` of ``consumer`` group: SUBSCRIPTION or
    ASSIGNMENT; Kafka's encoding when ``kafka_bytes``, else ours) for a
    reader of Kafka's encoding (``kafka_reader``) or ours: the same bytes
    when both are the same, else translated."""
    if kafka_bytes == kafka_reader:
        return data
    return _TRANSLATE[(kind, kafka_reader)](data)


SUBSCRIBED_BUDGET = 64 << 10  # bytes of subscriptions read per question (~4 ms of the loop)


def subscribed_topics(subscriptions) -> "frozenset | None":
    """The topics that ``subscriptions`` (``(bytes, kafka_bytes)`` pairs of
    a ``consumer`` group's members) name together, or None when that is not
    known: a subscription is empty or does not read, or they hold more than
    ``SUBSCRIBED_BUDGET`` bytes together (Kafka's "subscribed topics
    unknown", read as subscribed to every topic)."""
    topics: set = set()
    budget = SUBSCRIBED_BUDGET
    for data, kafka in subscriptions:
        budget -= len(data)
        if not data or budget < 0:
            return None
        try:
            topics.update(decode_subscription(data).topics if kafka
                          else Subscription.decode(data).topics)
        except (KafkaDecodeError, LogbrokerError) as exc:
            log.debug("a member's subscription does not read (%s): topics unknown", exc)
            return None
    return frozenset(topics)
