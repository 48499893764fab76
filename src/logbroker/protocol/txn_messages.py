"""Transactions (Kafka's KIP-98 design, docs/protocol.md "Transactions").

A transactional producer finds its transaction coordinator
(``FindCoordinator`` with key type 1), gets its producer id and a new
epoch (``InitProducerId`` with its transactional id), then for each
transaction: names every partition before its first write to it
(``AddPartitionsToTxn``) and every group whose offsets it commits
(``AddOffsetsToTxn``, then ``TxnOffsetCommit`` to that group's
coordinator), and ends it (``EndTxn``: commit or abort). The coordinator
then has each partition's leader write a marker (``WriteTxnMarkers``,
broker to broker, brokers only). ``DescribeTransactions`` and
``ListTransactions`` show the coordinators' state.

Errors are Kafka's (errors.py): INVALID_PRODUCER_ID_MAPPING (the id does
not belong to the transactional id), PRODUCER_FENCED (an older epoch),
CONCURRENT_TRANSACTIONS (the previous transaction is still completing:
retry), INVALID_TXN_STATE, TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

from dataclasses import dataclass

from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import (MarkerResult, OffsetCommit, PartitionResult, TopicPartition, TxnDescription,
                    TxnListing, TxnMarker)
from .schema import Opt

_TXN = {"transactional_id": str, "producer_id": int, "producer_epoch": int}


@_register
@dataclass(frozen=True)
class AddPartitionsToTxn(Message):
    """parts: the partitions the producer is about to write in its open
    transaction (one is opened if none is)."""

    API, SCHEMA = 52, {**_TXN, "parts": [TopicPartition]}
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class AddPartitionsToTxnResponse(Response):
    """parts: (topic, partition, error, message)."""

    API, SCHEMA = 52, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class AddOffsetsToTxn(Message):
    """``group``'s offsets join the transaction (its partition of the
    offsets topic gets the transaction's marker)."""

    API, SCHEMA = 53, {**_TXN, "group": str}
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    group: str = ""


@_register
@dataclass(frozen=True)
class AddOffsetsToTxnResponse(Response):
    API, SCHEMA = 53, {**_RESP}
    error: int = 0
    message: str = ""


@_register
@dataclass(frozen=True)
class EndTxn(Message):
    """Commit (``commit`` true) or abort the open transaction. Answered once
    the decision is durable in the transaction state topic; the markers
    follow (the next transaction of this id waits for them)."""

    API, SCHEMA = 54, {**_TXN, "commit": bool}
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    commit: bool = True


@_register
@dataclass(frozen=True)
class EndTxnResponse(Response):
    API, SCHEMA = 54, {**_RESP}
    error: int = 0
    message: str = ""


@_register
@dataclass(frozen=True)
class TxnOffsetCommit(Message):
    """To ``group``'s coordinator: offsets committed in the producer's open
    transaction, visible to the group only once it commits. ``generation``,
    ``member_id``, ``group_instance_id``: the consumer's membership the
    offsets come from (-1, "", None: not checked, KIP-447's older form)."""

    API, SCHEMA = 55, {**_TXN, "group": str, "generation": int, "member_id": str,
                       "group_instance_id": Opt(str), "offsets": [OffsetCommit]}
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    group: str = ""
    generation: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None
    offsets: tuple = ()


@_register
@dataclass(frozen=True)
class TxnOffsetCommitResponse(Response):
    """parts: (topic, partition, error, message)."""

    API, SCHEMA = 55, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class WriteTxnMarkers(Message):
    """Broker to broker: the leader of each marker's partition writes it
    (acks=all) and answers per marker."""

    API, SCHEMA = 56, {"markers": [TxnMarker]}
    markers: tuple = ()


@_register
@dataclass(frozen=True)
class WriteTxnMarkersResponse(Response):
    """parts: (producer_id, topic, partition, error, message) per marker."""

    API, SCHEMA = 56, {**_RESP, "parts": [MarkerResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeTransactions(Message):
    API, SCHEMA = 57, {"transactional_ids": [str]}
    transactional_ids: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeTransactionsResponse(Response):
    """transactions: a TxnDescription per id asked (error
    TRANSACTIONAL_ID_NOT_FOUND for an unknown one)."""

    API, SCHEMA = 57, {**_RESP, "transactions": [TxnDescription]}
    error: int = 0
    message: str = ""
    transactions: tuple = ()


@_register
@dataclass(frozen=True)
class ListTransactions(Message):
    """Every transactional id this broker coordinates; ``states``: only
    those in one of these states (empty: all)."""

    API, SCHEMA = 58, {"states": [str]}
    states: tuple = ()


@_register
@dataclass(frozen=True)
class ListTransactionsResponse(Response):
    API, SCHEMA = 58, {**_RESP, "transactions": [TxnListing]}
    error: int = 0
    message: str = ""
    transactions: tuple = ()


@_register
@dataclass(frozen=True)
class VerifyTxnPartitions(Message):
    """Broker to broker (KIP-890 part 1, Kafka's AddPartitionsToTxn v4
    "verify only"): a partition leader asks the transaction coordinator of
    ``transactional_id`` whether ``producer_id`` at ``producer_epoch`` holds
    its open transaction with each of ``parts`` in it, before that
    producer's first transactional batch on the partition."""

    API, SCHEMA = 59, {**_TXN, "parts": [TopicPartition]}
    transactional_id: str = ""
    producer_id: int = -1
    producer_epoch: int = -1
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class VerifyTxnPartitionsResponse(Response):
    """parts: (topic, partition, error, message): 0, INVALID_TXN_STATE or
    INVALID_PRODUCER_EPOCH per part; a top-level error for the coordinator's
    own (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, ...)."""

    API, SCHEMA = 59, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()
