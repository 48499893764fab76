"""Where the group coordinator's offsets partitions live: the broker side.

``LocalHost`` (a single node: this broker leads every offsets partition, a
write is acknowledged once fsynced) and ``ClusterHost`` (the replica manager
says what this broker leads; a write is acknowledged once the partition's
high watermark covers it, acks=all) give the coordinator the same
interface: ``partitions``, ``leader(p)``, ``settled(p)``, ``led()``,
``append(p, data)``, ``check_partition``, ``lag_row``, ``legacy(p)`` /
``forget_legacy(groups)`` (offsets stored before the coordinator existed).
``find_coordinator`` answers FindCoordinator for either.
"""

from __future__ import annotations

import logging

from .. import limits
from ..coordinator.records import TOPIC, partition_for
from ..errors import (CoordinatorNotAvailableError, LogbrokerError, NotCoordinatorError,
                      TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from ..protocol import messages as m
from ..storage.groups import CommittedOffset
from ..api.edge import check_partition_key
from ..api.groups_view import lag_row

log = logging.getLogger("logbroker.broker")


def offsets_topic_configs(config) -> dict:
    """The offsets topic's settings: compacted, 100 MiB segments (Kafka's)."""
    return {"cleanup_policy": "compact", "segment_bytes": config.offsets_topic_segment_bytes}


class LocalHost:
    topic = TOPIC

    def __init__(self, store, commit, config) -> None:
        self.store, self.commit, self.config = store, commit, config
        topic = store.topics.get(TOPIC)
        self.exists = topic is not None
        self.partitions = topic.partitions if topic else config.offsets_topic_num_partitions

    def leader(self, p: int):
        if not self.exists:  # created on the first group request, as Kafka does
            self.store.create_topic(TOPIC, self.partitions, **offsets_topic_configs(self.config))
            self.exists = True
        return self.store.get_log(TOPIC, p), 0

    def settled(self, p: int) -> bool:
        return True

    def led(self) -> dict[int, int]:
        return dict.fromkeys(range(self.partitions), 0) if self.exists else {}

    async def append(self, p: int, data: bytes) -> None:
        lg = self.store.get_log(TOPIC, p)
        info = lg.append(data, sync=False)
        fut = self.commit.request(lg, info.last_offset + 1)
        if fut is not None:
            await fut

    def check_partition(self, topic: str, partition: int) -> None:
        check_partition_key(topic, partition)
        self.store.get_log(topic, partition)

    def lag_row(self, topic: str, partition: int, c, now: int) -> tuple:
        return lag_row(self.store, topic, partition, c, now)

    async def legacy(self, p: int) -> dict:
        groups = self.store.groups
        return {g: groups.fetch(g) for g in groups.groups()
                if partition_for(g, self.partitions) == p}

    async def forget_legacy(self, groups: list) -> None:
        for g in groups:
            self.store.groups.delete(g)


class ClusterHost:
    topic = TOPIC

    def __init__(self, cluster, commit, config) -> None:
        self.cluster, self.commit, self.config = cluster, commit, config
        self.node = cluster.node
        self.replicas = self.node.replicas

    @property
    def partitions(self) -> int:
        topic = self.node.view.topics.get(TOPIC)
        return topic.partitions if topic is not None else self.config.offsets_topic_num_partitions

    def leader(self, p: int):
        try:
            r = self.replicas.leader((TOPIC, p))
        except LogbrokerError:
            raise NotCoordinatorError(f"broker {self.node.me} does not lead {TOPIC}-{p}: find the "
                                      "coordinator again") from None
        return r.log, r.epoch

    def settled(self, p: int) -> bool:
        try:
            self.replicas.settled_leader((TOPIC, p))
            return True
        except LogbrokerError:
            return False

    def led(self) -> dict[int, int]:
        if self.replicas.fenced():
            return {}
        out = {}
        for (topic, p), r in list(self.replicas.replicas.items()):
            if topic == TOPIC:
                try:
                    out[p] = self.leader(p)[1]
                except LogbrokerError:
                    pass
        return out

    async def append(self, p: int, data: bytes) -> None:
        fut, _, _ = self.cluster.leader_append(self.commit, TOPIC, p, data, -1)
        if fut is not None:
            await fut

    def check_partition(self, topic: str, partition: int) -> None:
        check_partition_key(topic, partition)
        t = self.node.view.topics.get(topic)
        if t is None or partition >= t.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")

    def lag_row(self, topic: str, partition: int, c, now: int) -> tuple:
        return lag_row(self.node.store, topic, partition, c, now)

    async def legacy(self, p: int) -> dict:
        """Offsets the cluster kept in etcd before groups had a coordinator."""
        prefix = self.node.keys.offsets
        items, _ = await self.node.etcd.load(prefix)
        out: dict = {}
        for it in items:
            group, topic, part = it.key[len(prefix):].rsplit("/", 2)
            if partition_for(group, self.partitions) != p or not part.isdigit():
                continue
            from ..cluster.state import unpack

            v = unpack(it.value)
            out.setdefault(group, {})[(topic, int(part))] = CommittedOffset(
                int(v["offset"]), str(v.get("metadata", "")), int(v.get("commit_ms", 0)))
        return out

    async def forget_legacy(self, groups: list) -> None:
        for g in groups:
            await self.node.etcd.delete_prefix(self.node.keys.group_offsets(g))


async def find_coordinator(handlers, req: m.FindCoordinator) -> m.FindCoordinatorResponse:
    """The broker coordinating ``req.group``; in a cluster the offsets topic
    is created on first use (COORDINATOR_NOT_AVAILABLE until it has a leader)."""
    limits.check_group_name(req.group)
    config = handlers.config
    if handlers.cluster is None:
        return m.FindCoordinatorResponse(broker_id=config.broker_id, host=config.host,
                                         port=handlers.port)
    node = handlers.cluster.node
    node.check_available()
    view = node.view
    if TOPIC not in view.topics:
        try:
            await handlers.cluster.create_internal(TOPIC, config.offsets_topic_num_partitions,
                                                   offsets_topic_configs(config),
                                                   config.offsets_topic_replication_factor)
        except TopicAlreadyExistsError:
            pass
    topic = view.topics.get(TOPIC)
    st = view.partitions.get((TOPIC, partition_for(req.group, topic.partitions))) if topic else None
    broker = view.brokers.get(st.leader) if st is not None else None
    if broker is None:
        raise CoordinatorNotAvailableError(f"group {req.group!r}: its offsets partition has no "
                                           "leader yet")
    return m.FindCoordinatorResponse(broker_id=broker.id, host=broker.host, port=broker.port)
