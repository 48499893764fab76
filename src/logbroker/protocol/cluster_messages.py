"""Protocol messages between brokers of a cluster, and the operator's view.

Registered in the same tables as messages.py (which re-exports them):

- ``ReplicaFetch``: a follower pulls batches from the leader, at its log end
  offset (the offset it asks for is also its acknowledgement: everything
  below it is in its log, fsynced when the topic's flush policy is fsync).
  Answers carry whole stamped batches, byte for byte as the leader stored
  them, read up to the leader's log end (not its HW).
- ``OffsetForLeaderEpoch``: the end offset of an epoch in the leader's
  history (Kafka's KIP-101/279): a follower truncates there, never to its HW.
- ``DescribeCluster``: the cluster's metadata as the answering broker sees
  it (etcd's view): brokers, controller, every partition's state.
- ``ElectLeaders``: move leadership back to each partition's preferred
  replica (the first of its replicas) where that one is in sync.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .message_base import RESP as _RESP, Message, Response, register as _register
from .schema import Opt
from .parts import (BrokerState, EpochEnd, EpochQuery, LeaderElected, PartitionPlacement,
                    ReplicaFetchedPart, ReplicaFetchPart)


@_register
@dataclass(frozen=True)
class ReplicaFetch(Message):
    """parts: (topic, partition, offset, leader_epoch, max_bytes): offset is
    the follower's log end offset; leader_epoch the epoch the follower
    believes current (the leader refuses a stale or future one)."""

    API, SCHEMA = 14, {"replica_id": int, "max_wait_ms": int, "min_bytes": int, "max_bytes": int,
                       "parts": [ReplicaFetchPart]}
    replica_id: int = -1
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 8 << 20
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class ReplicaFetchResponse(Response):
    """parts: (topic, partition, error, message, high_watermark, log_start,
    log_end, segment_base, nbytes): segment_base is the base offset of the
    leader's segment the bytes come from (-1 with none), so the follower rolls
    its segments where the leader did and keeps its files byte-identical."""

    API, SCHEMA, HAS_PAYLOAD = 14, {**_RESP, "parts": [ReplicaFetchedPart]}, True
    error: int = 0
    message: str = ""
    parts: tuple = ()
    payload: tuple = field(default=(), compare=False)


@_register
@dataclass(frozen=True)
class OffsetForLeaderEpoch(Message):
    """parts: (topic, partition, current_leader_epoch, epoch): the end offset
    of ``epoch`` (the first offset of the next newer epoch, or the log end)."""

    API, SCHEMA = 15, {"replica_id": int, "parts": [EpochQuery]}
    replica_id: int = -1
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class OffsetForLeaderEpochResponse(Response):
    """parts: (topic, partition, error, message, epoch, end_offset): epoch is
    the newest of the leader's epochs <= the one asked for (-1, end -1: none)."""

    API, SCHEMA = 15, {**_RESP, "parts": [EpochEnd]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeCluster(Message):
    API, SCHEMA = 16, {"topics": Opt([str])}
    topics: "tuple[str, ...] | None" = None


@_register
@dataclass(frozen=True)
class DescribeClusterResponse(Response):
    """cluster: its name ("" for a single node); brokers: (id, host, port,
    live); partitions: (topic, partition, leader, leader_epoch, replicas,
    isr, preferred_leader)."""

    API, SCHEMA = 16, {**_RESP, "cluster": str, "controller": int,
                       "brokers": [BrokerState], "partitions": [PartitionPlacement]}
    error: int = 0
    message: str = ""
    cluster: str = ""
    controller: int = -1
    brokers: tuple = ()
    partitions: tuple = ()


@_register
@dataclass(frozen=True)
class ElectLeaders(Message):
    """Preferred-leader election for ``topics`` (None: every topic)."""

    API, SCHEMA = 17, {"topics": Opt([str])}
    topics: "tuple[str, ...] | None" = None


@_register
@dataclass(frozen=True)
class ElectLeadersResponse(Response):
    """parts: (topic, partition, error, message, leader): the leader after
    the election (moved or not)."""

    API, SCHEMA = 17, {**_RESP, "parts": [LeaderElected]}
    error: int = 0
    message: str = ""
    parts: tuple = ()


@_register
@dataclass(frozen=True)
class PeerChallenge(Message):
    """The first step of a broker's proof of identity (cluster/peer_proof.py):
    ``broker_id`` the broker the dialler claims to be, ``nonce`` its own
    random bytes (16-64)."""

    API, SCHEMA = 31, {"broker_id": int, "nonce": bytes}
    broker_id: int = -1
    nonce: bytes = b""


@_register
@dataclass(frozen=True)
class PeerChallengeResponse(Response):
    """``broker_id``: the answering broker's id; ``nonce``: its random bytes,
    fresh per exchange."""

    API, SCHEMA = 31, {**_RESP, "broker_id": int, "nonce": bytes}
    error: int = 0
    message: str = ""
    broker_id: int = -1
    nonce: bytes = b""


@_register
@dataclass(frozen=True)
class PeerProof(Message):
    """The second step: ``proof``, an HMAC of both nonces and both ids under
    the cluster's secret (never the secret itself)."""

    API, SCHEMA = 32, {"proof": bytes}
    proof: bytes = b""


@_register
@dataclass(frozen=True)
class PeerProofResponse(Response):
    """``proof``: the answering broker's own HMAC (the dialler checks that it
    reached a broker of the same cluster)."""

    API, SCHEMA = 32, {**_RESP, "proof": bytes}
    error: int = 0
    message: str = ""
    proof: bytes = b""
