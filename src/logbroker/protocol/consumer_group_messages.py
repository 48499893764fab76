"""Protocol messages of consumer-protocol groups (Kafka 4's KIP-848),
registered in the same tables as messages.py (which re-exports them). Their
API numbers are Kafka's (68, 69), far from ours, so no other message takes them.

- ``ConsumerGroupHeartbeat``: a member's heartbeat: epoch 0 joins, -1
  leaves, -2 leaves as a static member coming back; its subscription (topic
  names and/or an RE2 regex) and the partitions it owns, each None when
  unchanged since its last heartbeat. The answer: its member id and epoch,
  the heartbeat interval, and its assignment (None: unchanged). Topics are
  named by name here (the Kafka listener maps Kafka's topic ids).
- ``ConsumerGroupDescribe``: groups with their epochs, assignor and members
  (subscription, current and target assignment). A classic group is
  GROUP_ID_NOT_FOUND here, as in Kafka.

Errors: UNKNOWN_MEMBER_ID (25), FENCED_MEMBER_EPOCH (110),
UNRELEASED_INSTANCE_ID (111), UNSUPPORTED_ASSIGNOR (112), INVALID_REGULAR_EXPRESSION
(128), GROUP_ID_NOT_FOUND
(69: the group is a classic group with members), GROUP_MAX_SIZE_REACHED
(81), INVALID_REQUEST (a rule of the request), NOT_COORDINATOR (16),
COORDINATOR_LOAD_IN_PROGRESS (14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .message_base import RESP as _RESP, Message, Response, register as _register
from .schema import Opt, part


@part
class TopicPartitions(NamedTuple):
    """A topic's partitions in an assignment."""
    topic: str
    partitions: tuple[int, ...]


@part
class ConsumerMemberDescription(NamedTuple):
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    host: str
    topic_names: tuple[str, ...]
    topic_regex: str | None
    assigned: tuple[TopicPartitions, ...]
    target: tuple[TopicPartitions, ...]


@part
class ConsumerGroupDescription(NamedTuple):
    group: str
    error: int
    message: str
    state: str
    group_epoch: int
    assignment_epoch: int
    assignor: str
    members: tuple[ConsumerMemberDescription, ...]


@_register
@dataclass(frozen=True)
class ConsumerGroupHeartbeat(Message):
    API, SCHEMA = 68, {"group": str, "member_id": str, "member_epoch": int,
                       "instance_id": Opt(str), "rack_id": Opt(str),
                       "rebalance_timeout_ms": int, "topic_names": Opt([str]),
                       "topic_regex": Opt(str), "assignor": Opt(str),
                       "owned": Opt([TopicPartitions]), "client_id": str}
    group: str = ""
    member_id: str = ""
    member_epoch: int = 0
    instance_id: "str | None" = None
    rack_id: "str | None" = None
    rebalance_timeout_ms: int = -1
    topic_names: "tuple | None" = None
    topic_regex: "str | None" = None
    assignor: "str | None" = None
    owned: "tuple | None" = None
    client_id: str = ""


@_register
@dataclass(frozen=True)
class ConsumerGroupHeartbeatResponse(Response):
    API, SCHEMA = 68, {**_RESP, "member_id": str, "member_epoch": int,
                       "heartbeat_interval_ms": int, "assignment": Opt([TopicPartitions])}
    error: int = 0
    message: str = ""
    member_id: str = ""
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: "tuple | None" = None


@_register
@dataclass(frozen=True)
class ConsumerGroupDescribe(Message):
    API, SCHEMA = 69, {"groups": [str]}
    groups: tuple = ()


@_register
@dataclass(frozen=True)
class ConsumerGroupDescribeResponse(Response):
    API, SCHEMA = 69, {**_RESP, "groups": [ConsumerGroupDescription]}
    error: int = 0
    message: str = ""
    groups: tuple = ()
