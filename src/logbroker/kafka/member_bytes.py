"""Group member bytes between Kafka's ConsumerProtocol and ours (pure).

The coordinator keeps every subscription and assignment in *our*
encoding (protocol/consumer_protocol.py: msgpack maps), whichever listener
its member came through, so a Kafka consumer and a logbroker consumer can
be members of one group: the Kafka listener translates at its edge
(docs/architecture.md, decision 79).

- A Kafka member's subscription (JoinGroup metadata) becomes ours: topics,
  owned partitions and generation map field by field; Kafka's
  ``user_data`` and rack id ride along under the keys ``kafka_user_data``
  and ``kafka_rack`` (our decoders ignore keys they do not know).
- Every member's subscription goes to a Kafka leader in Kafka's encoding
  (v1, v2 with a generation, v3 with a rack), the extra keys restored.
- A Kafka leader's assignments (SyncGroup) become ours, user_data kept the
  same way; a Kafka member's assignment goes out as Kafka's (v0).

A round trip Kafka -> ours -> Kafka keeps every field (topics sorted and
unique, partitions grouped by topic). ``*_to_ours`` raise
``InvalidRequestError`` for bytes that do not parse or name topics our
rules refuse (the member's request is refused with it); ``*_to_kafka`` never
raise: bytes of ours that do not parse (a hand-made peer of our protocol)
become an empty subscription or assignment, and empty bytes stay empty.
"""

from __future__ import annotations

import logging

import msgpack

from ..protocol.consumer_protocol import VERSION, Assignment, Subscription
from ..errors import InvalidRequestError, LogbrokerError
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
    """A Kafka member's subscription in our encoding."""
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
    """A Kafka leader's assignment for one member, in our encoding."""
    if not data:
        return b""
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


def checked(fn, data: bytes) -> bytes:
    """``fn(data)``, any failure of Kafka's bytes as INVALID_REQUEST."""
    try:
        return fn(data)
    except LogbrokerError:
        raise
    except Exception as exc:  # noqa: BLE001 - a peer's bytes: never a traceback
        raise InvalidRequestError(f"group member bytes do not parse: {exc}") from None
