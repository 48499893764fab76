"""Protocol messages of partition and records administration (docs/protocol.md).

Registered in the same tables as messages.py (which re-exports them):

- ``CreatePartitions``: raise each topic's partition count; the existing
  partitions and their data are untouched. ``assignments``: the new
  partitions' replicas (one tuple of broker ids per new partition, the
  first its preferred leader), or empty: placed by the broker.
  ``validate_only``: every check, nothing made.
- ``DeleteRecords``: move each partition's log start up to ``offset`` (-1:
  its high watermark), asked of the partition's leader; the answer's
  ``low_watermark`` is the log start after the move.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import TopicResult
from .schema import part

HIGH_WATERMARK = -1  # DeleteRecords' offset: everything below the high watermark


@part
class PartitionsIncrease(NamedTuple):
    """A topic's new partition count, and the new partitions' replicas
    (empty: the broker places them)."""
    name: str
    count: int
    assignments: tuple[tuple[int, ...], ...]


@part
class RecordsCut(NamedTuple):
    """Delete a partition's records below ``offset`` (-1: the high watermark)."""
    topic: str
    partition: int
    offset: int


@part
class RecordsCutResult(NamedTuple):
    """The partition's log start after the cut (-1 with an error)."""
    topic: str
    partition: int
    error: int
    message: str
    low_watermark: int


@_register
@dataclass(frozen=True)
class CreatePartitions(Message):
    API, SCHEMA = 40, {"topics": [PartitionsIncrease], "validate_only": bool}
    topics: tuple = ()
    validate_only: bool = False


@_register
@dataclass(frozen=True)
class CreatePartitionsResponse(Response):
    """topics: (name, error, message) in the request's order."""

    API, SCHEMA = 40, {**_RESP, "topics": [TopicResult]}
    error: int = 0
    message: str = ""
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteRecords(Message):
    API, SCHEMA = 41, {"parts": [RecordsCut]}
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteRecordsResponse(Response):
    """parts: (topic, partition, error, message, low_watermark)."""

    API, SCHEMA = 41, {**_RESP, "parts": [RecordsCutResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()
