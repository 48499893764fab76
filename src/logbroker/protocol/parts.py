"""The parts of our protocol's messages, read by name: each a ``NamedTuple``
whose fields are checked by the specs its annotations give (schema.part);
on the wire a part is the list of its fields in this order, so naming them
changed no byte (tests/protocol/test_golden_frames.py). docs/protocol.md
describes every field."""

from __future__ import annotations

from typing import NamedTuple

from .schema import part


# -- the cluster and its topics -----------------------------------------------------------
@part
class BrokerAddress(NamedTuple):
    """A live broker (Metadata)."""
    id: int
    host: str
    port: int


@part
class BrokerState(NamedTuple):
    """A broker as DescribeCluster lists it: not live when only a replica names it."""
    id: int
    host: str
    port: int
    live: bool


@part
class TopicCount(NamedTuple):
    """A topic of a Metadata answer: its error, or its partition count."""
    name: str
    error: int
    message: str
    partitions: int


@part
class PartitionLeaders(NamedTuple):
    """A partition's leader (-1: none now), epoch, replicas and in-sync replicas."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@part
class PartitionPlacement(NamedTuple):
    """PartitionLeaders with the preferred leader (DescribeCluster)."""
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    preferred_leader: int


@part
class NewTopic(NamedTuple):
    name: str
    partitions: int
    configs: dict


@part
class TopicResult(NamedTuple):
    name: str
    error: int
    message: str


@part
class PartitionDescription(NamedTuple):
    """A partition's offsets, size and segments here (error PARTITION_OFFLINE
    with the damage found for an offline one)."""
    partition: int
    log_start: int
    log_end: int
    high_watermark: int
    size_bytes: int
    segments: int
    error: int
    message: str


@part
class TopicDescription(NamedTuple):
    name: str
    error: int
    message: str
    configs: dict
    partitions: tuple[PartitionDescription, ...]


@part
class LeaderElected(NamedTuple):
    """A partition's leader after a preferred election (moved or not)."""
    topic: str
    partition: int
    error: int
    message: str
    leader: int


# -- data ---------------------------------------------------------------------------------
@part
class ProducePart(NamedTuple):
    """One partition's batches: ``nbytes`` of the request's payload, in part order."""
    topic: str
    partition: int
    nbytes: int


@part
class ProducedPart(NamedTuple):
    topic: str
    partition: int
    error: int
    message: str
    base_offset: int
    log_start: int


@part
class FetchPart(NamedTuple):
    topic: str
    partition: int
    offset: int
    max_bytes: int


@part
class FetchedPart(NamedTuple):
    """One partition's answer: ``nbytes`` of the response's payload."""
    topic: str
    partition: int
    error: int
    message: str
    high_watermark: int
    log_start: int
    nbytes: int


@part
class ReplicaFetchPart(NamedTuple):
    """A follower's position: its log end, and the epoch it believes current."""
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    max_bytes: int


@part
class ReplicaFetchedPart(NamedTuple):
    """segment_base: the base offset of the leader's segment the bytes come from."""
    topic: str
    partition: int
    error: int
    message: str
    high_watermark: int
    log_start: int
    log_end: int
    segment_base: int
    nbytes: int


@part
class OffsetQuery(NamedTuple):
    """spec: -2 earliest, -1 latest, else a timestamp in ms."""
    topic: str
    partition: int
    spec: int


@part
class OffsetFound(NamedTuple):
    """offset -1 when no record has a timestamp that late."""
    topic: str
    partition: int
    error: int
    message: str
    offset: int
    timestamp: int


@part
class EpochQuery(NamedTuple):
    """The end offset of ``epoch``; ``current_leader_epoch`` -1: not checked."""
    topic: str
    partition: int
    current_leader_epoch: int
    epoch: int


@part
class EpochEnd(NamedTuple):
    """The newest of the leader's epochs <= the one asked (-1, end -1: none)."""
    topic: str
    partition: int
    error: int
    message: str
    epoch: int
    end_offset: int


