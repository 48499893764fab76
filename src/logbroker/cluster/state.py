"""The cluster's metadata as frozen values, and where each lives in etcd.

Keys (``root`` = ``/logbroker/<cluster>/``), values msgpack maps:

    brokers/<id>              {host, port, started_ms[, kafka]}  under the broker's lease
                              (kafka: [host, port] of its Kafka listener, when it has one)
    controller                {broker_id}                     under the controller's lease
    topics/<name>             {partitions, replication_factor, configs}
    partitions/<topic>/<p>    {replicas, leader, isr, leader_epoch[, adding, removing]}
                              (adding / removing: a reassignment in progress, reassignment.py)
    offsets/<group>/<topic>/<p>  {offset, metadata, commit_ms}
    producer_ids              {next}: the next free block of idempotent producer ids
    cluster_secret            32 random bytes: brokers prove their identity with it (peer_proof.py)
    users/<name>              {mechanism, salt, stored_key, server_key, iterations}
    users_existed             b"1" once any user was created: the bootstrap rule is closed for good
    acls/<type>/<pattern>/<name>/<principal>/<operation>/<permission>
                              [the six fields]: one ACL binding (fields %-quoted in the key)

Users and ACLs: cluster/access_view.py (the mirror), access_store.py (the writes).

A partition's state changes only by compare-and-set on its etcd
``mod_revision`` (``PartitionState.version``; 0 = not in etcd yet).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from urllib.parse import quote

import msgpack

from ..storage.topic_ids import topic_id_or_derived
from . import checks
from ..storage.config import log_settings

NO_LEADER = -1


@dataclass(frozen=True)
class BrokerInfo:
    id: int
    host: str
    port: int
    started_ms: int = 0
    registered: int = 0  # etcd revision of its registration (not stored in the value)
    kafka: "tuple[str, int] | None" = None  # its Kafka listener's advertised address, if any
    kafka_listeners: tuple = ()  # its named Kafka listeners: (name, host, port) each


@dataclass(frozen=True)
class TopicState:
    name: str
    partitions: int
    replication_factor: int
    configs: dict = field(default_factory=dict)  # log overrides + cluster settings
    version: int = 0
    topic_id: bytes = b""  # as stored; ``id`` derives one for a topic stored without

    @property
    def id(self) -> bytes:
        """Kafka's topic id of this topic (storage/topic_ids.py)."""
        return topic_id_or_derived(self.topic_id, self.name)

    @property
    def min_insync_replicas(self) -> int:
        return int(self.configs.get("min_insync_replicas", default_min_isr(self.replication_factor)))

    @property
    def unclean_leader_election(self) -> bool:
        return self.configs.get("unclean_leader_election") in (True, 1, "true")

    def log_overrides(self) -> dict:
        """The configs that are LogConfig settings (the cluster's own and
        Kafka configs stored without effect removed)."""
        return log_settings(self.configs)


CLUSTER_CONFIGS = ("replication_factor", "min_insync_replicas", "unclean_leader_election")


def default_min_isr(replication_factor: int) -> int:
    """2 when there are at least 3 replicas (Kafka's common production
    setting), else 1."""
    return 2 if replication_factor >= 3 else 1


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    version: int = 0
    adding: tuple[int, ...] = ()  # a reassignment's new replicas, not all in sync yet
    removing: tuple[int, ...] = ()  # the replicas it removes once the targets are in sync

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas a reassignment moves to (the replicas when none is
        in progress)."""
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    def with_(self, **changes) -> "PartitionState":
        return replace(self, **changes)


class Keys:
    """Key names under one cluster's root."""

    def __init__(self, cluster: str) -> None:
        self.root = f"/logbroker/{cluster}/"
        self.brokers = self.root + "brokers/"
        self.controller = self.root + "controller"
        self.topics = self.root + "topics/"
        self.partitions = self.root + "partitions/"
        self.offsets = self.root + "offsets/"
        self.producer_ids = self.root + "producer_ids"
        self.users = self.root + "users/"
        self.users_existed = self.root + "users_existed"  # never deleted (auth_store.py)
        self.acls = self.root + "acls/"
        self.secret = self.root + "cluster_secret"  # brokers' proofs of identity (peer_proof.py)

    def user(self, name: str) -> str:
        return self.users + name  # user names never hold '/' (protocol/auth_messages.py)

    def acl(self, fields: tuple) -> str:
        """The key of one ACL binding (``AclBinding.fields()`` order), its fields
        %-quoted ('/' in a group name stays inside its part)."""
        rtype, name, pattern, principal, operation, permission = (
            fields[1], fields[2], fields[3], fields[0], fields[4], fields[5])
        return self.acls + "/".join(quote(f, safe=":*@") for f in (
            rtype, pattern, name, principal, operation, permission))

    def broker(self, broker_id: int) -> str:
        return f"{self.brokers}{broker_id}"

    def topic(self, name: str) -> str:
        return self.topics + name

    def partition(self, topic: str, partition: int) -> str:
        return f"{self.partitions}{topic}/{partition}"

    def partitions_of(self, topic: str) -> str:
        return f"{self.partitions}{topic}/"

    def group_offsets(self, group: str) -> str:
        # group names may hold '/', topic names never do: the last two parts are topic/partition
        return f"{self.offsets}{group}/"

    def offset(self, group: str, topic: str, partition: int) -> str:
        return f"{self.offsets}{group}/{topic}/{partition}"


