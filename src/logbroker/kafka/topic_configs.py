"""Kafka's topic config names and values, as ours (pure functions;
docs/kafka.md §4.9).

One table serves both directions: CreateTopics turns a Kafka client's
``configs`` into our settings (``to_ours``), DescribeConfigs turns a
topic's settings into Kafka's entries (``to_kafka``). Most names differ
only by '.' for '_' (``retention.ms`` is ``retention_ms``); the others are
named here: ``max.message.bytes`` is our ``max_batch_bytes``,
``min.cleanable.dirty.ratio`` (0.0-1.0) our ``min_cleanable_dirty_percent``
(0-100), ``unclean.leader.election.enable`` our
``unclean_leader_election``. A name not in the table passes with '.' for
'_' (so our own names, ``flush``, work from a Kafka client too) and is
checked by the broker as ours are (INVALID_CONFIG for an unknown one).

Two of Kafka's settings describe what we always do, so they are accepted
at their one value and refused otherwise (INVALID_CONFIG, naming it):
``compression.type`` ``producer`` (batches are stored as the producer
compressed them) and ``message.timestamp.type`` ``CreateTime``.
"""

from __future__ import annotations

from ..errors import InvalidConfigError

# Kafka's config types (DescribeConfigs v3)
BOOLEAN, STRING, INT, LONG, DOUBLE, LIST = 1, 2, 3, 5, 6, 7

# Kafka name -> (our name, Kafka config type)
RENAMED = {
    "max.message.bytes": ("max_batch_bytes", INT),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_percent", DOUBLE),
    "unclean.leader.election.enable": ("unclean_leader_election", BOOLEAN),
}
TYPES = {"cleanup.policy": LIST, "segment.bytes": INT, "index.interval.bytes": INT,
         "min.insync.replicas": INT, "flush": STRING}  # the others: LONG
FIXED = {"compression.type": "producer", "message.timestamp.type": "CreateTime"}
NOT_CONFIGS = frozenset({"partitions", "replication_factor"})  # topic facts, not settings
_OURS = {ours: kafka for kafka, (ours, _type) in RENAMED.items()}


def to_ours(name: str, value: "str | None") -> "tuple[str, object] | None":
    """``(our name, our value)`` for one Kafka topic config of CreateTopics;
    None for a fixed one at its value (nothing to store). Numbers and
    true/false are parsed as ours are stored; ``min.cleanable.dirty.ratio``
    becomes a whole percent."""
    if name in FIXED:
        if value != FIXED[name]:
            raise InvalidConfigError(f"{name} can only be {FIXED[name]!r} here, got {value!r}")
        return None
    ours = RENAMED[name][0] if name in RENAMED else name.replace(".", "_")
    if value is None:
        return ours, None
    if ours == "unclean_leader_election":
        return ours, value  # stored as the string "true" / "false"
    if ours == "min_cleanable_dirty_percent":
        try:
            ratio = float(value)
        except ValueError:
            raise InvalidConfigError(f"{name} must be a number in 0..1, got {value!r}") from None
        if not 0.0 <= ratio <= 1.0:
            raise InvalidConfigError(f"{name} must be a number in 0..1, got {value!r}")
        return ours, round(ratio * 100)
    if value in ("true", "false"):
        return ours, value == "true"
    try:
        return ours, int(value)
    except ValueError:
        return ours, value


def to_kafka(configs: dict) -> list:
    """A topic's settings (our names, as DescribeTopics answers them) as
    Kafka's ``(name, value string, config type)``, sorted by name, then the
    fixed ones; topic facts (partitions, replication factor) left out."""
    out = []
    for ours, value in configs.items():
        if ours in NOT_CONFIGS:
            continue
        name = _OURS.get(ours) or ours.replace("_", ".")
        if ours == "min_cleanable_dirty_percent":
            text = repr(value / 100)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        else:
            text = str(value)
        kind = RENAMED[name][1] if name in RENAMED else TYPES.get(name) or (
            BOOLEAN if isinstance(value, bool) else LONG if isinstance(value, int) else STRING)
        out.append((name, text, kind))
    out.sort()
    return out + [(name, value, STRING) for name, value in FIXED.items()]
