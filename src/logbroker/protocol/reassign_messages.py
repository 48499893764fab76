"""Protocol messages of partition reassignment (docs/cluster.md,
"Reassigning partitions"; cluster/reassignment.py has the rules).

Registered in the same tables as messages.py (which re-exports them):

- ``AlterReassignments``: per partition a target replica list (broker
  ids, the first the preferred leader), or None to cancel the move in
  progress; each answered with its own error (UNKNOWN_TOPIC_OR_PARTITION,
  INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS). The answer
  comes once the move has started; it finishes in the background.
- ``ListReassignments``: the moves in progress among the named topics
  (a topic's partitions None: all of them; topics None: every topic).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .message_base import RESP as _RESP, Message, Response, register as _register
from .schema import Opt, part


@part
class Reassignment(NamedTuple):
    """One partition's target replicas (None: cancel its move)."""
    topic: str
    partition: int
    replicas: tuple[int, ...] | None


@part
class Reassigned(NamedTuple):
    topic: str
    partition: int
    error: int
    message: str


@part
class Moving(NamedTuple):
    """A move in progress: every replica now (the targets first), the ones
    being added and the ones that leave when it finishes."""
    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


@part
class WantedTopic(NamedTuple):
    topic: str
    partitions: tuple[int, ...] | None


@_register
@dataclass(frozen=True)
class AlterReassignments(Message):
    API, SCHEMA = 45, {"parts": [Reassignment]}
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class AlterReassignmentsResponse(Response):
    API, SCHEMA = 45, {**_RESP, "parts": [Reassigned]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class ListReassignments(Message):
    API, SCHEMA = 46, {"topics": Opt([WantedTopic])}
    topics: "tuple | None" = None


@_register
@dataclass(frozen=True)
class ListReassignmentsResponse(Response):
    API, SCHEMA = 46, {**_RESP, "parts": [Moving]}
    error: int = 0
    message: str = ""
    parts: tuple = ()