def pack(value: dict) -> bytes:
    return msgpack.packb(value)


def unpack(raw: bytes) -> dict:
    """A msgpack map; BadValue (a ValueError) for anything else."""
    try:
        value = msgpack.unpackb(raw, raw=False)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several kinds on garbage
        raise checks.BadValue(f"not msgpack: {type(exc).__name__}") from None
    if not isinstance(value, dict):
        raise checks.BadValue("not a msgpack map")
    return value


def broker_value(b: BrokerInfo) -> bytes:
    """The registration's value; ``kafka`` only when the broker has a Kafka
    listener (older brokers wrote no such field: both read back alike)."""
    value = {"host": b.host, "port": b.port, "started_ms": b.started_ms}
    if b.kafka is not None:
        value["kafka"] = [b.kafka[0], b.kafka[1]]
    if b.kafka_listeners:  # only with named listeners: older readers ignore the field
        value["kafka_listeners"] = [list(row) for row in b.kafka_listeners]
    return pack(value)


def broker_from(broker_id: int, raw: bytes, registered: int = 0) -> BrokerInfo:
    """A registration read back; a missing ``kafka`` field is None (a
    broker without a Kafka listener, or one older than the field)."""
    v = unpack(raw)
    checks.broker_id(broker_id)
    checks.broker(v)
    kafka = v.get("kafka")
    named = tuple((str(n), str(h), int(p)) for n, h, p in v.get("kafka_listeners", ()))
    return BrokerInfo(broker_id, str(v["host"]), int(v["port"]), int(v.get("started_ms", 0)),
                      registered, None if kafka is None else (str(kafka[0]), int(kafka[1])),
                      named)


def topic_value(t: TopicState) -> bytes:
    value = {"partitions": t.partitions, "replication_factor": t.replication_factor,
             "configs": t.configs}
    if t.topic_id:
        value["topic_id"] = t.topic_id
    return pack(value)


def topic_from(name: str, raw: bytes, version: int) -> TopicState:
    """A topic's value read back, checked (checks.py: BadValue)."""
    value = unpack(raw)
    partitions, rf, configs = checks.topic(name, value)
    stored = value.get("topic_id") if isinstance(value, dict) else None
    return TopicState(name, partitions, rf, configs, version,
                      topic_id_or_derived(stored, name) if stored else b"")


def partition_value(p: PartitionState) -> bytes:
    """A partition's value; ``adding`` / ``removing`` only while a
    reassignment is in progress (a value without them reads back alike)."""
    value = {"replicas": list(p.replicas), "leader": p.leader, "isr": list(p.isr),
             "leader_epoch": p.leader_epoch}
    if p.reassigning:
        value.update(adding=list(p.adding), removing=list(p.removing))
    return pack(value)


def partition_from(topic: str, partition: int, raw: bytes, version: int) -> PartitionState:
    """A partition's state read back, checked (checks.py: BadValue)."""
    value = unpack(raw)
    replicas, leader, isr, epoch = checks.partition(topic, partition, value)
    adding, removing = checks.reassignment(replicas, value)
    return PartitionState(topic, partition, replicas, leader, isr, epoch, version, adding,
                          removing)
