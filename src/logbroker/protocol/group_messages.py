"""Protocol messages of consumer-group membership (Kafka's classic group
protocol, KIP-429's cooperative variant included).

Registered in the same tables as messages.py (which re-exports them):

- ``FindCoordinator``: which broker coordinates a group (the leader of the
  group's partition of the internal offsets topic).
- ``JoinGroup``: a member (re)joins; the coordinator waits until every known
  member has rejoined (or its rebalance timeout passed), then answers all of
  them with the new generation; the leader's answer lists every member with
  its protocol metadata (its subscription), so the leader runs the assignor.
- ``SyncGroup``: the leader sends each member's assignment; every member's
  answer is its own assignment.
- ``Heartbeat``: a member is alive; REBALANCE_IN_PROGRESS tells it to rejoin.
- ``LeaveGroup``: members leave at once (no wait for their session timeout).
- ``DeleteOffsets``: forget a group's committed offsets of some partitions
  (Kafka's OffsetDelete).

Protocol metadata and assignments are opaque bytes here (the client's
assignors encode them); the coordinator bounds their sizes, never decodes
them. ``kafka_bytes`` / ``member_kafka`` are in-process fields, never on our
wire (not in ``SCHEMA``): the Kafka listener's translator sets them, so the
coordinator knows whose bytes are Kafka's ConsumerProtocol and whose ours.
"""

from __future__ import annotations

from dataclasses import dataclass

from .message_base import RESP as _RESP, Message, Response, register as _register
from .schema import Opt
from .parts import (JoinedMember, LeavingMember, MemberAssignment, MemberResult, PartitionResult,
                    Protocol, TopicPartition)


@_register
@dataclass(frozen=True)
class FindCoordinator(Message):
    """The coordinator of ``group``: with ``key_type`` 0 a consumer group's
    (``group`` its name), 1 a transactional id's (``group`` the id; the
    leader of its partition of the transaction state topic)."""

    API, SCHEMA = 18, {"group": str, "key_type": int}
    LATER = frozenset({"key_type"})
    group: str = ""
    key_type: int = 0


@_register
@dataclass(frozen=True)
class FindCoordinatorResponse(Response):
    """The coordinator's broker id, host and port (error COORDINATOR_NOT_AVAILABLE
    while the group's offsets partition has no leader)."""

    API, SCHEMA = 18, {**_RESP, "broker_id": int, "host": str, "port": int}
    error: int = 0
    message: str = ""
    broker_id: int = -1
    host: str = ""
    port: int = 0


@_register
@dataclass(frozen=True)
class JoinGroup(Message):
    """member_id "" for a new member (the coordinator assigns one);
    protocols: (assignor name, metadata) in the member's preference order."""

    API, SCHEMA = 19, {"group": str, "session_timeout_ms": int, "rebalance_timeout_ms": int,
                       "member_id": str, "group_instance_id": Opt(str), "protocol_type": str,
                       "protocols": [Protocol], "client_id": str}
    group: str = ""
    session_timeout_ms: int = 45_000
    rebalance_timeout_ms: int = 300_000
    member_id: str = ""
    group_instance_id: "str | None" = None
    protocol_type: str = "consumer"
    protocols: tuple = ()
    client_id: str = ""  # shown by DescribeGroups
    kafka_bytes: bool = False  # in-process: the member's bytes are Kafka's (its listener's)


@_register
@dataclass(frozen=True)
class JoinGroupResponse(Response):
    """members (for the leader only): (member_id, group_instance_id, metadata)
    of every member of the generation, metadata for the chosen protocol."""

    API, SCHEMA = 19, {**_RESP, "generation": int, "protocol": str, "leader": str,
                       "member_id": str, "members": [JoinedMember]}
    error: int = 0
    message: str = ""
    generation: int = -1
    protocol: str = ""
    leader: str = ""
    member_id: str = ""
    members: tuple = ()
    member_kafka: tuple = ()  # in-process: per member, True when its metadata is Kafka's


@_register
@dataclass(frozen=True)
class SyncGroup(Message):
    """assignments (from the leader only): (member_id, assignment bytes)."""

    API, SCHEMA = 20, {"group": str, "generation": int, "member_id": str,
                       "group_instance_id": Opt(str), "assignments": [MemberAssignment]}
    group: str = ""
    generation: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None
    assignments: tuple = ()
    kafka_bytes: bool = False  # in-process: the leader's assignments are Kafka's


@_register
@dataclass(frozen=True)
class SyncGroupResponse(Response):
    API, SCHEMA = 20, {**_RESP, "assignment": bytes}
    error: int = 0
    message: str = ""
    assignment: bytes = b""


@_register
@dataclass(frozen=True)
class Heartbeat(Message):
    API, SCHEMA = 21, {"group": str, "generation": int, "member_id": str,
                       "group_instance_id": Opt(str)}
    group: str = ""
    generation: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None


@_register
@dataclass(frozen=True)
class HeartbeatResponse(Response):
    API, SCHEMA = 21, {**_RESP}
    error: int = 0
    message: str = ""


@_register
@dataclass(frozen=True)
class LeaveGroup(Message):
    """members: (member_id, group_instance_id)."""

    API, SCHEMA = 22, {"group": str, "members": [LeavingMember]}
    group: str = ""
    members: tuple = ()


@_register
@dataclass(frozen=True)
class LeaveGroupResponse(Response):
    """members: (member_id, error, message)."""

    API, SCHEMA = 22, {**_RESP, "members": [MemberResult]}
    error: int = 0
    message: str = ""
    members: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteOffsets(Message):
    """parts: (topic, partition) whose committed offsets ``group`` forgets."""

    API, SCHEMA = 47, {"group": str, "parts": [TopicPartition]}
    group: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteOffsetsResponse(Response):
    """error: the group's (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP: a group of
    another protocol type with members); parts: (topic, partition, error,
    message), GROUP_SUBSCRIBED_TO_TOPIC where an active member subscribes
    to the topic."""

    API, SCHEMA = 47, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()
