"""Planning a Spark read: partitions and offset ranges, cut into splits.

``PlannerBase`` holds what every plan does (resolve the options' start and
end per partition, the data-loss rule, ``minPartitions``); ``Planner``
plans over a data dir — pure Python over the segment files and a read-only
LMDB handle, no broker, nothing written — and remote.py's ``RemotePlanner``
over running brokers. Everything a Spark task needs is fixed here, at
planning time (the high watermark, the offset range, an index hint for
where to start), so a query is repeatable while a broker appends.
"""

from __future__ import annotations

import bisect
import os

from ..protocol.messages import EARLIEST, LATEST
from ..records.walker import first_at_or_after
from ..storage.checkpoints import load_checkpoint
from ..storage.config import LogConfig
from ..storage.index import PartitionIndex, iter_entries
from ..storage.locate import scan_start
from ..storage.metastore import FILENAME, MetaStore
from ..storage.store import parse_partition_dir
from ..storage.topics import TopicStore
from .scan import iter_batches, list_segments
from .txn_plan import stable_view
from .options import (DEFAULT_MAX_BYTES, DEFAULT_MAX_ROWS, DEFAULT_SPLIT_BYTES,  # noqa: F401
                      Options, SparkSourceError, Split, data_loss, parse_options)

def list_partitions(data_dir: str) -> dict[str, list[int]]:
    """Topic -> sorted partitions, from the partition directories."""
    out: dict[str, list[int]] = {}
    for name in os.listdir(data_dir):
        parsed = parse_partition_dir(name)
        if parsed and os.path.isdir(os.path.join(data_dir, name)):
            out.setdefault(parsed[0], []).append(parsed[1])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except FileNotFoundError:  # deleted by retention since listed
        return 0


def select(o: Options, available: dict[str, list[int]]) -> list[tuple[str, int]]:
    """The partitions the query reads. A batch query refuses unknown topics
    and partitions; a stream skips them (they may be created later)."""
    if o.subscribe is not None:
        missing = [t for t in o.subscribe if t not in available]
        if missing and o.streaming:
            return [(t, p) for t in o.subscribe for p in available.get(t, ())]
        if missing:
            raise SparkSourceError(f"unknown topic(s) {', '.join(missing)} in {o.data_dir} "
                                   f"(topics: {', '.join(available) or 'none'})")
        return [(t, p) for t in o.subscribe for p in available[t]]
    if o.pattern is not None:  # internal topics (__consumer_offsets) only by name, as Kafka
        return [(t, p) for t, ps in available.items()
                if o.pattern.fullmatch(t) and not t.startswith("__") for p in ps]
    out = []
    for t, ps in o.assign.items():
        for p in ps:
            if p not in available.get(t, ()):
                if o.streaming:
                    continue
                raise SparkSourceError(f"unknown partition {t}-{p} in {o.data_dir}")
            out.append((t, p))
    return out


def _spec(spec: "str | dict", topic: str, partition: int, default: int) -> int:
    if isinstance(spec, str):
        return EARLIEST if spec == "earliest" else LATEST
    return spec.get(topic, {}).get(partition, default)


