"""A single node's metadata (interface.py): this broker is the only broker,
the controller and every partition's leader in epoch 0; topics, users and
ACLs live in its LMDB; a write is acknowledged once fsynced.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time

from .. import limits
from ..coordinator.records import TOPIC as OFFSETS_TOPIC
from ..coordinator.records import partition_for
from ..cluster.placement import given
from ..errors import (InvalidReplicationFactorError, InvalidRequestError, LogbrokerError,
                      UnknownTopicOrPartitionError)
from ..errors import code_and_message as _err
from ..protocol.parts import BrokerAddress, BrokerState, PartitionDescription, PartitionPlacement
from ..security.acl_store import AclStore
from ..security.auth_store import UserStore
from ..storage.creation import discard
from ..storage.store import Store
from .budget import PartitionBudget
from .interface import Appended, Directory, KafkaBroker
from .offsets_topic import InternalTopic, lag_row, offsets_topic, transaction_topic
from .partitions import add_local
from .reassignments import local_reassign


log = logging.getLogger("logbroker.topics")


class LocalMetadata:
    ack_wait = "fsync"

    def __init__(self, store: Store, config, commit, port: int, executor=None) -> None:
        """``executor``: the broker's I/O threads, where a CreateTopics makes
        its slices of partitions (None: asyncio's default)."""
        self.store, self.config, self.commit, self.port = store, config, commit, port
        self.executor = executor
        self.budget = PartitionBudget(config.max_partitions_per_broker)
        self._running: set[asyncio.Task] = set()
        self.me = config.broker_id
        self.cluster_name = ""  # a single node is no named cluster (DescribeCluster says "")
        self._next_producer_id = int(time.time() * 1000) << 8
        self._directory = Directory({self.me: KafkaBroker(self.me, None)}, self.me)
        self._host = LocalHost(store, commit, config, offsets_topic(config))
        self._txn_host = LocalHost(store, commit, config, transaction_topic(config))

    # -- lifecycle -------------------------------------------------------------------------
    async def leave(self) -> None:
        """Nothing to leave: a single node."""

    async def close(self) -> None:
        """Let topic creations and deletions in flight finish (bounded: one request's
        partitions); the store is the broker's."""
        if self._running:
            await asyncio.wait(list(self._running))

    # -- brokers ---------------------------------------------------------------------------
    def check_available(self) -> None:
        """A single node is always available."""

    def brokers(self) -> tuple:
        return (BrokerAddress(self.me, self.config.host, self.port),)

    def described_brokers(self) -> tuple:
        return (BrokerState(self.me, self.config.host, self.port, True),)

    def controller(self) -> int:
        """A single node has no controller: -1 in our answers (the Kafka
        listener names this broker: ``directory``)."""
        return -1

    # -- topics ----------------------------------------------------------------------------
    def topic_partitions(self, name: str) -> "int | None":
        topic = self.store.topics.get(name)
        return None if topic is None else topic.partitions

    def topic_names(self) -> list[str]:
        return [t.name for t in self.store.topics.list()]

    def topic_counts(self) -> dict:
        return {t.name: t.partitions for t in self.store.topics.list()}

    def topic_ids(self, names=None) -> dict:
        if names is None:
            return {t.name: t.id for t in self.store.topics.list()}
        found = {name: self.store.topics.get(name) for name in set(names)
                 if _storable(name)}
        return {name: t.id for name, t in found.items() if t is not None}

    def partitions_of(self, name: str) -> list[PartitionPlacement]:
        me = self.me
        return [PartitionPlacement(name, p, me, 0, (me,), (me,), me)
                for p in range(self.topic_partitions(name) or 0)]

    def all_partitions(self, names) -> list[PartitionPlacement]:
        return [row for name in sorted(self.topic_names()) if names is None or name in names
                for row in self.partitions_of(name)]

    async def auto_create(self, name: str) -> None:
        self._auto_create(name)

    def _auto_create(self, name: str) -> None:
        """Create ``name`` with ``default_partitions``, within the partition
        budget: a small topic at once; a larger one in slices in the
        background, the caller told UNKNOWN_TOPIC_OR_PARTITION (retriable)
        meanwhile, as Kafka answers LEADER_NOT_AVAILABLE while it creates."""
        if self.store.creating(name):
            raise UnknownTopicOrPartitionError(f"topic {name!r} is being created")
        n = self.config.default_partitions
        made, release = self._begin(name, n, {})
        if n <= AT_ONCE:
            self._make_at_once(made, release)
            return
        self._track(self._make_in_slices(made, release))
        raise UnknownTopicOrPartitionError(f"topic {name!r} is being created ({n} partitions)")

    def _hosted(self, broker: int) -> int:
        return self.store.partition_count()

    async def create_topic(self, name: str, partitions: int, configs: dict) -> None:
        """A single node has replication factor 1; the cluster's settings
        (min ISR, unclean election) are dropped. Within the partition
        budget; up to ``AT_ONCE`` partitions made at once, more in slices in
        the broker's I/O threads (``create_in_slices``: meanwhile the topic
        is unknown, retriable); it appears whole once made. A creation runs
        to its end even if the request is dropped (``close`` waits for it).
        A replica assignment is taken when it names this broker alone for
        every partition (INVALID_REPLICA_ASSIGNMENT else), as Kafka's single
        broker would take it."""
        if configs.pop("replication_factor", 1) != 1:
            raise InvalidReplicationFactorError("a single broker (no --etcd) has replication "
                                                "factor 1")
        lists = configs.pop(limits.REPLICA_ASSIGNMENT, None)
        if lists is not None:
            given(limits.parse_replica_assignment(lists), partitions, 1, (self.me,))
        for key in ("min_insync_replicas", "unclean_leader_election"):
            configs.pop(key, None)

        # reserved and begun before the first await: requests read after this
        # one (a pipelined Produce) see the topic, or see it being created
        made, release = self._begin(name, partitions, configs)
        if partitions <= AT_ONCE:  # a few ms: made in this turn, as auto-creation is
            self._make_at_once(made, release)
        else:
            await asyncio.shield(self._track(self._make_in_slices(made, release)))

    def _begin(self, name: str, partitions: int, configs: dict) -> tuple:
        """Reserve ``partitions`` in the budget and begin the topic: (the
        TopicCreation, the reservation's release)."""
        release = self.budget.hold(name, {self.me: partitions}, self._hosted)
        try:
            return self.store.begin_topic(name, partitions, configs), release
        except BaseException:
            release()
            raise

    def _make_at_once(self, made, release) -> None:
        try:
            made.add(range(made.topic.partitions))
            self.store.finish_topic(made)
        except BaseException:
            self.store.abandon_topic(made)
            raise
        finally:
            release()

    async def _make_in_slices(self, made, release) -> None:
        try:
            await create_in_slices(self.store, made, self.executor)
        finally:
            release()

    async def delete_topic(self, name: str) -> None:
        """Gone for clients at once; its files removed in slices in the I/O
        threads (run to the end even if the request is dropped)."""
        logs = self.store.begin_delete(name)
        await asyncio.shield(self._track(remove_in_slices(self.store, name, logs,
                                                           self.executor)))

    def _track(self, coro) -> asyncio.Task:
        """Run ``coro`` (a creation or deletion) as a task that goes to its
        end even if nobody awaits it (a dropped request: await it shielded;
        ``close`` waits for it)."""
        task = asyncio.get_running_loop().create_task(coro)
        self._running.add(task)
        task.add_done_callback(_finished)
        task.add_done_callback(self._running.discard)
        return task

    async def add_partitions(self, name: str, count: int, assignments: tuple = (),
                             validate_only: bool = False) -> None:
        """CreatePartitions on a single node (metadata/partitions.py)."""
        await add_local(self, name, count, assignments, validate_only, AT_ONCE, SLICE)

    def describe_topic(self, name: str) -> tuple:
        """(effective settings, per partition its offsets, size and segments)."""
        topic = self.store.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        configs = topic.log_config(self.store.config.log).to_dict()
        configs["partitions"] = topic.partitions
        return configs, tuple(partition_entry(self.store, name, p)
                              for p in range(topic.partitions))

    def topic_settings(self, name: str) -> tuple:
        """(effective settings, the settings set on topic ``name``) in our
        names; effective: the broker's log defaults under the topic's own."""
        topic = self.store.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return ({**topic.overrides, **topic.log_config(self.store.config.log).to_dict()},
                dict(topic.overrides))

    async def alter_topic_configs(self, name: str, configs: dict) -> None:
        """Replace topic ``name``'s settings with ``configs`` (checked by the
        caller): stored in LMDB and applied live to its logs, in the I/O
        threads. The cluster's settings are dropped, as at creation."""
        configs = {k: v for k, v in configs.items()
                   if k not in ("min_insync_replicas", "unclean_leader_election")}
        await asyncio.get_running_loop().run_in_executor(self.executor, self.store.alter_topic,
                                                         name, configs)
        log.info("topic %s: settings changed to %s", name, configs)

    async def elect_preferred(self, row: PartitionPlacement) -> int:
        """Every partition's leader is this broker already."""
        return row.leader

    async def reassign(self, topic: str, partition: int, target) -> None:
        """Kafka's single broker: [own id] is a no-op, anything else refused."""
        local_reassign(self.me, self.topic_partitions(topic), topic, partition, target)

    def reassignments(self, wanted) -> list:
        return []  # nothing ever moves on a single node

    async def new_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    # -- the data path ---------------------------------------------------------------------
    def log_for(self, topic: str, partition: int, *, create: bool = False):
        """The partition's log (its topic created first if ``create`` and unknown)."""
        try:
            return self.store.get_log(topic, partition)
        except UnknownTopicOrPartitionError:
            if not create or self.store.topics.get(topic) is not None:
                raise
        self._auto_create(topic)
        return self.store.get_log(topic, partition)

    def check_settled(self, topic: str, partition: int) -> None:
        """A single node's leadership never moves."""

    def append(self, topic: str, partition: int, data, acks: int) -> Appended:
        lg = self.log_for(topic, partition, create=self.config.auto_create_topics)
        return Appended(lg, lg.append(data, sync=False))  # whole part checked, then written

    def append_marker(self, topic: str, partition: int, marker) -> Appended:
        """Write transaction ``marker`` (a TxnMarker) to the partition's log in
        epoch 0 (storage's ``Log.append_marker``: a fenced producer or
        coordinator epoch raises, nothing written); its acks are then waited
        as a produce's acks=all (``when_acked``). Never creates a topic."""
        lg = self.store.get_log(topic, partition)
        info = lg.append_marker(marker.producer_id, marker.producer_epoch, marker.commit,
                                marker.coordinator_epoch, 0, sync=False)
        return Appended(lg, info)

    def when_acked(self, appended: Appended, acks: int, cb, inline: bool = True) -> bool:
        """``cb(error | None)`` once the records are durable (acks=-1): True
        if it will be called, False when they already are. Other acks: the
        fsync is requested and nobody waits (False). ``inline`` False: no
        client's answer waits for it (``GroupCommit.request``)."""
        end = appended.info.last_offset + 1
        if acks != -1:
            self.commit.request_cb(appended.log, end, _ignore)  # durable soon, unwaited
            return False
        return bool(self.commit.request_cb(appended.log, end, cb, inline))

    def epoch_of(self, topic: str, partition: int) -> tuple:
        """A single node leads every partition in epoch 0 (Metadata says so)."""
        return self.store.get_log(topic, partition), 0

    def check_replication(self) -> None:
        raise InvalidRequestError("ReplicaFetch is not a request of a single node")

    def peer_key(self) -> None:
        """A single node has no peers to prove anything to."""
        return None

    def replica_log(self, topic, partition, replica_id, offset, epoch):
        self.check_replication()

    async def wait_appended(self, logs, seconds: float) -> None:
        self.check_replication()

    # -- groups, security, the Kafka listener ------------------------------------------------
    def group_host(self) -> "LocalHost":
        return self._host

    def txn_host(self) -> "LocalHost":
        """Where the transaction state partitions live (coordinator/txn_manager.py)."""
        return self._txn_host

    async def coordinator_for(self, key: str, key_type: int = 0) -> tuple:
        return self.me, self.config.host, self.port

    def peer_dialler(self) -> None:
        """A single node has no peers (transaction markers stay local)."""
        return None

    def leader_of(self, topic: str, partition: int) -> int:
        """The broker leading ``topic``-``partition``: this one (UNKNOWN_TOPIC_OR_PARTITION
        when it does not exist)."""
        self.store.get_log(topic, partition)
        return self.me

    def access_stores(self, on_acls) -> tuple:
        """The users and ACL bindings in this node's LMDB."""
        return UserStore(self.store.meta), AclStore(self.store.meta, on_acls)

    async def advertise_kafka(self, host: str, port: int, listeners: tuple = ()) -> None:
        self._directory = Directory({self.me: KafkaBroker(self.me, (host, port), listeners)},
                                    self.me)

    def directory(self) -> Directory:
        """This broker alone, at its Kafka listener's address, the controller."""
        return self._directory

    def cluster_numbers(self) -> None:
        return None

    def cluster_state(self, numbers) -> None:
        return None


SLICE = 250  # partitions made per step: two LMDB commits, a few ms of an I/O thread
AT_ONCE = 16  # a topic this small is made on the loop at once (keeps pipelined order)


async def create_in_slices(store: Store, made, executor) -> None:
    """Make ``made``'s partitions (Store.begin_topic), ``SLICE`` at a time in
    ``executor``, the loop free between and during slices; then publish the
    topic (on the loop: a dict update). On failure the partial topic is
    removed (in the executor) and the error raised."""
    loop = asyncio.get_running_loop()
    count = made.topic.partitions
    try:
        for start in range(0, count, SLICE):
            await loop.run_in_executor(executor, made.add, range(start, min(count, start + SLICE)))
            gc.freeze()  # the slice's logs live long: out of the full collections (decision 104)
    except BaseException:
        await loop.run_in_executor(executor, store.abandon_topic, made)
        raise
    store.finish_topic(made)


async def remove_in_slices(store: Store, name: str, logs: list, executor) -> None:
    """Remove the files and rows of a deleted topic's ``logs``
    (Store.begin_delete), ``SLICE`` at a time in ``executor``."""
    loop = asyncio.get_running_loop()
    for start in range(0, len(logs), SLICE):
        await loop.run_in_executor(executor, discard, store, logs[start:start + SLICE])
    await loop.run_in_executor(executor, store.end_delete, name)


def partition_entry(store: Store, topic: str, p: int) -> PartitionDescription:
    """One DescribeTopics partition entry from the local log (or its error)."""
    try:
        lg = store.get_log(topic, p)
    except LogbrokerError as exc:
        return PartitionDescription(p, -1, -1, -1, 0, 0, *_err(exc))
    error = _err(lg.offline) if lg.offline is not None else (0, "")
    return PartitionDescription(p, lg.log_start_offset, lg.log_end_offset, lg.high_watermark,
                                lg.size_in_bytes(), len(lg.segments), *error)


def _finished(task: asyncio.Task) -> None:
    """A creation's or deletion's outcome is its request's; retrieved and
    logged here too (a background auto-creation has no request waiting)."""
    if task.cancelled() or task.exception() is None:
        return
    exc = task.exception()
    if isinstance(exc, LogbrokerError):
        log.info("creating or deleting a topic failed: %s", exc)
    else:
        log.error("creating or deleting a topic failed: %r", exc)


def _ignore(exc) -> None:
    """An unwaited fsync (acks 0/1): a failure shows as a partition offline."""


class LocalHost:
    """The partitions of an internal topic (``spec``: the offsets topic, the
    transaction state topic) on a single node: this broker leads them all;
    a write is acknowledged once fsynced (the coordinators' host:
    coordinator/manager.py, coordinator/txn_manager.py)."""

    def __init__(self, store, commit, config, spec: InternalTopic) -> None:
        self.store, self.commit, self.config, self.spec = store, commit, config, spec
        self.topic = spec.name
        topic = store.topics.get(self.topic)
        self.exists = topic is not None
        self.partitions = topic.partitions if topic else spec.partitions

    def leader(self, p: int):
        if not self.exists:  # created on the coordinator's first request, as Kafka does
            self.store.create_topic(self.topic, self.partitions, **self.spec.configs())
            self.exists = True
        return self.store.get_log(self.topic, p), 0

    def settled(self, p: int) -> bool:
        return True

    def led(self) -> dict[int, int]:
        return dict.fromkeys(range(self.partitions), 0) if self.exists else {}

    def append_now(self, p: int, data: bytes) -> "asyncio.Future | None":
        """Append ``data`` to partition ``p`` now; a future done once it is
        durable (None: it already is)."""
        lg = self.store.get_log(self.topic, p)
        info = lg.append(data, sync=False)
        return self.commit.request(lg, info.last_offset + 1)

    async def append(self, p: int, data: bytes) -> None:
        fut = self.append_now(p, data)
        if fut is not None:
            await fut

    def check_partition(self, topic: str, partition: int) -> None:
        limits.check_topic_name(topic)
        limits.check_partition(partition)
        self.store.get_log(topic, partition)

    def lag_row(self, topic: str, partition: int, c, now: int) -> tuple:
        return lag_row(self.store, topic, partition, c, now)

    async def legacy(self, p: int) -> dict:
        if self.topic != OFFSETS_TOPIC:
            return {}
        groups = self.store.groups
        return {g: groups.fetch(g) for g in groups.groups()
                if partition_for(g, self.partitions) == p}

    async def forget_legacy(self, groups: list) -> None:
        for g in groups:
            self.store.groups.delete(g)


def _storable(name: str) -> bool:
    """Whether ``name`` may be a stored topic's (else no LMDB key is asked)."""
    try:
        limits.check_topic_name(name)
    except LogbrokerError:
        return False
    return True
