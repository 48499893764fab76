"""ClusterView: this broker's mirror of the cluster's metadata in etcd.

Filled by a full ``load`` and kept current by applying watch events in
revision order (``apply``); the node is its only writer. Reads are plain
attribute reads on the event loop.

A value that breaks its schema (checks.py; etcd is shared, and one bad
key must not stop a broker or reach a client) is left out of the view and
recorded in ``bad`` (its etcd key -> ``Bad``: its revision, why, and the
last valid value this broker saw there), logged once per revision (a
warning), not per read or reload. A valid write or a delete of the key
clears it. The controller repairs what it can from ``Bad.last``
(controller.py); the node keeps the partition's data but serves it as
unavailable meanwhile (node.py).
"""

from __future__ import annotations

import logging

from collections import Counter
from dataclasses import dataclass

from . import checks
from .etcd import Event, Item
from .state import (BrokerInfo, Keys, PartitionState, TopicState, broker_from, partition_from,
                    topic_from, unpack)

log = logging.getLogger("logbroker.cluster")


@dataclass(frozen=True)
class Bad:
    """A value left out of the view: ``kind`` and ``ident`` as ``apply``
    names changes (a topic's name, a partition's (topic, p), a broker id;
    None when the key itself is malformed), its etcd ``version``
    (mod_revision), ``why`` and ``last``: the last valid value at that key."""

    kind: str
    ident: object
    version: int
    why: str
    last: object = None


class ClusterView:
    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicState] = {}
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.moving: set[tuple[str, int]] = set()  # partitions being reassigned (reassignment.py)
        self.held: Counter = Counter()  # broker id -> the partitions it is a replica of
        self.controller = -1
        self.revision = 0
        self.bad: dict[str, Bad] = {}  # etcd key -> a value left out (module docstring)
        self._valid: dict[str, object] = {}  # etcd key -> its last valid topic / partition state

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
        self.moving, self.held = set(), Counter()
        present = {it.key for it in items}
        for key in [k for k in self._valid if k not in present]:
            del self._valid[key]
        for key in [k for k in self.bad if k not in present]:
            del self.bad[key]
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

    def bad_of(self, kind: str, ident) -> "Bad | None":
        """The ``Bad`` record of a topic's or a partition's key, if any."""
        key = self.keys.topic(ident) if kind == "topic" else self.keys.partition(*ident)
        return self.bad.get(key)

    def _set(self, key: str, value: "bytes | None", version: int,
             created: int = 0) -> "tuple[str, object] | None":
        k = self.keys
        kind, ident, table = None, None, None
        try:
            if key == k.controller:
                kind = "controller"
                self.controller = -1
                if value is not None:
                    self.controller = checks.broker_id(unpack(value).get("broker_id"))
                return self._good(key, ("controller", self.controller))
            if key.startswith(k.brokers):
                kind, table = "broker", self.brokers
                ident = checks.broker_id(_number(key[len(k.brokers):]))
                self.brokers.pop(ident, None)
                if value is not None:
                    self.brokers[ident] = broker_from(ident, value, created)
            elif key.startswith(k.topics):
                kind, table = "topic", self.topics
                ident = key[len(k.topics):]
                self.topics.pop(ident, None)
                if value is not None:
                    self.topics[ident] = topic_from(ident, value, version)
            elif key.startswith(k.partitions):
                kind, table = "partition", self.partitions
                topic, _, part = key[len(k.partitions):].rpartition("/")
                ident = (topic, _number(part))
                gone = self.partitions.pop(ident, None)
                self.moving.discard(ident)
                if gone is not None:
                    self.held.subtract(gone.replicas)
                if value is not None:
                    st = self.partitions[ident] = partition_from(topic, ident[1], value, version)
                    self.held.update(st.replicas)
                    if st.reassigning:
                        self.moving.add(ident)
            else:
                return None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            return self._bad(key, kind, ident, version, str(exc))
        if value is None:
            self._valid.pop(key, None)
        elif kind != "broker":
            self._valid[key] = table[ident]
        return self._good(key, (kind, ident))

    def _good(self, key: str, change: tuple) -> tuple:
        if self.bad.pop(key, None) is not None:
            log.info("etcd key %s is valid again", key)
        return change

    def _bad(self, key: str, kind: "str | None", ident, version: int, why: str):
        """Record a value left out; log it once per revision; the change
        it makes (the entry is gone from the view), or None."""
        if kind == "controller":
            self.controller = -1
        known = self.bad.get(key)
        if known is None or known.version != version:
            log.warning("refusing the %s value at etcd key %s (revision %d): %s; it is not "
                        "served%s", kind or "malformed", key[:300], version, why[:300],
                        " (the controller repairs it from its last valid value)"
                        if self._valid.get(key) is not None else "")
        self.bad[key] = Bad(kind or "?", ident, version, why, self._valid.get(key))
        return None if ident is None else (kind, ident)


def _number(text: str) -> int:
    """A broker id or partition number in a key: decimal digits only."""
    if not text.isdigit() or len(text) > 10:
        raise checks.BadValue(f"{text[:20]!r} is not a number")
    return int(text)