class PlannerBase:
    """What every plan does; subclasses say where partitions, bounds,
    timestamps and splits come from (``available``, ``bounds``,
    ``timestamp_offset``, ``_split``, ``close``)."""

    def __init__(self, o: Options) -> None:
        self.o = o
        self.narrow = None  # a narrow.Narrow: only the ranges Spark's pushed filters admit

    def close(self) -> None:
        pass

    def available(self) -> dict[str, list[int]]:
        """Topic -> sorted partitions there are."""
        raise NotImplementedError

    def bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(pid, log start, high watermark)``; pid is -1 when unknown."""
        raise NotImplementedError

    def timestamp_offset(self, topic: str, partition: int, bounds: tuple[int, int, int],
                         ts: int) -> int:
        """First offset in [log start, hw) whose record timestamp >= ``ts``, else hw."""
        raise NotImplementedError

    def _split(self, topic: str, partition: int, pid: int, start: int, end: int) -> list[Split]:
        raise NotImplementedError

    def prefetch(self, tps: list) -> None:
        """A hint: ``bounds`` of these partitions come next (fetch them at once)."""

    def forget(self) -> None:
        """Drop what was cached (bounds): the next calls look again."""

    def selected(self) -> dict:
        """``{(topic, p): bounds}`` of the partitions the options select now."""
        tps = select(self.o, self.available())
        if self.narrow is not None:
            tps = [tp for tp in tps if self.narrow.admits(*tp)]
        self.prefetch(tps)
        return {tp: self.bounds(*tp) for tp in tps}

    def plan(self) -> list[Split]:
        splits: list[Split] = []
        for (topic, partition), bounds in self.selected().items():
            splits.extend(self.plan_partition(topic, partition, bounds))
        return self._min_partitions(splits)

    def plan_partition(self, topic: str, partition: int,
                       bounds: "tuple[int, int, int] | None" = None) -> list[Split]:
        o = self.o
        bounds = bounds or self.bounds(topic, partition)
        start = self.resolve(topic, partition, o.starting, o.starting_ts, o.starting_by_ts,
                             EARLIEST, bounds)
        end = self.resolve(topic, partition, o.ending, o.ending_ts, o.ending_by_ts, LATEST, bounds)
        return self.plan_range(topic, partition, start, min(end, bounds[2]), bounds)

    def resolve(self, topic: str, partition: int, spec: "str | dict", ts: "int | None",
                by_ts: "dict | None", default: int, bounds: tuple[int, int, int]) -> int:
        """One side of a query's range as an offset: per-partition timestamps
        (``...ByTimestamp``) over one timestamp over the offsets option; a
        partition the option leaves out gets ``default`` (EARLIEST/LATEST)."""
        _, lso, hw = bounds
        if by_ts is not None and partition in by_ts.get(topic, {}):
            ts = by_ts[topic][partition]
        if ts is not None:
            return self.timestamp_offset(topic, partition, bounds, ts)
        offset = _spec(spec, topic, partition, default)
        return lso if offset == EARLIEST else hw if offset == LATEST else offset

    def plan_range(self, topic: str, partition: int, start: int, end: int,
                   bounds: "tuple[int, int, int] | None" = None) -> list[Split]:
        """Splits of records [start, end) (``end`` at most the high watermark
        of ``bounds``); a start below the log start offset is data loss: an
        error, or (failOnDataLoss=false) a warning and the rest."""
        pid, lso, hw = bounds or self.bounds(topic, partition)
        if start < lso:
            data_loss(self.o.fail_on_data_loss,
                      f"{topic}-{partition} offsets [{start}, {lso}) were deleted by retention")
            start = lso
        end = min(end, hw)
        if start >= end:
            return []
        if self.narrow is None:
            return self._split(topic, partition, pid, start, end)
        bounds = (pid, lso, hw)
        spans = self.narrow.ranges(topic, partition, start, end,
                                   lambda ms: self.timestamp_offset(topic, partition, bounds, ms))
        return [s for lo, hi in spans for s in self._split(topic, partition, pid, lo, hi)]

    def _make(self, topic, partition, lo, hi, seg=-1, pos=0, compacted=False) -> Split:
        o = self.o
        aborted = self.aborted(topic, partition, lo, hi) if o.read_committed else ()
        return Split(o.data_dir, topic, partition, lo, hi, seg, pos, o.fail_on_data_loss,
                     o.include_headers, o.max_rows, o.max_bytes, o.columns, compacted, o.bootstrap,
                     o.client, aborted=aborted, read_committed=o.read_committed)

    def aborted(self, topic: str, partition: int, start: int, end: int) -> tuple:
        """read_committed: (producer id, first offset) of the aborted
        transactions with records in [start, end), known at planning time
        (a bootstrap read learns them from its Fetch answers instead: ())."""
        return ()

    def _min_partitions(self, splits: list[Split]) -> list[Split]:
        """Cut the widest ranges in halves (by offsets) until there are enough."""
        want = self.o.min_partitions
        while splits and len(splits) < want:
            widest = max(splits, key=lambda s: s.end - s.start)
            if widest.end - widest.start < 2:
                break
            mid = (widest.start + widest.end) // 2
            i = splits.index(widest)
            _, seg, pos = self._hint(widest.topic, widest.partition, mid)
            splits[i:i + 1] = [Split(**{**widest.__dict__, "end": mid}),
                               Split(**{**widest.__dict__, "start": mid, "hint_segment": seg,
                                        "hint_position": pos})]
        return splits

    def _hint(self, topic: str, partition: int, offset: int) -> tuple[int, int, int]:
        """Where to start reading ``offset``: (offset, segment, position); (0, -1, 0) = unknown."""
        return 0, -1, 0


class Planner(PlannerBase):
    """Plans over a data dir; holds its LMDB open read-only until ``close()``."""

    def __init__(self, o: Options) -> None:
        super().__init__(o)
        self.meta = MetaStore(os.path.join(o.data_dir, FILENAME), readonly=True)
        self._points: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # index hints
        self._stable: dict = {}  # read_committed: (topic, p) -> (pid, txn_plan.StableView)

    def close(self) -> None:
        self.meta.close()

    def available(self) -> dict[str, list[int]]:
        return list_partitions(self.o.data_dir)

    def bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(pid, log start, high watermark)`` from the checkpoint (0s if
        none); read_committed: the last stable offset there instead of the
        high watermark (spark/txn_plan.py)."""
        pid = self.meta.partition_id(f"{topic}-{partition}", create=False) \
            if self.meta.has("parts") else None
        has = pid is not None and self.meta.has("ckpt")
        ckpt = load_checkpoint(self.meta, pid) if has else None
        if ckpt is None:
            return -1 if pid is None else pid, 0, 0
        end = ckpt.high_watermark
        if self.o.read_committed:
            view = stable_view(self.meta, pid, os.path.join(self.o.data_dir, f"{topic}-{partition}"),
                               end)
            self._stable[(topic, partition)] = (pid, view)
            end = view.last_stable_offset
        return pid, ckpt.log_start_offset, end

    def aborted(self, topic: str, partition: int, start: int, end: int) -> tuple:
        found = self._stable.get((topic, partition))
        return () if found is None else found[1].search(self.meta, found[0], start, end)

    def _entries(self, pid: int) -> list[tuple[int, int, int]]:
        if pid < 0 or not self.meta.has("oidx"):
            return []
        return [e for e in iter_entries(self.meta, pid) if isinstance(e, tuple)]

    def _split(self, topic, partition, pid, start, end) -> list[Split]:
        """Ranges of about ``split_bytes`` cut at sparse-index entries."""
        directory = os.path.join(self.o.data_dir, f"{topic}-{partition}")
        sizes = {b: _size(p) for b, p in list_segments(directory)}
        before, total = {}, 0
        for base in sorted(sizes):
            before[base], total = total, total + sizes[base]
        points = [(off, before[seg] + pos, seg, pos) for off, seg, pos in self._entries(pid)
                  if seg in before]
        self._points[(topic, partition)] = [(off, seg, pos) for off, _, seg, pos in points]
        first = max((p for p in points if p[0] <= start), default=None, key=lambda p: p[0])
        cuts = [first or (start, 0, -1, 0)]
        for p in points:
            if start < p[0] < end and p[1] - cuts[-1][1] >= self.o.split_bytes:
                cuts.append(p)
        compacted = self._compacted(topic)
        out = []
        for i, (off, _, seg, pos) in enumerate(cuts):
            lo = start if i == 0 else off
            hi = cuts[i + 1][0] if i + 1 < len(cuts) else end
            out.append(self._make(topic, partition, lo, hi, seg, pos, compacted))
        return out

    def _compacted(self, topic: str) -> bool:
        """Whether the topic's stored settings say ``cleanup_policy`` compact."""
        if not self.meta.has("topics"):
            return False
        found = TopicStore(self.meta).get(topic)
        return found is not None and LogConfig().replace(**found.overrides).compacts

    def _hint(self, topic: str, partition: int, offset: int) -> tuple[int, int, int]:
        """The index entry with the largest offset <= ``offset``, or (0, -1, 0)."""
        points = self._points.get((topic, partition), [])
        i = bisect.bisect_right(points, (offset, 1 << 64, 0))
        return points[i - 1] if i else (0, -1, 0)

    def timestamp_offset(self, topic: str, partition: int, bounds: tuple[int, int, int],
                         ts: int) -> int:
        """The search of ``Log.offset_for_timestamp``, read-only: the LMDB time
        index gives the start, the one walker finds the record."""
        pid, lso, hw = bounds
        directory = os.path.join(self.o.data_dir, f"{topic}-{partition}")
        index = PartitionIndex(self.meta, pid) if pid >= 0 and self.meta.has("tidx") else None
        start = lso if index is None else scan_start(index, ts, lso)
        if start >= hw:
            return hw
        hint = PartitionIndex(self.meta, pid).lookup(start) if pid >= 0 and self.meta.has("oidx") \
            else None
        split = Split(self.o.data_dir, "", 0, start, hw, *(hint[1:] if hint else (-1, 0)),
                      fail_on_data_loss=self.o.fail_on_data_loss)
        batches = ((h, b.timestamps) for h, b in iter_batches(split, directory,
                                                             want=lambda h: h.max_timestamp >= ts))
        hit = first_at_or_after(batches, ts, start, hw)
        return hw if hit is None else hit[0]
