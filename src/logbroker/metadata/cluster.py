"""The cluster's metadata (interface.py), the broker started with ``--etcd``:
metadata, topic admin and producer ids are read from the node's mirror of
etcd and written as compare-and-set transactions; the data path asks the
replica manager (only a partition's leader serves clients; acks=all waits
until the in-sync replicas have the records).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

from ..cluster.access_store import EtcdAclStore, EtcdUserStore
from ..cluster.node import ClusterNode
from ..cluster.placement import assign, given, preferred
from ..cluster.replicas import LEADER
from ..cluster.state import (PartitionState, TopicState, default_min_isr, partition_value,
                             topic_value)
from ..coordinator.records import partition_for
from ..durability import DataNotifier, consume_outcome
from ..storage.topic_ids import new_topic_id
from ..errors import (CoordinatorNotAvailableError, InvalidConfigError,
                      InvalidReplicaAssignmentError, NotLeaderError, TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from ..errors import code_and_message as _err
from ..limits import REPLICA_ASSIGNMENT, parse_replica_assignment
from ..protocol.parts import BrokerAddress, BrokerState, PartitionDescription, PartitionPlacement
from .budget import PartitionBudget
from .cluster_host import ClusterHost
from .interface import Appended
from .internal_topics import InternalTopics
from .local import partition_entry
from .offsets_topic import offsets_topic, transaction_topic
from .partitions import add_cluster
from .reassignments import cluster_reassign, cluster_reassignments

log = logging.getLogger("logbroker.broker")
VIEW_WAIT_S = 5.0  # a topic created here is in this broker's view before the answer
TXN_OPS = 100  # etcd's default limit is 128 operations per transaction


class ClusterMetadata:
    ack_wait = "in-sync replicas"

    def __init__(self, node: ClusterNode, config, commit) -> None:
        self.node, self.config, self.commit = node, config, commit
        self.store = node.store
        self.me = node.me
        self.cluster_name = config.cluster_name
        self.appended = DataNotifier()  # wakes followers' long polls (ReplicaFetch)
        self.budget = PartitionBudget(config.max_partitions_per_broker)
        self._host = ClusterHost(self, config, offsets_topic(config))
        self._txn_host = ClusterHost(self, config, transaction_topic(config))
        self._internal = InternalTopics(self)

    # -- lifecycle -------------------------------------------------------------------------
    async def leave(self) -> None:
        """Leave the cluster at shutdown (the controller hands our
        leaderships to in-sync followers at once)."""
        await self.node.leave()

    async def close(self) -> None:
        self._internal.close()
        await self.node.close()

    # -- brokers ---------------------------------------------------------------------------
    def check_available(self) -> None:
        """A broker without a live etcd session has a frozen view (it may
        still name itself leader): CLUSTER_UNAVAILABLE sends the client elsewhere."""
        self.node.check_available()

    def brokers(self) -> tuple:
        return tuple(BrokerAddress(b.id, b.host, b.port)
                     for b in sorted(self.node.view.brokers.values(), key=lambda b: b.id))

    def described_brokers(self) -> tuple:
        view = self.node.view
        replicas = {r for st in view.partitions.values() for r in st.replicas}
        brokers = [BrokerState(b.id, b.host, b.port, True) for b in view.brokers.values()]
        brokers += [BrokerState(r, "", 0, False) for r in replicas - set(view.brokers)]
        return tuple(sorted(brokers))

    def controller(self) -> int:
        return self.node.view.controller

    # -- topics ----------------------------------------------------------------------------
    def topic_partitions(self, name: str) -> "int | None":
        topic = self.node.view.topics.get(name)
        return None if topic is None else topic.partitions

    def topic_names(self) -> list[str]:
        return list(self.node.view.topics)

    def topic_counts(self) -> dict:
        return {name: t.partitions for name, t in list(self.node.view.topics.items())}

    def topic_ids(self, names=None) -> dict:
        topics = self.node.view.topics
        if names is None:
            return {name: t.id for name, t in list(topics.items())}
        return {name: topics[name].id for name in set(names) if name in topics}

    def partitions_of(self, name: str) -> list[PartitionPlacement]:
        """Every partition of the topic; one whose state in etcd was refused
        (cluster/view.py) is served unavailable: leader -1, no ISR."""
        view = self.node.view
        topic = view.topics.get(name)
        if topic is None:
            return []
        rows = []
        for p in range(topic.partitions):
            st = view.partitions.get((name, p))
            if st is not None:
                rows.append(_row(st))
            elif view.bad_of("partition", (name, p)) is not None:
                rows.append(_unavailable(view, name, p))
        return rows

    def all_partitions(self, names) -> list[PartitionPlacement]:
        view = self.node.view
        return [row for name in sorted(view.topics) if names is None or name in names
                for row in self.partitions_of(name)]

    async def auto_create(self, name: str) -> None:
        if self.node.view.bad_of("topic", name) is not None:
            return  # its value in etcd was refused (cluster/view.py): unknown until repaired
        try:
            await self._create(name, self.config.default_partitions, {})
        except TopicAlreadyExistsError:  # another broker auto-created it meanwhile
            await self._until(lambda: name in self.node.view.topics)

    async def create_topic(self, name: str, partitions: int, configs: dict) -> None:
        await self._create(name, partitions, configs)

    async def create_internal(self, name: str, partitions: int, configs: dict, rf: int) -> None:
        """Create an internal topic (the offsets topic) with replication
        factor ``rf``, or the live brokers' count if fewer are live."""
        await self._create(name, partitions, {**configs, "replication_factor":
                                              max(1, min(rf, len(self.node.view.live)))})

    async def _create(self, name: str, partitions: int, configs: dict) -> None:
        node = self.node
        node.check_available()
        view = node.view
        if name in view.topics:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        lists = configs.pop(REPLICA_ASSIGNMENT, None)  # the creator's placement, if any
        rf = configs.pop("replication_factor", None)
        if lists is not None:
            lists = parse_replica_assignment(lists)
            if rf is not None and rf != len(lists[0]):
                raise InvalidReplicaAssignmentError(f"replication factor {rf} and replica lists "
                                                    f"of {len(lists[0])} broker(s) differ")
            rf = len(lists[0])
        rf = rf or self.config.default_replication_factor or min(3, len(view.live))
        min_isr = configs.get("min_insync_replicas", default_min_isr(rf))
        if min_isr > rf:
            raise InvalidConfigError(f"min_insync_replicas {min_isr} exceeds the replication "
                                     f"factor {rf}: every write would be refused")
        placed = given(lists, partitions, rf, view.live) if lists is not None \
            else assign(partitions, rf, view.live, view.partitions.values())
        held = Counter(r for st in view.partitions.values() for r in st.replicas)
        with self.budget.reserve(name, Counter(r for rs in placed for r in rs), held.__getitem__):
            await self._write_topic(name, TopicState(name, partitions, rf, configs,
                                                             topic_id=new_topic_id()), placed)

    async def _write_topic(self, name: str, topic: TopicState, placed: list) -> None:
        """The topic's partition states, then the topic, in etcd; returns
        once this broker's view has them (bounded by VIEW_WAIT_S): the
        replicas it placed are then counted by the view, not the budget."""
        node, view, partitions, rf = self.node, self.node.view, topic.partitions, \
            topic.replication_factor
        writes = {}
        for p, replicas in enumerate(placed):
            st = PartitionState(name, p, replicas, replicas[0], replicas, 0)
            writes[node.keys.partition(name, p)] = partition_value(st)
        # partition states first (etcd allows 128 operations per transaction),
        # the topic last: brokers act on a topic's partitions once it exists
        keys = list(writes)
        for i in range(0, len(keys), TXN_OPS):
            chunk = {k: writes[k] for k in keys[i:i + TXN_OPS]}
            if not await node.etcd.cas(chunk, {k: 0 for k in chunk}):
                raise TopicAlreadyExistsError(f"topic {name!r} already exists (or is being "
                                              "created)")
        if not await node.etcd.cas({node.keys.topic(name): topic_value(topic)},
                                   {node.keys.topic(name): 0}):
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        log.info("created topic %s: %d partition(s), replication factor %d, replicas %s", name,
                 partitions, rf, placed)
        await self._until(lambda: name in view.topics and
                          len(view.partitions_of(name)) == partitions)

    async def delete_topic(self, name: str) -> None:
        node = self.node
        node.check_available()
        topic = node.view.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        if not await node.etcd.cas({node.keys.topic(name): None},
                                   {node.keys.topic(name): topic.version}):
            raise UnknownTopicOrPartitionError(f"topic {name!r} changed meanwhile; retry")
        parts = [node.keys.partition(name, p) for p in range(topic.partitions)]
        for i in range(0, len(parts), TXN_OPS):
            await node.etcd.cas(dict.fromkeys(parts[i:i + TXN_OPS]), {})
        await self._until(lambda: name not in node.view.topics)

    async def add_partitions(self, name: str, count: int, assignments: tuple = (),
                             validate_only: bool = False) -> None:
        """CreatePartitions in a cluster (metadata/partitions.py)."""
        await add_cluster(self, name, count, assignments, validate_only)

    def describe_topic(self, name: str) -> tuple:
        """Settings from etcd; per partition this broker's replica (its leader
        has the authoritative HW: clients ask each leader for its own
        partitions), or NOT_LEADER_OR_FOLLOWER for one hosted elsewhere."""
        node = self.node
        topic = node.view.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        configs = node.store.config.log.replace(**topic.log_overrides()).to_dict()
        configs.update(partitions=topic.partitions, replication_factor=topic.replication_factor,
                       min_insync_replicas=topic.min_insync_replicas,
                       unclean_leader_election=str(topic.unclean_leader_election).lower())
        parts = []
        for p in range(topic.partitions):
            if (name, p) in node.replicas.replicas:
                parts.append(partition_entry(node.store, name, p))
            else:
                st = node.view.partitions.get((name, p))
                where = f"broker {st.leader}" if st and st.leader >= 0 else "no broker now"
                elsewhere = NotLeaderError(f"{name}-{p} is not hosted on broker {node.me} "
                                           f"(leader: {where})")
                parts.append(PartitionDescription(p, -1, -1, -1, 0, 0, *_err(elsewhere)))
        return configs, tuple(parts)

    def topic_settings(self, name: str) -> tuple:
        """(effective settings, the settings set on topic ``name``) in our
        names, from etcd's value (the replication factor, a topic fact, left
        out); effective: the broker's log defaults under the topic's own,
        the cluster's settings as the cluster applies them."""
        topic = self.node.view.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        overrides = {k: v for k, v in topic.configs.items() if k != "replication_factor"}
        effective = {**overrides,
                     **self.store.config.log.replace(**topic.log_overrides()).to_dict(),
                     "min_insync_replicas": topic.min_insync_replicas,
                     "unclean_leader_election": str(topic.unclean_leader_election).lower()}
        return effective, overrides

    async def alter_topic_configs(self, name: str, configs: dict) -> None:
        """Replace topic ``name``'s settings with ``configs`` (checked by the
        caller) in etcd, a compare-and-set on the topic's value; every broker
        hosting its partitions applies them live as its watch delivers the
        change (ClusterNode._configs_changed). Returns once this broker's
        view has them (bounded by VIEW_WAIT_S)."""
        node = self.node
        node.check_available()
        topic = node.view.topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        if configs.get("min_insync_replicas", 1) > topic.replication_factor:
            raise InvalidConfigError(f"min_insync_replicas {configs['min_insync_replicas']} "
                                     f"exceeds the replication factor "
                                     f"{topic.replication_factor}: every write would be refused")
        kept = {k: v for k, v in topic.configs.items() if k == "replication_factor"}
        new = TopicState(name, topic.partitions, topic.replication_factor, {**kept, **configs},
                         topic_id=topic.topic_id)
        key = node.keys.topic(name)
        if not await node.etcd.cas({key: topic_value(new)}, {key: topic.version}):
            raise UnknownTopicOrPartitionError(f"topic {name!r} changed meanwhile; retry")
        log.info("topic %s: settings changed to %s", name, configs)
        await self._until(lambda: (t := node.view.topics.get(name)) is None
                          or t.version != topic.version)

    async def elect_preferred(self, row: PartitionPlacement) -> int:
        """Move leadership to the preferred replica when it is live and in
        sync (a compare-and-set on the partition's state)."""
        node = self.node
        st = node.view.partitions.get((row.topic, row.partition))
        if st is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {row.topic!r}")
        new = preferred(st, node.view.live)
        if new is not None and not await node.cas_partition(st, new):
            raise UnknownTopicOrPartitionError(f"{st.topic}-{st.partition} changed "
                                               "meanwhile; retry")
        return (new or st).leader

    async def reassign(self, topic: str, partition: int, target) -> None:
        """Start (``target``: broker ids) or cancel (None) a partition's
        reassignment (reassignments.py)."""
        await cluster_reassign(self.node, self.budget, topic, partition, target)

    def reassignments(self, wanted) -> list:
        """The moves in progress among ``wanted`` ({topic: partitions or None}, None: all)."""
        return cluster_reassignments(self.node.view, wanted)

    async def _until(self, cond) -> None:
        deadline = time.monotonic() + VIEW_WAIT_S
        while not cond() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def new_producer_id(self) -> int:
        return await self.node.new_producer_id()

    # -- the data path ---------------------------------------------------------------------
    def _known(self, topic: str) -> None:
        if topic not in self.node.view.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")

    def log_for(self, topic: str, partition: int, *, create: bool = False):
        """The leader's log (NOT_LEADER on a follower); topics are created by
        CreateTopics or Metadata's auto-creation only."""
        self._known(topic)
        return self.node.replicas.leader((topic, partition)).log

    def check_settled(self, topic: str, partition: int) -> None:
        self.node.replicas.settled_leader((topic, partition))

    def append(self, topic: str, partition: int, data, acks: int) -> Appended:
        """Append as the leader in its epoch (NOT_LEADER, NOT_ENOUGH_REPLICAS
        refuse first, nothing written); ``pending`` is the future of acks=all
        (the HW covers the records) or of the local fsync (acks 0/1)."""
        self._known(topic)
        replicas = self.node.replicas
        r = replicas.leader_for_produce((topic, partition), acks)
        lg = r.log
        info = lg.append(data, r.epoch, sync=False)
        self.appended.notify(lg)
        end = info.last_offset + 1
        local = self.commit.request(lg, end)
        if acks != -1:
            return Appended(lg, info, local)
        if local is not None:
            local.add_done_callback(consume_outcome)  # a failed fsync shows as a HW that never moves
        return Appended(lg, info, replicas.committed(r, end))

    def append_marker(self, topic: str, partition: int, marker) -> Appended:
        """Write transaction ``marker`` (a TxnMarker) as the partition's leader
        in its current epoch (NOT_LEADER, NOT_ENOUGH_REPLICAS refuse first;
        storage's fencing errors refuse with nothing written); ``pending``
        is the future of acks=all, as ``append``'s."""
        self._known(topic)
        replicas = self.node.replicas
        r = replicas.leader_for_produce((topic, partition), -1)
        lg = r.log
        info = lg.append_marker(marker.producer_id, marker.producer_epoch, marker.commit,
                                marker.coordinator_epoch, r.epoch, sync=False)
        self.appended.notify(lg)
        end = info.last_offset + 1
        local = self.commit.request(lg, end, inline=False)  # no client's answer waits on it
        if local is not None:
            local.add_done_callback(consume_outcome)
        return Appended(lg, info, replicas.committed(r, end))

    def when_acked(self, appended: Appended, acks: int, cb, inline: bool = True) -> bool:
        fut = appended.pending
        if fut is None:
            return False
        if acks != -1:
            fut.add_done_callback(consume_outcome)
            return False
        fut.add_done_callback(lambda f: cb(None if f.cancelled() else f.exception()))
        return True

    def epoch_of(self, topic: str, partition: int) -> tuple:
        self.node.replicas.check_leader((topic, partition))
        r = self.node.replicas.replicas.get((topic, partition))
        return r.log, r.epoch

    def check_replication(self) -> None:
        """Replication requests are served in a cluster."""

    def peer_key(self):
        """The cluster's secret (cluster/peer_proof.py); CLUSTER_UNAVAILABLE
        until this broker has it."""
        return self.node.require_peer_key()

    def replica_log(self, topic: str, partition: int, replica_id: int, offset: int, epoch: int):
        """The leader's log a follower fetches from (its progress recorded)."""
        return self.node.replicas.on_replica_fetch((topic, partition), replica_id, offset,
                                                   epoch).log

    async def wait_appended(self, logs, seconds: float) -> None:
        await self.appended.wait(logs, seconds)

    # -- groups, security, the Kafka listener ------------------------------------------------
    def group_host(self) -> ClusterHost:
        return self._host

    def txn_host(self) -> ClusterHost:
        """Where the transaction state partitions live (coordinator/txn_manager.py)."""
        return self._txn_host

    async def coordinator_for(self, key: str, key_type: int = 0) -> tuple:
        """The broker leading ``key``'s partition of its internal topic (key
        type 0: a group's offsets partition; 1: a transactional id's
        transaction state partition); the topic is created on first use
        (COORDINATOR_NOT_AVAILABLE until it has a leader)."""
        node = self.node
        node.check_available()
        view = node.view
        spec = (self._txn_host if key_type == 1 else self._host).spec
        await self._internal.ensure(spec)  # shielded: finishes if this request goes away
        topic = view.topics.get(spec.name)
        st = view.partitions.get((spec.name, partition_for(key, topic.partitions))) \
            if topic else None
        broker = view.brokers.get(st.leader) if st is not None else None
        if broker is None:
            what = "transactional id" if key_type == 1 else "group"
            raise CoordinatorNotAvailableError(f"{what} {key!r}: its partition of {spec.name} "
                                               "has no leader yet")
        return broker.id, broker.host, broker.port

    def peer_dialler(self):
        """``async dial(broker_id)`` -> a connection to that broker that proved
        this one's identity (cluster/node.py ``connect_to``, as followers dial)."""
        return self.node.connect_to

    def leader_of(self, topic: str, partition: int) -> int:
        """The broker leading ``topic``-``partition`` in this broker's view
        (-1: none now); UNKNOWN_TOPIC_OR_PARTITION when it does not exist."""
        self._known(topic)
        st = self.node.view.partitions.get((topic, partition))
        if st is None:
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")
        return st.leader

    def access_stores(self, on_acls) -> tuple:
        """Users and ACL bindings in etcd, read from the node's mirror."""
        node = self.node
        node.access.on_acls = on_acls
        return (EtcdUserStore(node.etcd, node.keys, node.access),
                EtcdAclStore(node.etcd, node.keys, node.access))

    async def advertise_kafka(self, host: str, port: int, listeners: tuple = ()) -> None:
        await self.node.advertise_kafka(host, port, listeners)

    def directory(self):
        """The live view: its brokers carry their Kafka addresses (``kafka``)."""
        return self.node.view

    def cluster_numbers(self) -> dict:
        node = self.node
        leaders = [r for r in node.replicas.replicas.values()
                   if r.role == LEADER and r.state is not None]
        return {"leaders": len(leaders),
                "under": sum(1 for r in leaders  # replicas a move is adding not counted (Kafka's)
                             if len(r.state.isr) < len(r.state.replicas) - len(r.state.adding)),
                "shrinks": node.replicas.isr_shrinks, "expands": node.replicas.isr_expands,
                "controller_changes": node.controller_changes,
                "controller": 1 if node.controller.active else 0}

    def cluster_state(self, numbers: dict) -> dict:
        node = self.node
        view = node.view
        return {"name": self.cluster_name, "controller": view.controller, "me": node.me,
                "brokers": sorted((b.id, b.host, b.port) for b in list(view.brokers.values())),
                "partitions": {key: (s.leader, tuple(s.replicas), tuple(s.isr), s.leader_epoch)
                               for key, s in list(view.partitions.items())},
                "replication": {name: t.replication_factor for name, t in list(view.topics.items())},
                "under_replicated_led": numbers["under"], "leaders": numbers["leaders"]}


def _unavailable(view, topic: str, partition: int) -> PartitionPlacement:
    """A partition whose state was refused, as clients see it: no leader."""
    last = view.bad_of("partition", (topic, partition)).last
    replicas = last.replicas if last else ()
    return PartitionPlacement(topic, partition, -1, last.leader_epoch if last else 0, replicas, (),
                              replicas[0] if replicas else -1)


def _row(st: PartitionState) -> PartitionPlacement:
    return PartitionPlacement(st.topic, st.partition, st.leader, st.leader_epoch, st.replicas, st.isr,
                        st.preferred_leader)
