"""Protocol messages: one frozen dataclass per request and response.

Each class names its ``API`` number and a ``SCHEMA`` (field -> spec, see
schema.py) that the codec checks on decode. Per-partition entries are
tuples, in the field order the schema gives. Every response carries
``error`` (a code from errors.py, 0 = none) and ``message``; per-partition
entries carry their own error and message. ``payload`` (Produce requests,
Fetch responses) is raw record batch bytes, sent verbatim after the header:
a sequence of buffers, the n-th part's ``nbytes`` of them in part order.

docs/protocol.md describes every message.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .schema import Opt
from ..limits import EARLIEST, LATEST  # noqa: F401 (ListOffsets specs, defined with their check)

PROTOCOL_VERSION = 1
# a handler's answer meaning: write nothing and close the connection (an acks=0
# Produce that failed: its client learns of the error by the close, Kafka's rule)
CLOSE_CONNECTION = object()

from .message_base import REQUESTS, RESPONSES, RESP as _RESP, Message, Response, register as _register  # noqa: F401
from .parts import FetchResolved, TxnPartState
from .parts import (BrokerAddress, CommittedPart, FetchedPart, FetchPart, GroupDescription,
                    GroupResult, NewTopic, OffsetCommit, OffsetFound, OffsetQuery, PartitionLeaders,
                    PartitionResult, ProducedPart, ProducePart, TopicCount, TopicDescription,
                    TopicPartition, TopicResult)



@_register
@dataclass(frozen=True)
class Handshake(Message):
    API, SCHEMA = 0, {"client_id": str, "min_version": int, "max_version": int}
    client_id: str = "logbroker-python"
    min_version: int = PROTOCOL_VERSION
    max_version: int = PROTOCOL_VERSION


@_register
@dataclass(frozen=True)
class HandshakeResponse(Response):
    API, SCHEMA = 0, {**_RESP, "version": int, "broker_id": int, "server": str}
    error: int = 0
    message: str = ""
    version: int = PROTOCOL_VERSION
    broker_id: int = 0
    server: str = ""


@_register
@dataclass(frozen=True)
class Metadata(Message):
    API, SCHEMA = 1, {"topics": Opt([str]), "auto_create": bool}
    topics: "tuple[str, ...] | None" = None  # None: every topic
    auto_create: bool = False


@_register
@dataclass(frozen=True)
class MetadataResponse(Response):
    """brokers: (id, host, port) of the live brokers; topics: (name, error,
    message, partition count); partitions: (topic, partition, leader,
    leader_epoch, replicas, isr) of the topics without error — leader -1
    while the partition has none. A single node is broker 0 (or its
    ``broker_id``), leader of everything at epoch 0; controller is -1 there."""

    API, SCHEMA = 1, {**_RESP, "brokers": [BrokerAddress], "topics": [TopicCount],
                      "controller": int, "partitions": [PartitionLeaders]}
    error: int = 0
    message: str = ""
    brokers: tuple = ()
    topics: tuple = ()
    controller: int = -1
    partitions: tuple = ()


@_register
@dataclass(frozen=True)
class CreateTopics(Message):
    """topics: (name, partitions, configs)."""

    API, SCHEMA = 2, {"topics": [NewTopic]}
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class CreateTopicsResponse(Response):
    """topics: (name, error, message)."""

    API, SCHEMA = 2, {**_RESP, "topics": [TopicResult]}
    error: int = 0
    message: str = ""
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteTopics(Message):
    API, SCHEMA = 3, {"topics": [str]}
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteTopicsResponse(Response):
    """topics: (name, error, message)."""

    API, SCHEMA = 3, {**_RESP, "topics": [TopicResult]}
    error: int = 0
    message: str = ""
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeTopics(Message):
    API, SCHEMA = 4, {"topics": Opt([str])}
    topics: "tuple[str, ...] | None" = None


@_register
@dataclass(frozen=True)
class DescribeTopicsResponse(Response):
    """topics: (name, error, message, configs, partitions); partitions:
    (partition, log_start, log_end, high_watermark, size_bytes, segments,
    error, message) — error PARTITION_OFFLINE and the damage found for an
    offline partition."""

    API, SCHEMA = 4, {**_RESP, "topics": [TopicDescription]}
    error: int = 0
    message: str = ""
    topics: tuple = ()


@_register
@dataclass(frozen=True)
class Produce(Message):
    """parts: (topic, partition, nbytes); payload: the parts' batches in order.
    acks: 0 (no response), 1 (written), -1 "all" (durable). producer_id -1:
    not idempotent. transactional_id: the producer's, when its batches are
    transactional (checked against the ACLs: WRITE on the TransactionalId)."""

    API, SCHEMA, HAS_PAYLOAD = 5, {"acks": int, "timeout_ms": int, "producer_id": int,
                                   "producer_epoch": int, "parts": [ProducePart],
                                   "transactional_id": Opt(str)}, True
    LATER = frozenset({"transactional_id"})
    acks: int = -1
    timeout_ms: int = 30_000
    producer_id: int = -1
    producer_epoch: int = -1
    parts: tuple = ()
    payload: tuple = field(default=(), compare=False)
    transactional_id: "str | None" = None


@_register
@dataclass(frozen=True)
class ProduceResponse(Response):
    """parts: (topic, partition, error, message, base_offset, log_start).
    throttle_ms: the principal is over its produce quota; the broker reads
    nothing more from this connection for that long, and the client should
    send nothing on it meanwhile (the records were written all the same)."""

    API, SCHEMA = 5, {**_RESP, "parts": [ProducedPart], "throttle_ms": int}
    error: int = 0
    message: str = ""
    parts: tuple = ()
    throttle_ms: int = 0


@_register
@dataclass(frozen=True)
class Fetch(Message):
    """parts: (topic, partition, offset, max_bytes). The broker answers when
    min_bytes are available or after max_wait_ms (long poll).
    isolation: READ_UNCOMMITTED (0, up to the high watermark) or
    READ_COMMITTED (1: up to the last stable offset, with the aborted
    transactions of what is returned in the response's ``txn``)."""

    API, SCHEMA = 6, {"max_wait_ms": int, "min_bytes": int, "max_bytes": int,
                      "parts": [FetchPart], "isolation": int, "session_epoch": int,
                      "forget": [TopicPartition]}
    LATER = frozenset({"isolation", "session_epoch", "forget"})
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 50 << 20
    parts: tuple = ()
    isolation: int = 0
    session_epoch: int = -1  # -1: no fetch session; 0: open one; k >= 1: its next fetch (api/fetch_session.py)
    forget: tuple = ()  # partitions leaving the session (session_epoch >= 1)


@_register
@dataclass(frozen=True)
class FetchResponse(Response):
    """parts: (topic, partition, error, message, high_watermark, log_start, nbytes).
    throttle_ms as in ProduceResponse, for the fetch quota; a fetch of a
    principal already over its quota is answered at once with every part
    empty (error 0, high_watermark and log_start -1: not read).
    txn (READ_COMMITTED fetches only, one per part without error, in part
    order): (topic, partition, last_stable_offset, aborted) — aborted the
    (producer_id, first_offset) of every aborted transaction with records
    in the returned range; a reader drops a transactional batch of
    ``producer_id`` at or after ``first_offset`` until that producer's abort
    marker (Kafka's rule).
    resolved: (topic, partition, offset) of each part asked at EARLIEST or
    LATEST and read: the offset it was read from (the consumer's position)."""

    API, SCHEMA, HAS_PAYLOAD = 6, {**_RESP, "parts": [FetchedPart],
                                   "throttle_ms": int, "txn": [TxnPartState],
                                   "session_epoch": int, "resolved": [FetchResolved]}, True
    LATER = frozenset({"txn", "session_epoch", "resolved"})
    error: int = 0
    message: str = ""
    parts: tuple = ()
    throttle_ms: int = 0
    payload: tuple = field(default=(), compare=False)
    txn: tuple = ()
    session_epoch: int = -1  # the fetch session's epoch answered; -1: none (api/fetch_session.py)
    resolved: tuple = ()  # FetchResolved: parts asked at EARLIEST / LATEST (api/fetch.py)


@_register
@dataclass(frozen=True)
class ListOffsets(Message):
    """parts: (topic, partition, spec): spec -2 earliest, -1 latest, else a
    timestamp in ms (the earliest offset whose record timestamp is >= it).
    isolation 1 (READ_COMMITTED): latest is the last stable offset, and a
    timestamp's answer is never past it."""

    API, SCHEMA = 7, {"parts": [OffsetQuery], "isolation": int}
    LATER = frozenset({"isolation"})
    parts: tuple = ()
    isolation: int = 0


@_register
@dataclass(frozen=True)
class ListOffsetsResponse(Response):
    """parts: (topic, partition, error, message, offset, timestamp); offset -1
    when no record has a timestamp that late."""

    API, SCHEMA = 7, {**_RESP, "parts": [OffsetFound]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class CommitOffsets(Message):
    """offsets: (topic, partition, offset, metadata); offset = next to read.
    A member of the group names its generation and member id (the commit is
    refused unless they are current); generation -1 with member_id "": a
    commit without membership (``assign()``), accepted only while the group
    has no members."""

    API, SCHEMA = 8, {"group": str, "generation": int, "member_id": str,
                      "group_instance_id": Opt(str), "offsets": [OffsetCommit]}
    group: str = ""
    offsets: tuple = ()
    generation: int = -1
    member_id: str = ""
    group_instance_id: "str | None" = None


@_register
@dataclass(frozen=True)
class CommitOffsetsResponse(Response):
    """parts: (topic, partition, error, message)."""

    API, SCHEMA = 8, {**_RESP, "parts": [PartitionResult]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class FetchOffsets(Message):
    """parts: (topic, partition), or None for everything the group committed.
    require_stable: answer UNSTABLE_OFFSET_COMMIT (88, retriable) while a
    partition asked has offsets committed in an undecided transaction
    (Kafka's OffsetFetch ``require_stable``; a read-committed consumer's)."""

    API, SCHEMA = 9, {"group": str, "parts": Opt([TopicPartition]), "require_stable": bool}
    LATER = frozenset({"require_stable"})
    group: str = ""
    parts: "tuple | None" = None
    require_stable: bool = False


@_register
@dataclass(frozen=True)
class FetchOffsetsResponse(Response):
    """parts: (topic, partition, offset, metadata, commit_ms); offset -1: none."""

    API, SCHEMA = 9, {**_RESP, "parts": [CommittedPart]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class ListGroups(Message):
    API, SCHEMA = 10, {}


@_register
@dataclass(frozen=True)
class ListGroupsResponse(Response):
    """groups, and each one's kind in the same order: "classic" or
    "consumer" (a consumer-protocol group, Kafka 4's KIP-848)."""

    API, SCHEMA = 10, {**_RESP, "groups": [str], "kinds": [str]}
    error: int = 0
    message: str = ""
    groups: tuple = ()
    protocol_types: tuple = ()  # in-process (not on our wire): (group, protocol type) pairs
    kinds: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeGroups(Message):
    API, SCHEMA = 11, {"groups": [str]}
    groups: tuple = ()
    kafka_bytes: bool = False  # in-process: member bytes answered in Kafka's encoding


@_register
@dataclass(frozen=True)
class DescribeGroupsResponse(Response):
    """groups: (group, error, message, parts, state, protocol, generation,
    members, kind); kind: "classic", or "consumer" for a consumer-protocol
    group (KIP-848: its epoch as the generation, its server assignor as the
    protocol, each member's assignment encoded as ours); parts: (topic, partition, committed, log_end, lag, commit_ms,
    lag_ms) — lag_ms: how old the next record to read is (-1 when caught up
    or unknown); state: "Empty", "PreparingRebalance", "CompletingRebalance"
    or "Stable"; protocol: the assignor of the generation ("" without one);
    members: (member_id, group_instance_id, client_id, host, assignment,
    metadata) — the assignment as the leader encoded it (client/assignors.py),
    the metadata the member's subscription for the generation's protocol as
    it joined with it (b"" when none is known: no protocol chosen yet, or a
    member restored by a new coordinator that has not joined since). An
    unknown group has error GROUP_ID_NOT_FOUND and nothing else."""

    API, SCHEMA = 11, {**_RESP, "groups": [GroupDescription]}
    error: int = 0
    message: str = ""
    groups: tuple = ()
    protocol_types: tuple = ()  # in-process (not on our wire): (group, protocol type) pairs


@_register
@dataclass(frozen=True)
class InitProducerId(Message):
    """A producer id: a new one for an idempotent producer
    (``transactional_id`` None); for a transactional one, the id kept for
    ``transactional_id`` by its transaction coordinator with its epoch
    bumped (fencing any older producer of that id; its open transaction is
    aborted first: CONCURRENT_TRANSACTIONS until done, retry).
    ``producer_id``/``producer_epoch``: the pair the producer holds (-1
    none; KIP-360: a producer recovering from a fatal epoch error names it)."""

    API, SCHEMA = 12, {"transactional_id": Opt(str), "transaction_timeout_ms": int,
                       "producer_id": int, "producer_epoch": int}
    LATER = frozenset(SCHEMA)
    transactional_id: "str | None" = None
    transaction_timeout_ms: int = 60_000
    producer_id: int = -1
    producer_epoch: int = -1


@_register
@dataclass(frozen=True)
class InitProducerIdResponse(Response):
    API, SCHEMA = 12, {**_RESP, "producer_id": int, "producer_epoch": int}
    error: int = 0
    message: str = ""
    producer_id: int = -1
    producer_epoch: int = 0


@_register
@dataclass(frozen=True)
class DeleteGroups(Message):
    API, SCHEMA = 13, {"groups": [str]}
    groups: tuple = ()


@_register
@dataclass(frozen=True)
class DeleteGroupsResponse(Response):
    """groups: (group, error, message)."""

    API, SCHEMA = 13, {**_RESP, "groups": [GroupResult]}
    error: int = 0
    message: str = ""
    groups: tuple = ()


# the cluster's requests (replication, status, elections) live in their own module
from .cluster_messages import (DescribeCluster, DescribeClusterResponse,  # noqa: E402,F401
                               ElectLeaders, ElectLeadersResponse, OffsetForLeaderEpoch,
                               OffsetForLeaderEpochResponse, PeerChallenge,
                               PeerChallengeResponse, PeerProof, PeerProofResponse, ReplicaFetch,
                               ReplicaFetchResponse)
from .group_messages import (FindCoordinator, FindCoordinatorResponse, Heartbeat,  # noqa: E402,F401
                             HeartbeatResponse, JoinGroup, JoinGroupResponse, LeaveGroup,
                             LeaveGroupResponse, SyncGroup, SyncGroupResponse,
                             DeleteOffsets, DeleteOffsetsResponse)
from .auth_messages import (CreateUser, CreateUserResponse, DeleteUser,  # noqa: E402,F401
                            DeleteUserResponse, ListUsers, ListUsersResponse, SaslAuthenticate,
                            SaslAuthenticateResponse, SaslHandshake, SaslHandshakeResponse)
from .acl_messages import (CreateAcls, CreateAclsResponse, DeleteAcls,  # noqa: E402,F401
                           DeleteAclsResponse, DescribeAcls, DescribeAclsResponse)
from .config_messages import (AlterConfigs, AlterConfigsResponse,  # noqa: E402,F401
                              DescribeConfigs, DescribeConfigsResponse)
from .partition_messages import (CreatePartitions, CreatePartitionsResponse,  # noqa: E402,F401
                                 DeleteRecords, DeleteRecordsResponse)
from .reassign_messages import (AlterReassignments, AlterReassignmentsResponse,  # noqa: E402,F401
                                ListReassignments, ListReassignmentsResponse)
from .consumer_group_messages import (ConsumerGroupDescribe,  # noqa: E402,F401
                                      ConsumerGroupDescribeResponse, ConsumerGroupHeartbeat,
                                      ConsumerGroupHeartbeatResponse)
from .txn_messages import (AddOffsetsToTxn, AddOffsetsToTxnResponse,  # noqa: E402,F401
                           AddPartitionsToTxn, AddPartitionsToTxnResponse,
                           DescribeTransactions, DescribeTransactionsResponse, EndTxn,
                           EndTxnResponse, ListTransactions, ListTransactionsResponse,
                           TxnOffsetCommit, TxnOffsetCommitResponse, VerifyTxnPartitions,
                           VerifyTxnPartitionsResponse, WriteTxnMarkers, WriteTxnMarkersResponse)
from .txn_admin_messages import (AbortTxnPartition, AbortTxnPartitionResponse,  # noqa: E402,F401
                                 DescribeProducers, DescribeProducersResponse)