# -- groups -------------------------------------------------------------------------------
@part
class TopicPartition(NamedTuple):
    topic: str
    partition: int


@part
class OffsetCommit(NamedTuple):
    """offset: the next to read."""
    topic: str
    partition: int
    offset: int
    metadata: str


@part
class PartitionResult(NamedTuple):
    topic: str
    partition: int
    error: int
    message: str


@part
class CommittedPart(NamedTuple):
    """offset -1: nothing committed."""
    topic: str
    partition: int
    offset: int
    metadata: str
    commit_ms: int


@part
class LagRow(NamedTuple):
    """lag_ms: how old the next record to read is (-1 when caught up or unknown)."""
    topic: str
    partition: int
    committed: int
    log_end: int
    lag: int
    commit_ms: int
    lag_ms: int


@part
class MemberDescription(NamedTuple):
    """assignment as the leader encoded it; metadata the subscription the
    member joined with for the generation's protocol (b"": none known)."""
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: bytes
    metadata: bytes


@part
class GroupDescription(NamedTuple):
    group: str
    error: int
    message: str
    parts: tuple[LagRow, ...]
    state: str
    protocol: str
    generation: int
    members: tuple[MemberDescription, ...]
    kind: str = "classic"  # or "consumer": Kafka 4's consumer group protocol (KIP-848)


@part
class GroupResult(NamedTuple):
    group: str
    error: int
    message: str


@part
class Protocol(NamedTuple):
    """An assignor a member supports, with its subscription (JoinGroup)."""
    name: str
    metadata: bytes


@part
class JoinedMember(NamedTuple):
    """A member of the generation, for its leader."""
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@part
class MemberAssignment(NamedTuple):
    member_id: str
    assignment: bytes


@part
class LeavingMember(NamedTuple):
    member_id: str
    group_instance_id: str | None


@part
class MemberResult(NamedTuple):
    member_id: str
    error: int
    message: str


# -- users and ACLs -----------------------------------------------------------------------
@part
class UserInfo(NamedTuple):
    """Never salts or keys."""
    name: str
    mechanism: str
    iterations: int


@part
class ScramCredential(NamedTuple):
    """A user's credentials for one SCRAM mechanism (CreateUser's ``more``)."""
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


@part
class AclRow(NamedTuple):
    principal: str
    resource_type: str
    name: str
    pattern: str
    operation: str
    permission: str


# -- transactions (protocol/txn_messages.py; FetchResponse.txn) --------------------------------
@part
class AbortedTxn(NamedTuple):
    """An aborted transaction: its producer and the offset of its first record."""
    producer_id: int
    first_offset: int


@part
class FetchResolved(NamedTuple):
    """Where a Fetch part asked at EARLIEST (-2) or LATEST (-1) was read from."""
    topic: str
    partition: int
    offset: int


@part
class TxnPartState(NamedTuple):
    """A READ_COMMITTED fetch's view of one partition: the last stable
    offset and the aborted transactions with records in the returned range."""
    topic: str
    partition: int
    last_stable_offset: int
    aborted: tuple[AbortedTxn, ...]


@part
class TxnMarker(NamedTuple):
    """A commit (``commit`` true) or abort marker the transaction
    coordinator asks a partition's leader to write for ``producer_id``."""
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    topic: str
    partition: int


@part
class MarkerResult(NamedTuple):
    producer_id: int
    topic: str
    partition: int
    error: int
    message: str


@part
class TxnDescription(NamedTuple):
    """A transactional id as its coordinator holds it (DescribeTransactions):
    state "Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
    "CompleteCommit", "CompleteAbort", "PrepareEpochFence" or "Dead";
    start_ms -1 without an open transaction; parts: its partitions."""
    transactional_id: str
    error: int
    message: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    parts: tuple[TopicPartition, ...]


@part
class TxnListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str
