"""The admin client's arguments and results: frozen value objects
(NamedTuples: compare as tuples, ``_asdict()`` for JSON), no I/O."""

from __future__ import annotations

from typing import NamedTuple

from ...protocol.parts import LagRow


class NewTopic(NamedTuple):
    """A topic to create. ``replication_factor`` None: the cluster's default
    (a single node: 1); it travels as the config ``replication_factor``,
    next to ``min_insync_replicas`` and ``unclean_leader_election``.
    ``replica_assignment`` ``{partition: [broker, ...]}`` (partitions
    0..n-1; the first broker of each list leads) places the partitions as
    given instead (``partitions`` left at 1 becomes n); it travels as the
    config ``replica_assignment`` ("1:2,2:3")."""

    name: str
    partitions: int = 1
    configs: "dict | None" = None
    replication_factor: "int | None" = None
    replica_assignment: "dict | None" = None


class BrokerInfo(NamedTuple):
    """A broker; ``live`` False for one that is a replica of some partition
    but not registered right now (down)."""

    id: int
    host: str
    port: int
    live: bool = True


class PartitionInfo(NamedTuple):
    partition: int
    log_start: int
    log_end: int
    high_watermark: int
    size_bytes: int
    segments: int
    error: int = 0  # PARTITION_OFFLINE (57) etc. for a partition that serves nothing
    message: str = ""  # the reason: the damage found, the failed I/O
    leader: int = -1  # broker id; -1: none right now
    replicas: tuple = ()  # broker ids, the preferred leader first
    isr: tuple = ()  # the in-sync replicas


class TopicDescription(NamedTuple):
    name: str
    configs: dict
    partitions: tuple  # of PartitionInfo, by partition


class ClusterPartition(NamedTuple):
    """One partition's replication state; ``preferred_leader`` is the first
    replica (``elect_leaders`` moves leadership back to it)."""

    topic: str
    partition: int
    leader: int  # -1: offline (no leader right now)
    leader_epoch: int
    replicas: tuple
    isr: tuple
    preferred_leader: int

    @property
    def under_replicated(self) -> bool:
        """Fewer replicas in sync than assigned."""
        return len(self.isr) < len(self.replicas)


class ClusterDescription(NamedTuple):
    """``cluster``: its name ("" for a single node); ``controller``: the
    controller's broker id (-1: none, e.g. a single node); ``server``: the
    version string of the broker that answered."""

    cluster: str
    controller: int
    brokers: tuple  # of BrokerInfo, by id
    partitions: tuple  # of ClusterPartition, by (topic, partition)
    server: str = ""


class PartitionReassignment(NamedTuple):
    """A partition move in progress: every replica now (the targets first),
    the ones being added and the ones that leave when it finishes."""

    topic: str
    partition: int
    replicas: tuple
    adding: tuple
    removing: tuple

    @property
    def target(self) -> tuple:
        return tuple(r for r in self.replicas if r not in self.removing)


class ElectionResult(NamedTuple):
    """A partition after a preferred-leader election: its leader (moved or
    not) and the error that kept it from moving (None: no error)."""

    topic: str
    partition: int
    leader: int
    error: "BaseException | None" = None


# A group's committed partition as DescribeGroups answers it (the protocol's
# part, one shape): ``lag`` in records; ``lag_ms``: age of the next record to
# read (-1: caught up or unknown); -1 for ``log_end``/``lag``/``lag_ms`` when
# the partition is gone.
GroupPartition = LagRow


class MemberDescription(NamedTuple):
    """A member of a group's current generation: ``partitions`` its
    assignment (``(topic, partition)`` pairs, sorted; empty while the group
    rebalances)."""

    member_id: str
    group_instance_id: "str | None"
    client_id: str
    host: str
    partitions: tuple


class GroupDescription(NamedTuple):
    """``state``: "Empty", "PreparingRebalance", "CompletingRebalance" or
    "Stable" ("Assigning" or "Reconciling" too for a consumer-protocol group);
    ``protocol``: the assignor of the generation ("" without one; a
    consumer-protocol group's server assignor); ``generation``: a
    consumer-protocol group's epoch; ``kind``: "classic" or "consumer"."""

    group: str
    partitions: tuple  # of GroupPartition
    state: str = "Empty"
    protocol: str = ""
    generation: int = -1
    members: tuple = ()  # of MemberDescription
    kind: str = "classic"  # "consumer": a consumer-protocol group (Kafka 4's KIP-848)


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str
    commit_ms: int


class OffsetAndTimestamp(NamedTuple):
    """``offset`` -1 when no record is that late (timestamp lookups);
    ``timestamp`` -1 for earliest/latest lookups."""

    offset: int
    timestamp: int


class UserInfo(NamedTuple):
    """A user the broker knows (Admin.list_users): never its salt or keys."""

    name: str
    mechanism: str
    iterations: int


class Acl(NamedTuple):
    """An ACL binding (Admin.create_acls / describe_acls / delete_acls;
    docs/security.md, "Authorization"): ``principal`` "User:NAME" or
    "User:*"; ``resource_type`` "topic", "group" or "cluster" (named
    "logbroker"); ``pattern`` "literal" or "prefix"; ``operation`` read,
    write, create, delete, describe, alter, cluster_action or all;
    ``permission`` "allow" or "deny"."""

    principal: str
    resource_type: str
    name: str
    pattern: str = "literal"
    operation: str = "all"
    permission: str = "allow"


class TopicSettings(NamedTuple):
    """A topic's settings (Admin.describe_configs): ``configs`` the
    effective ones (the broker's defaults under the topic's own),
    ``overrides`` those set on the topic (CreateTopics, alter_configs)."""

    name: str
    configs: dict
    overrides: dict
