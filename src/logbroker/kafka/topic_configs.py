"""Kafka's topic config names and values, as ours (pure functions;
docs/kafka.md §4.9).

One table (``KAFKA``) serves every direction: CreateTopics and the two
AlterConfigs turn a Kafka client's ``configs`` into our settings
(``to_ours``), DescribeConfigs turns a topic's settings into Kafka's
entries (``to_kafka``). Only Kafka's topic config names are taken: any
other name is INVALID_CONFIG naming it, as Kafka answers. Our own knobs
without a Kafka name (``flush``) are neither taken nor shown here.

Most names differ from ours only by '.' for '_' (``retention.ms`` is
``retention_ms``); three are renamed: ``max.message.bytes`` is our
``max_batch_bytes``, ``min.cleanable.dirty.ratio`` (0.0-1.0) our
``min_cleanable_dirty_percent`` (0-100), ``unclean.leader.election.enable``
our ``unclean_leader_election``.

Values are parsed by the config's Kafka type: INT/LONG as integers,
BOOLEAN as "true"/"false" (stored as that string), LIST with the spaces
around its commas removed, STRING as given; ranges are checked by the
handler (``limits.check_topic_configs``), the same rules as our own
clients'. Kafka configs we accept but do not act on (``NO_EFFECT``) are
stored and shown like the others; docs/kafka.md says which.
"""

from __future__ import annotations

from ..errors import InvalidConfigError, LogbrokerError
from ..limits import check_topic_configs

# Kafka's config types (DescribeConfigs v3)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7
MAX_LONG = str((1 << 63) - 1)

# Kafka topic config -> (our name, Kafka config type, Kafka's default shown when the topic and
# the broker have no value of ours for it (None: we always have one))
KAFKA: dict = {
    "cleanup.policy": ("cleanup_policy", LIST, None),
    "delete.retention.ms": ("delete_retention_ms", LONG, None),
    "file.delete.delay.ms": ("file_delete_delay_ms", LONG, None),
    "index.interval.bytes": ("index_interval_bytes", INT, None),
    "max.message.bytes": ("max_batch_bytes", INT, None),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_percent", DOUBLE, None),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", LONG, None),
    "retention.bytes": ("retention_bytes", LONG, None),
    "retention.ms": ("retention_ms", LONG, None),
    "segment.bytes": ("segment_bytes", INT, None),
    "segment.ms": ("segment_ms", LONG, None),
    # the cluster's (a single node has replication factor 1 and ignores them)
    "min.insync.replicas": ("min_insync_replicas", INT, "1"),
    "unclean.leader.election.enable": ("unclean_leader_election", BOOLEAN, "false"),
    # accepted, stored and shown; no effect here (NO_EFFECT)
    "compression.type": ("compression_type", STRING, "producer"),
    "compression.gzip.level": ("compression_gzip_level", INT, "-1"),
    "compression.lz4.level": ("compression_lz4_level", INT, "9"),
    "compression.zstd.level": ("compression_zstd_level", INT, "3"),
    "flush.messages": ("flush_messages", LONG, MAX_LONG),
    "flush.ms": ("flush_ms", LONG, MAX_LONG),
    "follower.replication.throttled.replicas": ("follower_replication_throttled_replicas",
                                                LIST, ""),
    "leader.replication.throttled.replicas": ("leader_replication_throttled_replicas", LIST, ""),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", LONG, MAX_LONG),
    "message.downconversion.enable": ("message_downconversion_enable", BOOLEAN, "true"),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", LONG, MAX_LONG),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", LONG, MAX_LONG),
    "message.timestamp.difference.max.ms": ("message_timestamp_difference_max_ms", LONG,
                                            MAX_LONG),
    "message.timestamp.type": ("message_timestamp_type", STRING, "CreateTime"),
    "preallocate": ("preallocate", BOOLEAN, "false"),
    "segment.index.bytes": ("segment_index_bytes", INT, "10485760"),
    "segment.jitter.ms": ("segment_jitter_ms", LONG, "0"),
}
NO_EFFECT = frozenset(name for name, (_o, _t, default) in KAFKA.items()
                      if default is not None) - {"min.insync.replicas",
                                                 "unclean.leader.election.enable"}
LISTS = frozenset(name for name, (_o, kind, _d) in KAFKA.items() if kind == LIST)
_BY_OURS = {ours: name for name, (ours, _t, _d) in KAFKA.items()}
BY_NAME = tuple((name, ours, kind, default) for name, (ours, kind, default) in sorted(KAFKA.items()))


def kafka_name(ours: str) -> "str | None":
    """Kafka's name of our setting ``ours`` (None: it has none, e.g. ``flush``)."""
    return _BY_OURS.get(ours)


def to_ours(name: str, value: "str | None") -> "tuple[str, object]":
    """``(our name, our value)`` of one Kafka topic config; INVALID_CONFIG
    naming ``name`` for a name that is not Kafka's or a value not of its
    type or outside its range (``limits.check_topic_configs``). A None
    value stays None (a delete, or Kafka's "no value")."""
    row = KAFKA.get(name)
    if row is None:
        raise InvalidConfigError(f"unknown topic config {name[:80]!r}")
    if value is None:
        return row[0], None
    ours, got = _parsed(name, row, value)
    try:
        check_topic_configs({ours: got})
    except LogbrokerError as exc:
        raise InvalidConfigError(f"{name}: {exc.message}") from None
    return ours, got


def _parsed(name: str, row: tuple, value: str) -> tuple:
    ours, kind, _default = row
    text = value.strip()
    if kind in (INT, LONG):
        try:
            return ours, int(text)
        except ValueError:
            raise InvalidConfigError(f"{name} must be an integer, got {value[:40]!r}") from None
    if kind == BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise InvalidConfigError(f"{name} must be true or false, got {value[:40]!r}")
        return ours, text.lower()
    if kind == DOUBLE:  # the one double: min.cleanable.dirty.ratio, a whole percent of ours
        try:
            ratio = float(text)
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:  # NaN fails too
            raise InvalidConfigError(f"{name} must be a number in 0..1, got {value[:40]!r}")
        return ours, round(ratio * 100)
    if kind == LIST:
        return ours, ",".join(item.strip() for item in text.split(",")) if text else ""
    return ours, value


def to_kafka(configs: dict) -> list:
    """A topic's settings (our names, as DescribeTopics answers them) as
    Kafka's ``(name, value string, config type)``, sorted by name; settings
    without a Kafka name (``flush``) and topic facts (partitions,
    replication factor) left out."""
    out = []
    for ours, value in configs.items():
        name = _BY_OURS.get(ours)
        if name is None:
            continue
        out.append((name, value_text(ours, value), KAFKA[name][1]))
    out.sort()
    return out


def value_text(ours: str, value: object) -> str:
    """Our stored value of setting ``ours`` as Kafka's string."""
    if ours == "min_cleanable_dirty_percent":
        return repr(value / 100)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def defaults_missing(configs: dict) -> list:
    """Kafka's ``(name, default, type)`` of the topic configs ``configs``
    (our names) has no value for: what Kafka shows as DEFAULT_CONFIG."""
    return [(name, default, kind) for name, ours, default, kind in _DEFAULTS
            if ours not in configs]


_DEFAULTS = sorted((name, ours, default, kind) for name, (ours, kind, default) in KAFKA.items()
                   if default is not None)
