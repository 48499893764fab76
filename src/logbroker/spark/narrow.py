"""Spark's pushed-down filters as offset ranges: what a query can skip.

The JVM connector hands its predicates over as a small tree (JSON):

    {"and": [tree, ...]}   {"or": [tree, ...]}
    {"col": "topic" | "partition" | "offset" | "timestamp",
     "op": "=" | "<" | "<=" | ">" | ">=" | "in", "value": v | "values": [v, ...]}

(``timestamp`` values in microseconds since 1970, as Spark holds them).
``narrowing(tree)`` turns it into ``Narrow``: a union of boxes (topics,
partition interval, offset interval, a lower timestamp bound), so the
planner reads only the offsets some box admits. The result is a superset of
the rows the predicates keep (Spark still applies every predicate after the
scan), never a subset: a leaf it does not know, or a tree whose boxes would
pass ``MAX_BOXES``, narrows nothing. A timestamp bound becomes the first
offset whose record timestamp reaches it (``Planner.timestamp_offset``):
every record before that offset is older.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

MAX_BOXES = 256
_TOP = (1 << 63) - 1


@dataclass(frozen=True)
class Box:
    """Rows with topic in ``topics`` (None: any), partition in
    [``part_lo``, ``part_hi``], offset in [``lo``, ``hi``) and a timestamp
    (ms) of at least ``ts_lo`` (None: any)."""

    topics: "frozenset | None" = None
    part_lo: int = 0
    part_hi: int = _TOP
    lo: int = 0
    hi: int = _TOP
    ts_lo: "int | None" = None

    def empty(self) -> bool:
        return (self.topics is not None and not self.topics) or self.part_lo > self.part_hi \
            or self.lo >= self.hi

    def meet(self, other: "Box") -> "Box":
        topics = self.topics if other.topics is None else \
            other.topics if self.topics is None else self.topics & other.topics
        ts = [t for t in (self.ts_lo, other.ts_lo) if t is not None]
        return Box(topics, max(self.part_lo, other.part_lo), min(self.part_hi, other.part_hi),
                   max(self.lo, other.lo), min(self.hi, other.hi), max(ts) if ts else None)

    def admits(self, topic: str, partition: int) -> bool:
        return (self.topics is None or topic in self.topics) and \
            self.part_lo <= partition <= self.part_hi


ANY = Box()


@dataclass(frozen=True)
class Narrow:
    """A union of boxes: the only rows a query needs."""

    boxes: tuple

    def admits(self, topic: str, partition: int) -> bool:
        return any(b.admits(topic, partition) for b in self.boxes)

    def ranges(self, topic: str, partition: int, start: int, end: int,
               ts_offset: Callable[[int], int]) -> list[tuple[int, int]]:
        """The disjoint, ascending offset ranges within [start, end) of
        ``topic``-``partition`` some box admits; ``ts_offset(ms)`` gives the
        first offset whose record timestamp is >= ms (looked up once per
        bound)."""
        found: dict[int, int] = {}
        spans = []
        for b in self.boxes:
            if not b.admits(topic, partition):
                continue
            lo, hi = max(start, b.lo), min(end, b.hi)
            if b.ts_lo is not None and lo < hi:
                if b.ts_lo not in found:
                    found[b.ts_lo] = ts_offset(b.ts_lo)
                lo = max(lo, found[b.ts_lo])
            if lo < hi:
                spans.append((lo, hi))
        merged: list[tuple[int, int]] = []
        for lo, hi in sorted(spans):
            if merged and lo <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
            else:
                merged.append((lo, hi))
        return merged


def narrowing(tree: "dict | None") -> "Narrow | None":
    """``tree`` as a ``Narrow`` (None: no tree, or nothing it can narrow)."""
    if not tree:
        return None
    boxes = _boxes(tree)
    if boxes == [ANY]:
        return None
    return Narrow(tuple(boxes))


def _boxes(tree) -> list[Box]:
    if not isinstance(tree, dict):
        return [ANY]
    if "and" in tree:
        out = [ANY]
        for sub in tree["and"] or ():
            out = [a.meet(b) for a in out for b in _boxes(sub)]
            out = [b for b in out if not b.empty()]
            if len(out) > MAX_BOXES:
                return [ANY]
        return out
    if "or" in tree:
        out = []
        for sub in tree["or"] or ():
            got = _boxes(sub)
            if ANY in got:
                return [ANY]
            out.extend(got)
            if len(out) > MAX_BOXES:
                return [ANY]
        return out
    return _leaf(tree.get("col"), tree.get("op"), tree.get("value"), tree.get("values"))


def _leaf(col, op, value, values) -> list[Box]:
    """The boxes of one comparison (ANY when it is not one we narrow by)."""
    if op == "in":
        if not isinstance(values, list) or len(values) > MAX_BOXES:
            return [ANY]
        out = [b for v in values for b in _leaf(col, "=", v, None)]
        return [ANY] if ANY in out else [b for b in out if not b.empty()]
    if col == "topic" and op == "=" and isinstance(value, str):
        return [Box(topics=frozenset([value]))]
    if not isinstance(value, int) or isinstance(value, bool) or op not in ("=", "<", "<=", ">", ">="):
        return [ANY]
    if col == "timestamp":  # microseconds; only a lower bound narrows (CreateTime is not ordered)
        if op in (">", ">=", "="):
            ms = value // 1000 + 1 if op == ">" else -(-value // 1000)
            return [Box(ts_lo=max(0, ms))]
        return [ANY]
    lo, hi = {"=": (value, value + 1), "<": (0, value), "<=": (0, value + 1),
              ">": (value + 1, _TOP), ">=": (value, _TOP)}[op]
    lo, hi = max(0, lo), min(_TOP, hi)
    if col == "offset":
        return [replace(ANY, lo=lo, hi=hi)]
    if col == "partition":
        return [replace(ANY, part_lo=lo, part_hi=hi - 1)]
    return [ANY]
