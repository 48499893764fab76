"""ClusterView: this broker's mirror of the cluster's metadata in etcd.

Filled by a full ``load`` and kept current by applying watch events in
revision order (``apply``); the node is its only writer. Reads are plain
attribute reads on the event loop. A value that cannot be decoded is
logged and skipped (etcd is shared; one bad key must not stop a broker).
"""

from __future__ import annotations

import logging

from .etcd import Event, Item
from .state import (BrokerInfo, Keys, PartitionState, TopicState, broker_from, partition_from,
                    topic_from, unpack)

log = logging.getLogger("logbroker.cluster")


class ClusterView:
    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicState] = {}
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.controller = -1
        self.revision = 0

    @property
    def live(self) -> set[int]:
        return set(self.brokers)

    def partitions_of(self, topic: str) -> list[PartitionState]:
        t = self.topics.get(topic)
        if t is None:
            return []
        return [st for p in range(t.partitions) if (st := self.partitions.get((topic, p)))]

    def reset(self, items: list[Item], revision: int) -> list[tuple[str, object]]:
        """Replace everything with a fresh load; returns what changed."""
        old = (dict(self.brokers), dict(self.topics), dict(self.partitions), self.controller)
        self.brokers, self.topics, self.partitions, self.controller = {}, {}, {}, -1
        for it in items:
            self._set(it.key, it.value, it.version, it.created)
        self.revision = revision
        changed: list[tuple[str, object]] = []
        for kind, before, after in (("broker", old[0], self.brokers), ("topic", old[1], self.topics),
                                    ("partition", old[2], self.partitions)):
            for k in set(before) | set(after):
                if before.get(k) != after.get(k):
                    changed.append((kind, k))
        if old[3] != self.controller:
            changed.append(("controller", self.controller))
        return changed

    def apply(self, ev: Event) -> "tuple[str, object] | None":
        """Apply one watch event; (kind, id) of what changed, or None."""
        self.revision = max(self.revision, ev.version)
        return self._set(ev.key, ev.value, ev.version, ev.created)

    def _set(self, key: str, value: "bytes | None", version: int,
             created: int = 0) -> "tuple[str, object] | None":
        k = self.keys
        try:
            if key == k.controller:
                self.controller = -1 if value is None else int(unpack(value)["broker_id"])
                return ("controller", self.controller)
            if key.startswith(k.brokers):
                bid = int(key[len(k.brokers):])
                if value is None:
                    self.brokers.pop(bid, None)
                else:
                    self.brokers[bid] = broker_from(bid, value, created)
                return ("broker", bid)
            if key.startswith(k.topics):
                name = key[len(k.topics):]
                if value is None:
                    self.topics.pop(name, None)
                else:
                    self.topics[name] = topic_from(name, value, version)
                return ("topic", name)
            if key.startswith(k.partitions):
                topic, _, part = key[len(k.partitions):].rpartition("/")
                tp = (topic, int(part))
                if value is None:
                    self.partitions.pop(tp, None)
                else:
                    self.partitions[tp] = partition_from(topic, tp[1], value, version)
                return ("partition", tp)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring undecodable etcd key %s: %s", key, exc)
        return None
