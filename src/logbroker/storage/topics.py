"""Topic configs (primary state in LMDB's ``topics`` table)."""

from __future__ import annotations

from dataclasses import dataclass, field

import msgpack

from .config import LogConfig, log_settings
from ..errors import InvalidConfigError
from ..limits import TOPIC_CONFIGS, check_partition_count, check_topic_name
from .metastore import MetaStore
from .topic_ids import topic_id_or_derived


@dataclass(frozen=True)
class TopicConfig:
    """A topic: its partition count, the settings it overrides (log
    settings, and Kafka configs stored without effect: ``log_settings``) and
    its id as stored (``b""`` for a topic stored before ids: ``id`` derives
    one, storage/topic_ids.py)."""

    name: str
    partitions: int = 1
    overrides: dict = field(default_factory=dict)
    topic_id: bytes = b""

    def __post_init__(self) -> None:
        check_topic_name(self.name)
        check_partition_count(self.partitions)
        unknown = set(self.overrides) - set(TOPIC_CONFIGS)
        if unknown:
            raise InvalidConfigError(f"unknown topic settings: {', '.join(sorted(unknown))}")
        LogConfig().replace(**log_settings(self.overrides)) if self.overrides else None

    @property
    def id(self) -> bytes:
        """Kafka's topic id of this topic (16 bytes)."""
        return topic_id_or_derived(self.topic_id, self.name)

    def log_config(self, base: LogConfig) -> LogConfig:
        return base.replace(**log_settings(self.overrides)) if self.overrides else base


class TopicStore:
    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta

    def put(self, topic: TopicConfig, txn=None) -> None:
        """Store ``topic`` (in ``txn`` when given, else a transaction of its own)."""
        if txn is None:
            with self.meta.write() as txn:
                return self.put(topic, txn)
        value = {"partitions": topic.partitions, "overrides": topic.overrides}
        if topic.topic_id:
            value["topic_id"] = topic.topic_id
        txn.put(topic.name.encode(), msgpack.packb(value), db=self.meta.db("topics"))

    def get(self, name: str) -> "TopicConfig | None":
        with self.meta.read() as txn:
            raw = txn.get(name.encode(), db=self.meta.db("topics"))
        return None if raw is None else TopicConfig(name, **msgpack.unpackb(raw))

    def list(self) -> list[TopicConfig]:
        with self.meta.read() as txn:
            return [TopicConfig(k.decode(), **msgpack.unpackb(v))
                    for k, v in txn.cursor(db=self.meta.db("topics"))]

    def delete(self, name: str, txn=None) -> None:
        """Remove ``name`` (in ``txn`` when given, else a transaction of its own)."""
        if txn is None:
            with self.meta.write() as txn:
                return self.delete(name, txn)
        txn.delete(name.encode(), db=self.meta.db("topics"))
