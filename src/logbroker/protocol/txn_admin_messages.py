"""An operator's transaction tools (Kafka's kafka-transactions.sh
``describe-producers``, ``find-hanging`` and ``abort``), at each
partition's leader.

``DescribeProducers``: the open transactions of each partition (producer id
and epoch, the coordinator epoch of its last marker, the first offset and
that batch's timestamp). ``AbortTxnPartition``: the leader writes an abort
marker for a producer's open transaction on a partition (a hanging one:
its coordinator will never end it); ALTER on the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import PartitionResult, TopicPartition
from .schema import part


@part
class OpenTxn(NamedTuple):
    """One producer's open transaction on a partition; ``first_timestamp``:
    the create time of its first batch (ms, -1 when unknown)."""
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    first_timestamp: int


@part
class PartitionProducers(NamedTuple):
    topic: str
    partition: int
    error: int
    message: str
    open: tuple[OpenTxn, ...]


@part
class AbortSpec(NamedTuple):
    """``producer_epoch`` / ``coordinator_epoch`` -1: the open transaction's
    epoch and the coordinator epoch of the producer's last marker there (at
    least 0), as Kafka's tool takes them from DescribeProducers."""
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


@_register
@dataclass(frozen=True)
class DescribeProducers(Message):
    API, SCHEMA = 60, {"parts": [TopicPartition]}
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeProducersResponse(Response):
    API, SCHEMA = 60, {**_RESP, "parts": [PartitionProducers]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class AbortTxnPartition(Message):
    API, SCHEMA = 61, {"parts": [AbortSpec]}
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class AbortTxnPartitionResponse(Response):
    API, SCHEMA = 61, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()
