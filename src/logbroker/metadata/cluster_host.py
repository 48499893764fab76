"""The partitions of an internal topic in a cluster (the offsets topic, the
transaction state topic: ``InternalTopic``), the coordinators' host
(coordinator/manager.py, coordinator/txn_manager.py): the replica manager
says what this broker leads; a write is acknowledged once the partition's
high watermark covers it (acks=all)."""

from __future__ import annotations

import logging

from .. import limits
from ..cluster.state import unpack
from ..coordinator.records import TOPIC, partition_for
from ..errors import LogbrokerError, NotCoordinatorError, UnknownTopicOrPartitionError
from ..storage.groups import CommittedOffset
from .offsets_topic import InternalTopic, lag_row

log = logging.getLogger("logbroker.cluster")


class ClusterHost:
    def __init__(self, meta, config, spec: InternalTopic) -> None:
        """``meta``: the ClusterMetadata whose ``append`` writes as the leader."""
        self.meta, self.config, self.spec = meta, config, spec
        self.topic = spec.name
        self.node = meta.node
        self.replicas = self.node.replicas

    @property
    def partitions(self) -> int:
        topic = self.node.view.topics.get(self.topic)
        return topic.partitions if topic is not None else self.spec.partitions

    def leader(self, p: int):
        try:
            r = self.replicas.leader((self.topic, p))
        except LogbrokerError:
            raise NotCoordinatorError(f"broker {self.node.me} does not lead {self.topic}-{p}: "
                                      "find the coordinator again") from None
        return r.log, r.epoch

    def settled(self, p: int) -> bool:
        try:
            self.replicas.settled_leader((self.topic, p))
            return True
        except LogbrokerError:
            return False

    def led(self) -> dict[int, int]:
        if self.replicas.fenced():
            return {}
        out = {}
        for (topic, p), r in list(self.replicas.replicas.items()):
            if topic == self.topic:
                try:
                    out[p] = self.leader(p)[1]
                except LogbrokerError:
                    pass
        return out

    def append_now(self, p: int, data: bytes) -> "asyncio.Future | None":
        """Append ``data`` to partition ``p`` now (NOT_LEADER_OR_FOLLOWER
        raised here); a future done once the in-sync replicas have it."""
        return self.meta.append(self.topic, p, data, -1).pending

    async def append(self, p: int, data: bytes) -> None:
        fut = self.append_now(p, data)
        if fut is not None:
            await fut

    def check_partition(self, topic: str, partition: int) -> None:
        limits.check_topic_name(topic)
        limits.check_partition(partition)
        t = self.node.view.topics.get(topic)
        if t is None or partition >= t.partitions:
            raise UnknownTopicOrPartitionError(f"unknown topic-partition {topic}-{partition}")

    def lag_row(self, topic: str, partition: int, c, now: int) -> tuple:
        return lag_row(self.node.store, topic, partition, c, now)

    async def legacy(self, p: int) -> dict:
        """Offsets the cluster kept in etcd before groups had a coordinator."""
        if self.topic != TOPIC:
            return {}
        prefix = self.node.keys.offsets
        items, _ = await self.node.etcd.load(prefix)
        out: dict = {}
        for it in items:
            try:
                group, topic, part = it.key[len(prefix):].rsplit("/", 2)
                if partition_for(group, self.partitions) != p or not part.isdigit():
                    continue
                v = unpack(it.value)
                found = CommittedOffset(limits.check_offset(v["offset"]),
                                        str(v.get("metadata", "")), int(v.get("commit_ms", 0)))
            except (ValueError, KeyError, TypeError, LogbrokerError) as exc:
                log.warning("ignoring the undecodable legacy offset at %s: %s", it.key, exc)
                continue
            out.setdefault(group, {})[(topic, int(part))] = found
        return out

    async def forget_legacy(self, groups: list) -> None:
        for g in groups:
            await self.node.etcd.delete_prefix(self.node.keys.group_offsets(g))
