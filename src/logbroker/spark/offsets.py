"""Streaming offsets as Spark's Kafka source writes them, and its rate limits.

Pure functions, no pyspark, no I/O. An offset map is what a micro-batch
reads up to (exclusive) per partition, kept in Spark's checkpoint as
Kafka-shaped JSON: ``{"orders": {"0": 42, "1": 7}}`` (topic -> partition
as a string -> next offset). In Python it is ``{(topic, partition): offset}``.

- ``to_json`` / ``from_json``: the dict Spark journals (JSON-able: string
  keys, sorted) and back, with clear errors for a malformed one.
- ``rate_limit(start, latest, max_offsets)``: Kafka's ``maxOffsetsPerTrigger``
  rule — the limit is shared among partitions in proportion to what each
  has waiting (a share below 1 rounds up, above 1 down), never past latest.
- ``pending(start, latest)``: offsets waiting in all partitions together.
"""

from __future__ import annotations

from .options import SparkSourceError

TopicPartition = tuple[str, int]


def to_json(offsets: dict[TopicPartition, int]) -> dict:
    """``{(topic, p): offset}`` -> ``{"topic": {"p": offset}}`` (sorted)."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return out


def from_json(spec, what: str = "offsets") -> dict[TopicPartition, int]:
    """The inverse of ``to_json``; ``SparkSourceError`` naming ``what`` if
    ``spec`` is not such a map of non-negative offsets."""
    if not isinstance(spec, dict):
        raise SparkSourceError(f"{what} must be a JSON object like "
                               f'{{"orders": {{"0": 42}}}}, got {spec!r}')
    out: dict[TopicPartition, int] = {}
    for topic, parts in spec.items():
        if not isinstance(topic, str) or not isinstance(parts, dict):
            raise SparkSourceError(f"{what}: topic {topic!r} must map partitions to offsets")
        for partition, offset in parts.items():
            try:
                p, o = int(partition), int(offset)
            except (TypeError, ValueError):
                raise SparkSourceError(f"{what}: {topic}-{partition} has offset {offset!r}; "
                                       "partitions and offsets are integers") from None
            if p < 0 or o < 0 or isinstance(offset, bool):
                raise SparkSourceError(f"{what}: {topic}-{partition} offset {offset!r} "
                                       "is not a partition >= 0 with an offset >= 0")
            out[(topic, p)] = o
    return out


def pending(start: dict[TopicPartition, int], latest: dict[TopicPartition, int]) -> int:
    """Offsets between ``start`` (a partition missing there: none read yet,
    counted from 0) and ``latest``, over every partition of ``latest``."""
    return sum(max(0, end - start.get(tp, 0)) for tp, end in latest.items())


def rate_limit(start: dict[TopicPartition, int], latest: dict[TopicPartition, int],
               max_offsets: int) -> dict[TopicPartition, int]:
    """``latest`` capped so that about ``max_offsets`` offsets are read in all
    (Kafka's ``maxOffsetsPerTrigger``): each partition gets the share of the
    limit its waiting offsets are of the total; a partition with anything
    waiting advances by at least one; one with nothing waiting keeps
    ``latest``, even below its start (offsets gone back are reported by the
    micro-batch as without a limit). Partitions not in ``start`` begin at 0."""
    total = pending(start, latest)
    if total <= max_offsets:
        return dict(latest)
    out = {}
    for tp, end in latest.items():
        begin = start.get(tp, 0)
        size = max(0, end - begin)
        share = max_offsets * size / total
        step = -int(-share // 1) if share < 1 else int(share)  # ceil below 1, floor above
        out[tp] = min(end, begin + step) if size else end  # behind: as without a limit
    return out
