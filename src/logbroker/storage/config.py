"""Frozen settings objects for logs and the storage engine.

Every field has a Kafka-like default; ``replace()`` (dataclasses) derives
variants. Validation happens once, at construction, and raises
``InvalidConfigError`` with the field name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidConfigError

FLUSH_FSYNC = "fsync"
FLUSH_LAZY = "lazy"
POLICY_DELETE, POLICY_COMPACT = "delete", "compact"
CLEANUP_POLICIES = ("delete", "compact", "compact,delete", "delete,compact")


@dataclass(frozen=True)
class LogConfig:
    """Per-partition log settings (topic configs override the broker's).

    - ``segment_bytes``: roll the active segment when an append would exceed it.
    - ``segment_ms``: roll a non-empty active segment older than this, so time
      retention can take effect on a quiet topic.
    - ``retention_ms`` / ``retention_bytes``: -1 disables that limit.
    - ``index_interval_bytes``: one sparse offset/time index entry per this
      many bytes of batches (Kafka's 4096).
    - ``flush``: ``"fsync"`` (default: an append returns only after its bytes
      are fsynced, many appends sharing one fsync) or ``"lazy"`` (the named,
      explicit opt-out: the OS or ``flush()`` decides when bytes reach disk).
    - ``max_batch_bytes``: largest batch accepted by ``append``.
    - ``file_delete_delay_ms``: a deleted segment stays as ``.deleted`` this
      long, so readers that already planned a read of it are not broken.
    - ``cleanup_policy``: ``delete`` (time/size retention), ``compact``
      (keep the last record per key, docs/storage.md) or both
      (``compact,delete``).
    - ``delete_retention_ms``: how long a tombstone (null value) survives
      once the compactor first cleaned the section holding it.
    - ``min_cleanable_dirty_percent``: compact only when the uncleaned part
      is at least this share (0-100) of the cleanable log (Kafka's
      min.cleanable.dirty.ratio 0.5 = 50).
    - ``min_compaction_lag_ms``: a segment is compacted only once its newest
      record is at least this old.
    """

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * 24 * 3600 * 1000
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    flush: str = FLUSH_FSYNC
    max_batch_bytes: int = 16 << 20
    file_delete_delay_ms: int = 60_000
    cleanup_policy: str = POLICY_DELETE
    delete_retention_ms: int = 86_400_000
    min_cleanable_dirty_percent: int = 50
    min_compaction_lag_ms: int = 0

    def __post_init__(self) -> None:
        _positive(self, "segment_bytes", minimum=128)
        _positive(self, "segment_ms", minimum=1)
        _positive(self, "index_interval_bytes", minimum=1)
        _positive(self, "max_batch_bytes", minimum=64)
        _positive(self, "file_delete_delay_ms", minimum=0)
        _positive(self, "delete_retention_ms", minimum=0)
        _positive(self, "min_compaction_lag_ms", minimum=0)
        _positive(self, "min_cleanable_dirty_percent", minimum=0)
        if self.min_cleanable_dirty_percent > 100:
            raise InvalidConfigError("min_cleanable_dirty_percent must be 0..100, "
                                     f"got {self.min_cleanable_dirty_percent!r}")
        if self.cleanup_policy not in CLEANUP_POLICIES:
            raise InvalidConfigError(f"cleanup_policy must be one of {', '.join(CLEANUP_POLICIES)}, "
                                     f"got {self.cleanup_policy!r}")
        for name in ("retention_ms", "retention_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or (value < 0 and value != -1):
                raise InvalidConfigError(f"{name} must be -1 or >= 0, got {value!r}")
        if self.flush not in (FLUSH_FSYNC, FLUSH_LAZY):
            raise InvalidConfigError(f"flush must be 'fsync' or 'lazy', got {self.flush!r}")

    @property
    def compacts(self) -> bool:
        """The cleanup policy includes ``compact``."""
        return POLICY_COMPACT in self.cleanup_policy.split(",")

    @property
    def deletes(self) -> bool:
        """The cleanup policy includes ``delete`` (time and size retention apply)."""
        return POLICY_DELETE in self.cleanup_policy.split(",")

    def replace(self, **changes: Any) -> "LogConfig":
        """A copy with ``changes``; unknown names raise ``InvalidConfigError``."""
        unknown = set(changes) - {f.name for f in dataclasses.fields(self)}
        if unknown:
            raise InvalidConfigError(f"unknown log settings: {', '.join(sorted(unknown))}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LogConfig":
        return cls().replace(**data)


LOG_FIELDS = frozenset(f.name for f in dataclasses.fields(LogConfig))


def log_settings(configs: dict) -> dict:
    """The entries of a topic's ``configs`` that are LogConfig settings (a
    topic also stores cluster settings and Kafka configs without effect)."""
    return {k: v for k, v in configs.items() if k in LOG_FIELDS}


@dataclass(frozen=True)
class StorageConfig:
    """Settings of one data directory.

    - ``map_size``: LMDB map size (address space reserved, not disk used).
    - ``max_open_files``: bound on segment file descriptors held open; idle
      ones are closed least-recently-used first.
    - ``checkpoint_interval_ms``: how often ``Store.tick`` persists recovery
      points (they also move on roll and on clean close).
    - ``compaction_bytes_per_tick``: segment bytes the compactor reads (and
      about as many it writes) in one ``Store.tick``, over all partitions.
    - ``compaction_map_bytes``: memory bound of the compactor's key map (key
      bytes plus a fixed per-key cost); a log with more keys is compacted a
      prefix of its dirty section per pass.
    - ``journal``: a group commit of many fsync logs writes their appends
      to one write-ahead journal with one fdatasync (storage/journal.py);
      False: one syncfs of the filesystem instead (decision 103).
    - ``journal_checkpoint_ms``: how often, while entries come, a checkpoint
      makes the segment files durable (one syncfs) and deletes the journal's
      files written before it (also once a file passes 64 MiB); a crash
      replays at most this much.
    """

    log: LogConfig = field(default_factory=LogConfig)
    map_size: int = 1 << 30
    max_dbs: int = 16
    max_open_files: int = 512
    checkpoint_interval_ms: int = 10_000
    compaction_bytes_per_tick: int = 64 << 20
    compaction_map_bytes: int = 32 << 20
    journal: bool = True
    journal_checkpoint_ms: int = 2_000

    def __post_init__(self) -> None:
        _positive(self, "map_size", minimum=1 << 20)
        _positive(self, "compaction_bytes_per_tick", minimum=4096)
        _positive(self, "compaction_map_bytes", minimum=4096)
        _positive(self, "max_open_files", minimum=4)
        _positive(self, "checkpoint_interval_ms", minimum=1)
        _positive(self, "journal_checkpoint_ms", minimum=1)


def _positive(obj: object, name: str, minimum: int) -> None:
    value = getattr(obj, name)
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
