"""Request handlers of cluster mode (the broker was started with ``--etcd``).

Metadata, topic admin and committed offsets are answered from / written to
etcd (through the node's view and compare-and-set transactions); the
replication requests run against the replica manager. The single-node
handlers (handlers.py) stay as they are; ``ClusterHandlers.table`` takes
over the request kinds listed in it.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import limits
from ..errors import (InvalidConfigError, LogbrokerError, NotLeaderError,
                      TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..cluster.node import ClusterNode
from ..cluster.placement import assign, preferred
from ..cluster.state import PartitionState, TopicState, default_min_isr, partition_value, topic_value
from .durability import DataNotifier
from .edge import check_partition_key, listed
from .epoch_query import answer_epoch_query
from .produce import consume_outcome
from .topics_view import partition_row

log = logging.getLogger("logbroker.broker")
VIEW_WAIT_S = 5.0  # a topic created here is in this broker's view before the answer
TXN_OPS = 100  # etcd's default limit is 128 operations per transaction


class ClusterHandlers:
    def __init__(self, node: ClusterNode, config, appended: DataNotifier) -> None:
        self.node, self.config, self.appended = node, config, appended
        self.table = {
            m.Metadata: self.metadata, m.CreateTopics: self.create_topics,
            m.DeleteTopics: self.delete_topics, m.DescribeTopics: self.describe_topics,
            m.DescribeCluster: self.describe_cluster,
            m.ElectLeaders: self.elect_leaders, m.ReplicaFetch: self.replica_fetch,
            m.OffsetForLeaderEpoch: self.offset_for_leader_epoch,
            m.InitProducerId: self.init_producer_id,
        }

    def known(self, topic: str) -> None:
        """The topic is in etcd (else UNKNOWN_TOPIC_OR_PARTITION)."""
        if topic not in self.node.view.topics:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")

    def leader_append(self, commit, topic: str, partition: int, data, acks: int):
        """Append as the leader in its epoch (NOT_LEADER, NOT_ENOUGH_REPLICAS
        refuse first, nothing written) -> (future or None, log, AppendInfo):
        the future of acks=all completes when the ISR has the records (the
        HW covers them), that of acks=1 when they are durable here."""
        check_partition_key(topic, partition)
        self.known(topic)
        replicas = self.node.replicas
        r = replicas.leader_for_produce((topic, partition), acks)
        lg = r.log
        info = lg.append(data, r.epoch, sync=False)
        self.appended.notify(lg)
        end = info.last_offset + 1
        local = commit.request(lg, end)
        if acks != -1:
            return local, lg, info
        if local is not None:
            local.add_done_callback(consume_outcome)  # a failed fsync shows as a HW that never moves
        return replicas.committed(r, end), lg, info

    # -- metadata ---------------------------------------------------------------------
    async def metadata(self, req: m.Metadata) -> m.MetadataResponse:
        # a broker without a live etcd session has a frozen view (it may still
        # name itself leader): CLUSTER_UNAVAILABLE sends the client elsewhere
        self.node.check_available()
        view = self.node.view
        names = req.topics if req.topics is not None else listed(view.topics)
        topics, parts = [], []
        for name in names:
            try:
                limits.check_topic_name(name)
                topic = view.topics.get(name)
                if topic is None and req.auto_create and self.config.auto_create_topics:
                    try:
                        await self._create(name, self.config.default_partitions, {})
                    except TopicAlreadyExistsError:  # another broker auto-created it meanwhile
                        await self._until(lambda: name in view.topics)
                    topic = view.topics.get(name)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
                topics.append((name, 0, "", topic.partitions))
                parts.extend((st.topic, st.partition, st.leader, st.leader_epoch, st.replicas, st.isr)
                             for st in view.partitions_of(name))
            except LogbrokerError as exc:
                topics.append((name, *_err(exc), 0))
        brokers = tuple((b.id, b.host, b.port) for b in sorted(view.brokers.values(),
                                                                 key=lambda b: b.id))
        return m.MetadataResponse(brokers=brokers, topics=tuple(topics), controller=view.controller,
                                  partitions=tuple(parts))

    async def describe_cluster(self, req: m.DescribeCluster) -> m.DescribeClusterResponse:
        self.node.check_available()
        view = self.node.view
        names = set(req.topics) if req.topics is not None else None
        replicas = {r for st in view.partitions.values() for r in st.replicas}
        brokers = [(b.id, b.host, b.port, True) for b in view.brokers.values()]
        brokers += [(r, "", 0, False) for r in replicas - set(view.brokers)]
        parts = [(st.topic, st.partition, st.leader, st.leader_epoch, st.replicas, st.isr,
                  st.preferred_leader) for st in sorted(view.partitions.values(), key=lambda s: s.key)
                 if names is None or st.topic in names]
        return m.DescribeClusterResponse(cluster=self.config.cluster_name,
                                         controller=view.controller,
                                         brokers=tuple(sorted(brokers)), partitions=tuple(parts))

    async def init_producer_id(self, req: m.InitProducerId) -> m.InitProducerIdResponse:
        return m.InitProducerIdResponse(producer_id=await self.node.new_producer_id(),
                                        producer_epoch=0)

    # -- topics -------------------------------------------------------------------------
    async def create_topics(self, req: m.CreateTopics) -> m.CreateTopicsResponse:
        out = []
        for name, partitions, configs in req.topics:
            try:
                limits.check_topic_name(name)
                limits.check_partition_count(partitions)
                await self._create(name, partitions, dict(limits.check_topic_configs(configs)))
                out.append((name, 0, ""))
            except LogbrokerError as exc:
                out.append((name, *_err(exc)))
        return m.CreateTopicsResponse(topics=tuple(out))

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
        rf = configs.pop("replication_factor", None) or self.config.default_replication_factor \
            or min(3, len(view.live))
        min_isr = configs.get("min_insync_replicas", default_min_isr(rf))
        if min_isr > rf:
            raise InvalidConfigError(f"min_insync_replicas {min_isr} exceeds the replication "
                                     f"factor {rf}: every write would be refused")
        placed = assign(partitions, rf, view.live, view.partitions.values())
        topic = TopicState(name, partitions, rf, configs)
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

    async def describe_topics(self, req: m.DescribeTopics) -> m.DescribeTopicsResponse:
        """Settings from etcd; per partition this broker's replica (its leader
        has the authoritative HW: clients ask each leader for its own
        partitions), or NOT_LEADER_OR_FOLLOWER for one hosted elsewhere."""
        view = self.node.view
        names = req.topics if req.topics is not None else listed(view.topics)
        out = []
        for name in names:
            try:
                topic = view.topics.get(limits.check_topic_name(name))
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            except LogbrokerError as exc:
                out.append((name, *_err(exc), {}, ()))
                continue
            configs = self.node.store.config.log.replace(**topic.log_overrides()).to_dict()
            configs.update(partitions=topic.partitions, replication_factor=topic.replication_factor,
                           min_insync_replicas=topic.min_insync_replicas,
                           unclean_leader_election=str(topic.unclean_leader_election).lower())
            parts = []
            for p in range(topic.partitions):
                if (name, p) in self.node.replicas.replicas:
                    parts.append(partition_row(self.node.store, name, p))
                else:
                    st = view.partitions.get((name, p))
                    where = f"broker {st.leader}" if st and st.leader >= 0 else "no broker now"
                    parts.append((p, -1, -1, -1, 0, 0, *_err(NotLeaderError(
                        f"{name}-{p} is not hosted on broker {self.node.me} (leader: {where})"))))
            out.append((name, 0, "", configs, tuple(parts)))
        return m.DescribeTopicsResponse(topics=tuple(out))

    async def delete_topics(self, req: m.DeleteTopics) -> m.DeleteTopicsResponse:
        node, out = self.node, []
        for name in req.topics:
            try:
                limits.check_topic_name(name)
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
                out.append((name, 0, ""))
            except LogbrokerError as exc:
                out.append((name, *_err(exc)))
        return m.DeleteTopicsResponse(topics=tuple(out))

    async def _until(self, cond) -> None:
        deadline = time.monotonic() + VIEW_WAIT_S
        while not cond() and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def elect_leaders(self, req: m.ElectLeaders) -> m.ElectLeadersResponse:
        node = self.node
        node.check_available()
        names = set(req.topics) if req.topics is not None else None
        out = []
        for st in sorted(node.view.partitions.values(), key=lambda s: s.key):
            if names is not None and st.topic not in names:
                continue
            new = preferred(st, node.view.live)
            try:
                if new is not None and not await node.cas_partition(st, new):
                    raise UnknownTopicOrPartitionError(f"{st.topic}-{st.partition} changed "
                                                       "meanwhile; retry")
                out.append((st.topic, st.partition, 0, "", (new or st).leader))
            except LogbrokerError as exc:
                out.append((st.topic, st.partition, *_err(exc), st.leader))
        for name in (names or set()) - {st.topic for st in node.view.partitions.values()}:
            out.append((name, -1, *_err(UnknownTopicOrPartitionError(f"unknown topic {name!r}")), -1))
        return m.ElectLeadersResponse(parts=tuple(out))

    # -- replication ---------------------------------------------------------------------------
    async def replica_fetch(self, req: m.ReplicaFetch) -> m.ReplicaFetchResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, min(req.max_wait_ms, 30_000)) / 1000
        while True:
            parts, payload, total, logs = self._replica_read(req)
            left = deadline - loop.time()
            if total >= req.min_bytes or left <= 0 or not logs:
                return m.ReplicaFetchResponse(parts=tuple(parts), payload=tuple(payload))
            await self.appended.wait(logs, left)

    def _replica_read(self, req: m.ReplicaFetch):
        parts, payload, logs, total = [], [], [], 0
        budget = max(req.max_bytes, 1)
        for topic, partition, offset, epoch, max_bytes in req.parts:
            lg = None
            try:
                check_partition_key(topic, partition)
                limits.check_int(max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
                r = self.node.replicas.on_replica_fetch((topic, partition), req.replica_id,
                                                        offset, epoch)
                lg = r.log
                logs.append(lg)
                data = None
                if budget > 0 or total == 0:
                    data = lg.slice(offset, max(1, min(max_bytes, budget)))
                n = data.size if data else 0
                parts.append((topic, partition, 0, "", lg.high_watermark, lg.log_start_offset,
                              lg.log_end_offset, data.segment.base_offset if data else -1, n))
                payload.append(data or b"")
                total += n
                budget -= n
            except LogbrokerError as exc:
                hw = start = end = -1  # this replica's offsets, where it has one
                try:
                    lg = lg or self.node.store.get_log(topic, partition)
                    hw, start, end = lg.high_watermark, lg.log_start_offset, lg.log_end_offset
                except LogbrokerError:
                    pass
                parts.append((topic, partition, *_err(exc), hw, start, end, -1, 0))
                payload.append(b"")
        return parts, payload, total, logs

    async def offset_for_leader_epoch(self, req: m.OffsetForLeaderEpoch
                                      ) -> m.OffsetForLeaderEpochResponse:
        def lookup(topic: str, partition: int) -> tuple:
            self.node.replicas.check_leader((topic, partition))
            r = self.node.replicas.replicas.get((topic, partition))
            return r.log, r.epoch
        return answer_epoch_query(req, lookup)
