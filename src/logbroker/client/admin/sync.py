"""The sync ``Admin`` client: topics, groups, offsets and users (used by the CLI).

Every method is one blocking request (``list_offsets`` by topic name and
``describe_topics``: two; ``list_offsets``: one per leader) with a deadline
of ``request_timeout_ms``. Read-only requests and offset commits are
retried on a lost connection until the deadline, ``list_offsets`` also
across leader changes; creating, deleting and electing are sent once (a
retry could report TOPIC_ALREADY_EXISTS for a topic the first attempt
created). Errors: ``BrokerUnavailableError``,
``RequestTimedOutError``, ``ClientClosedError``, the broker's error as its
registered exception (``errors.for_code``), whose message names the topic,
partition or group, and — before anything is sent — ``TypeError`` or the
registry's error for a bad argument (``client/validate.py``).

Each method runs ``AdminCore``'s coroutine of the same name (admin/core.py)
on this client's I/O thread; ``logbroker.aio.Admin`` (admin/aio.py) awaits
the same coroutines, so both behave alike.
"""

from __future__ import annotations

from typing import Iterable

from ..loop_thread import LoopThread
from ..waiting import SyncShell
from .core import AdminCore
from .results import ClusterDescription, TopicSettings


class Admin(SyncShell):
    """``Admin(bootstrap="127.0.0.1:9555", client_id="logbroker-admin",
    request_timeout_ms=30000, connect_timeout_ms=5000)``; a context manager.
    Thread-safe. TLS:
    ``tls_ca=``, ``tls_cert=``/``tls_key=``, ``tls_check_hostname=`` as
    for every client (settings.TlsSettings, docs/security.md); ``username=``
    and ``password=`` authenticate (SCRAM-SHA-256)."""

    def __init__(self, bootstrap="127.0.0.1:9555", **options) -> None:
        self._core = AdminCore.make(bootstrap, **options)
        self.options = self._core.options
        self._timeout = self.options.request_timeout + self.options.connect_timeout + 1
        self._io = LoopThread("logbroker-admin-io")

    # -- topics ------------------------------------------------------------------------------------
    def create_topics(self, topics: Iterable, raise_errors: bool = True) -> dict:
        """Create topics: each a name, a ``NewTopic(name, partitions=1,
        configs={}, replication_factor=None, replica_assignment=None)`` or a
        ``(name, partitions[, configs[, replication_factor[,
        replica_assignment]]])`` tuple (configs: LogConfig overrides
        such as ``retention_ms``, and the cluster's ``min_insync_replicas``,
        ``unclean_leader_election``). Returns ``{name: None or the error}``;
        with ``raise_errors`` raises the first error
        (``TopicAlreadyExistsError``, ``InvalidTopicError``,
        ``InvalidConfigError``, ``InvalidReplicationFactorError``) after all
        were tried."""
        return self._run(self._core.create_topics(topics, raise_errors))

    def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None,
                     *, replication_factor: "int | None" = None,
                     exist_ok: bool = False) -> bool:
        """Create one topic; returns False if it existed and ``exist_ok``."""
        return self._run(self._core.create_topic(name, partitions, configs,
                                                 replication_factor=replication_factor,
                                                 exist_ok=exist_ok))

    def delete_topics(self, names: Iterable[str], raise_errors: bool = True) -> dict:
        """Delete topics and their data; ``{name: None or the error}``
        (``UnknownTopicOrPartitionError`` for a missing one)."""
        return self._run(self._core.delete_topics(names, raise_errors))

    def create_partitions(self, counts: dict, validate_only: bool = False,
                          raise_errors: bool = True) -> dict:
        """Raise topics' partition counts: ``counts`` is ``{topic: new total
        count}``; the existing partitions and their data stay as they are
        (new records of a key may go to another partition: keys are hashed
        over the new count). ``validate_only`` checks and changes nothing.
        Returns ``{topic: None or the error}``; with ``raise_errors`` raises
        the first (``InvalidPartitionsError`` for a count not above the
        present one, ``UnknownTopicOrPartitionError``,
        ``PolicyViolationError`` past the broker's partition limits). Sent once."""
        return self._run(self._core.create_partitions(counts, validate_only, raise_errors))

    def delete_records(self, offsets: dict, raise_errors: bool = True) -> dict:
        """Delete every record below an offset: ``offsets`` is ``{(topic,
        partition): offset}``, -1 meaning the high watermark (everything
        readable). Returns ``{(topic, partition): the log start after it}``
        (or the error without ``raise_errors``): ``OffsetOutOfRangeError``
        above the high watermark. Asked of each partition's leader; durable
        when answered."""
        return self._run(self._core.delete_records(offsets, raise_errors))

    def list_topics(self) -> dict[str, int]:
        """``{topic: partition count}`` of every topic."""
        return self._run(self._core.list_topics())

    def describe_topics(self, names: "Iterable[str] | None" = None) -> dict:
        """``{name: TopicDescription(name, configs, partitions)}`` with
        ``PartitionInfo(partition, log_start, log_end, high_watermark,
        size_bytes, segments, error, message, leader, replicas, isr)`` per
        partition (``error`` PARTITION_OFFLINE and the reason for an offline
        one; leader -1 while it has none); all topics when ``names`` is
        None. Raises for an unknown topic. DescribeTopics and Metadata go to
        any broker; a partition that broker does not lead is described by
        its leader (one more DescribeTopics per leader broker, concurrently;
        the leader's offsets are the authoritative ones). A partition whose
        leader cannot be asked keeps the first broker's answer (its error)."""
        return self._run(self._core.describe_topics(names))

    # -- the cluster -------------------------------------------------------------------------------
    def describe_cluster(self, topics: "Iterable[str] | None" = None) -> ClusterDescription:
        """The cluster as the answering broker sees it (DescribeCluster):
        ``ClusterDescription(cluster, controller, brokers, partitions,
        server)``, ``BrokerInfo(id, host, port, live)`` by id and
        ``ClusterPartition(topic, partition, leader, leader_epoch, replicas,
        isr, preferred_leader)`` for every partition of ``topics`` (None:
        all; ``UnknownTopicOrPartitionError`` for a topic the cluster does
        not have). A single node: one live broker leading everything at
        epoch 0, controller -1."""
        return self._run(self._core.describe_cluster(topics))

    def elect_leaders(self, topics: "Iterable[str] | None" = None) -> dict:
        """Move leadership back to each partition's preferred replica (its
        first) where that one is live and in sync (ElectLeaders; ``topics``
        None: all). Returns ``{(topic, partition): ElectionResult(topic,
        partition, leader, error)}``, ``leader`` as it is afterwards (moved
        or not), ``error`` None or the partition's error (an unknown topic
        is keyed ``(topic, -1)``). Never sent twice: a retry could move a
        leader the operator moved meanwhile."""
        return self._run(self._core.elect_leaders(topics))

    def reassign_partitions(self, moves: dict, raise_errors: bool = True) -> dict:
        """Move partitions to other brokers (AlterReassignments, Kafka's
        KIP-455; docs/cluster.md, "Reassigning partitions"): ``moves`` is
        ``{(topic, partition): [broker ids] or None}``, the first broker the
        preferred leader, None cancelling the move in progress. Returns once
        every move has started, ``{(topic, partition): None or the error}``
        (INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS,
        UNKNOWN_TOPIC_OR_PARTITION); with ``raise_errors`` the first error is
        raised. The new replicas catch up, leadership moves, the old
        replicas are deleted: ``list_partition_reassignments`` shows what is
        left. Never sent twice."""
        return self._run(self._core.reassign_partitions(moves, raise_errors))

    def list_partition_reassignments(self, topics: "Iterable[str] | None" = None) -> dict:
        """The moves in progress among ``topics`` (None: all):
        ``{(topic, partition): PartitionReassignment(topic, partition,
        replicas, adding, removing)}`` (``.target``: where it moves to)."""
        return self._run(self._core.list_partition_reassignments(topics))

    # -- groups ------------------------------------------------------------------------------------
    def list_groups(self, kinds: bool = False) -> "list[str] | dict":
        """Every group with members or committed offsets, sorted. Each broker
        answers for the groups it coordinates: asked of every live broker
        (concurrently) and merged; raises the first broker's error. With
        ``kinds``: ``{group: "classic" | "consumer"}`` (a consumer-protocol
        group of Kafka 4's clients, KIP-848)."""
        return self._run(self._core.list_groups(kinds))

    def describe_transactions(self, transactional_ids, raise_errors: bool = True) -> dict:
        """``{id: TransactionDescription(transactional_id, state,
        producer_id, producer_epoch, timeout_ms, start_ms, partitions,
        coordinator)}`` from each id's transaction coordinator; ``state`` is
        Kafka's name (Empty, Ongoing, PrepareCommit, PrepareAbort,
        CompleteCommit, CompleteAbort, PrepareEpochFence, Dead). Raises the
        first id's error (``TransactionalIdNotFoundError``); without
        ``raise_errors`` the error is that id's value."""
        return self._run(self._core.describe_transactions(transactional_ids, raise_errors))

    def list_transactions(self, states=()) -> list:
        """``[TransactionListing(transactional_id, producer_id, state,
        coordinator)]`` of every live broker's coordinator, sorted by id;
        ``states``: only those in these states."""
        return self._run(self._core.list_transactions(states))

    def describe_producers(self, partitions) -> dict:
        """``{(topic, partition): [OpenTransaction(topic, partition,
        producer_id, producer_epoch, coordinator_epoch, first_offset,
        first_timestamp)]}``: each partition's open transactions, from its
        leader (Kafka's DescribeProducers)."""
        return self._run(self._core.describe_producers(partitions))

    def abort_transaction(self, topic: str, partition: int, producer_id: int,
                          producer_epoch: int = -1, coordinator_epoch: int = -1) -> None:
        """Abort ``producer_id``'s open (hanging) transaction on the
        partition: its leader writes an abort marker (Kafka's
        kafka-transactions.sh abort; ALTER on the cluster). The epochs
        default to the open transaction's and its last marker's."""
        self._run(self._core.abort_transaction(topic, partition, producer_id, producer_epoch,
                                               coordinator_epoch))

    def describe_groups(self, groups: Iterable[str]) -> dict:
        """``{group: GroupDescription(group, partitions, state, protocol,
        generation, members)}``: a ``GroupPartition(topic, partition,
        committed, log_end, lag, commit_ms, lag_ms)`` per committed
        partition and a ``MemberDescription(member_id, group_instance_id,
        client_id, host, partitions)`` per member, from each group's
        coordinator; ``GroupNotFoundError`` for a group without members or
        committed offsets."""
        return self._run(self._core.describe_groups(groups))

    def delete_groups(self, groups: Iterable[str], raise_errors: bool = True) -> dict:
        """Forget groups' offsets, each at its coordinator; ``{group: None or
        the error}``: ``NonEmptyGroupError`` for a group with members,
        ``GroupNotFoundError``, ``InvalidGroupError``. Sent once."""
        return self._run(self._core.delete_groups(groups, raise_errors))

    # -- offsets -----------------------------------------------------------------------------------
    def commit_offsets(self, group: str, offsets: dict) -> None:
        """Commit for ``group`` without a live consumer: ``{(topic,
        partition): offset or (offset, metadata)}``, offset = the next record
        to read. All valid entries are stored atomically; raises the first
        partition's error (unknown partition, negative offset), and
        ``UnknownMemberIdError`` while the group has members (their commits
        are fenced by generation)."""
        return self._run(self._core.commit_offsets(group, offsets))

    def fetch_offsets(self, group: str, partitions=None) -> dict:
        """``{(topic, partition): OffsetAndMetadata(offset, metadata,
        commit_ms) or None}``; all committed partitions when ``partitions``
        is None."""
        return self._run(self._core.fetch_offsets(group, partitions))

    def delete_offsets(self, group: str, partitions, raise_errors: bool = True) -> dict:
        """Forget ``group``'s committed offsets of ``partitions`` (``(topic,
        partition)`` pairs; one without a commit is no error): ``{(topic,
        partition): None or the error}``, ``GroupSubscribedToTopicError``
        while an active member of the group subscribes to the topic; raises
        ``GroupNotFoundError`` for an unknown group. Sent once."""
        return self._run(self._core.delete_offsets(group, partitions, raise_errors))

    def list_offsets(self, partitions, spec="latest", *, raise_errors: bool = True,
                     isolation_level: str = "read_uncommitted") -> dict:
        """``{(topic, partition): OffsetAndTimestamp(offset, timestamp)}``,
        from each partition's leader (following leader changes until
        ``request_timeout_ms``).

        ``partitions``: ``(topic, partition)`` pairs and/or topic names (all
        their partitions), with one ``spec`` for all — ``"earliest"`` (log
        start), ``"latest"`` (high watermark: the next offset to be written
        and readable) or a timestamp in ms (the earliest record at or after
        it; offset -1 if none) — or a dict ``{(topic, partition): spec}``.
        Raises the first partition's error; with ``raise_errors=False`` that
        error is the partition's value instead (e.g. ``LeaderNotAvailableError``).
        ``isolation_level="read_committed"``: "latest" is the last stable
        offset (no record of an open transaction at or after it)."""
        return self._run(self._core.list_offsets(partitions, spec, raise_errors=raise_errors,
                                                 isolation_level=isolation_level))

    # -- users (docs/security.md) ------------------------------------------------------------------
    def create_user(self, name: str, password: str, iterations: int = 4096,
                    sha512_password: "str | None" = None) -> bool:
        """Create user ``name`` with ``password``, or change an existing
        user's password; True if the user is new. Only the SCRAM-SHA-256
        and SCRAM-SHA-512 credentials derived here (salt, keys,
        ``iterations`` 4096..16384) are sent and stored, never the password;
        ``sha512_password``: SCRAM-SHA-512's from another password (Kafka
        keeps one credential per mechanism). PLAIN checks ``password``. Sent
        once. ``ClusterAuthorizationFailedError`` if this client may not."""
        return self._run(self._core.create_user(name, password, iterations, sha512_password))

    def delete_user(self, name: str) -> None:
        """Delete user ``name`` (its next connection fails to authenticate;
        open ones stay); ``ResourceNotFoundError`` if there is none. Sent once."""
        return self._run(self._core.delete_user(name))

    def list_users(self) -> list:
        """``UserInfo(name, mechanism, iterations)`` of every user, by name."""
        return self._run(self._core.list_users())

    # -- ACLs (docs/security.md, "Authorization") --------------------------------------------------
    def create_acls(self, acls: Iterable) -> int:
        """Add ``acls`` (``Acl`` tuples); how many were new. The broker checks
        every field (``InvalidRequestError``); ``ClusterAuthorizationFailedError``
        if this client may not alter the cluster. Sent once."""
        return self._run(self._core.create_acls(acls))

    def delete_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                    pattern: str = "", operation: str = "", permission: str = "") -> list:
        """Remove every binding matching the filter (an empty field matches
        anything); the ``Acl``s removed. Sent once."""
        return self._run(self._core.delete_acls(principal, resource_type, name, pattern, operation,
                                                permission))

    def describe_acls(self, principal: str = "", resource_type: str = "", name: str = "",
                      pattern: str = "", operation: str = "", permission: str = "") -> list:
        """The ``Acl``s matching the filter (empty fields match anything), sorted."""
        return self._run(self._core.describe_acls(principal, resource_type, name, pattern,
                                                  operation, permission))

    # -- topic configs (docs/client.md) -------------------------------------------------------------
    def describe_configs(self, topic: str) -> "TopicSettings":
        """``topic``'s settings: a ``TopicSettings`` of its effective
        settings (our names: ``retention_ms``, ``cleanup_policy``, ...) and
        those set on the topic. ``UnknownTopicOrPartitionError`` if unknown."""
        return self._run(self._core.describe_configs(topic))

    def alter_configs(self, topic: str, set: "dict | None" = None, delete: Iterable = (), *,
                      validate_only: bool = False) -> None:
        """Change ``topic``'s settings: ``set`` {name: value} (our names and
        values, as ``create_topic``'s configs), ``delete`` names returned to
        the broker's default. Stored (LMDB, or etcd in a cluster) and applied
        live on every broker hosting the topic. The whole change is checked
        first: ``InvalidConfigError`` naming the setting (unknown, or out of
        range), ``UnknownTopicOrPartitionError``; nothing is changed then.
        ``validate_only``: only check. Sent once."""
        return self._run(self._core.alter_configs(topic, set, delete,
                                                  validate_only=validate_only))

    # -- closing --------------------------------------------------------------------------------------
    def close(self) -> None:
        """Close the connection and the I/O thread. Idempotent."""
        if not self._core.closed:
            self._core.mark_closed()
            self._stop(self._core.aclose())
