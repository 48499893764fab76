"""Planning a Spark read of a data dir: options, partitions, offset ranges.

Pure Python over the segment files and a read-only LMDB handle: no pyspark,
no broker, nothing written. Everything a Spark task needs is fixed here, at
planning time (the high watermark, the offset range, an index hint for where
to start), so a query is repeatable while a broker appends.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
import re
from dataclasses import dataclass, field

from ..errors import LogbrokerError
from ..protocol.messages import EARLIEST, LATEST
from ..storage.checkpoints import load_checkpoint
from ..records.walker import first_at_or_after
from ..storage.index import PartitionIndex, iter_entries
from ..storage.locate import scan_start
from ..storage.metastore import FILENAME, MetaStore
from ..storage.segment import parse_segment_name
from ..storage.config import LogConfig
from ..storage.store import parse_partition_dir
from ..storage.topics import TopicStore

log = logging.getLogger(__name__)

DEFAULT_SPLIT_BYTES = 128 << 20
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 16 << 20


class SparkSourceError(LogbrokerError, ValueError):
    """A wrong option, path or topic, or (failOnDataLoss) a lost range."""


@dataclass(frozen=True)
class Split:
    """One Spark input partition: records [start, end) of topic-partition,
    with a hint (segment base, byte position) of the batch holding ``start``."""

    data_dir: str
    topic: str
    partition: int
    start: int
    end: int
    hint_segment: int = -1
    hint_position: int = 0
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    columns: tuple = ()  # output columns in order; () = the whole schema
    compacted: bool = False  # cleanup_policy has compact: offsets without a batch are gaps


@dataclass
class Options:
    data_dir: str
    subscribe: "list[str] | None" = None
    pattern: "re.Pattern | None" = None
    assign: "dict[str, list[int]] | None" = None
    starting: "str | dict" = "earliest"
    ending: "str | dict" = "latest"
    starting_ts: "int | None" = None
    ending_ts: "int | None" = None
    starting_by_ts: "dict | None" = None  # {topic: {partition: timestamp ms}}
    ending_by_ts: "dict | None" = None
    streaming: bool = False
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int = 0
    split_bytes: int = DEFAULT_SPLIT_BYTES
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    columns: tuple = ()
    extra: dict = field(default_factory=dict)


def _bool(opts: dict, name: str, default: bool) -> bool:
    raw = str(opts.get(name.lower(), default)).strip().lower()
    if raw not in ("true", "false"):
        raise SparkSourceError(f"option {name} must be true or false, got {raw!r}")
    return raw == "true"


def _int(opts: dict, name: str, default: "int | None", minimum: int = 0) -> "int | None":
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SparkSourceError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SparkSourceError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _offsets(opts: dict, name: str, default: str) -> "str | dict":
    raw = str(opts.get(name.lower(), default)).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    try:
        spec = json.loads(raw)
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in spec.items()}
    except (ValueError, AttributeError, TypeError):
        raise SparkSourceError(f"option {name} must be earliest, latest or JSON like "
                               f'{{"topic":{{"0":23,"1":-2}}}}, got {raw!r}') from None


def _by_timestamp(opts: dict, name: str) -> "dict | None":
    """``{"topic": {"0": ts_ms}}`` -> ``{topic: {0: ts}}`` (Kafka's
    ``startingOffsetsByTimestamp`` shape)."""
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        spec = json.loads(str(raw))
        out = {str(t): {int(p): int(ts) for p, ts in parts.items()} for t, parts in spec.items()}
    except (ValueError, AttributeError, TypeError):
        out = None
    if not out or any(ts < 0 for parts in out.values() for ts in parts.values()):
        raise SparkSourceError(f'option {name} must be JSON like {{"orders":{{"0":1700000000000}}}} '
                               f"(ms since the epoch, >= 0), got {raw!r}")
    return out


def parse_options(raw: dict, streaming: bool = False) -> Options:
    """Spark's options (case-insensitive keys) as ``Options``; clear errors.
    ``streaming``: for ``readStream`` — ``startingOffsets`` defaults to
    latest (as Spark's Kafka source) and ending options are refused."""
    opts = {str(k).lower(): v for k, v in raw.items()}
    path = opts.get("path")
    if not path:
        raise SparkSourceError('option "path" (the broker data dir) is required')
    if not os.path.isdir(path):
        raise SparkSourceError(f"data dir {path!r} does not exist or is not a directory")
    if not os.path.exists(os.path.join(path, FILENAME)):
        raise SparkSourceError(f"{path!r} is not a logbroker data dir (no {FILENAME})")
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise SparkSourceError("exactly one of the options subscribe, subscribePattern, assign "
                               f"is required, got {len(chosen)}")
    o = Options(data_dir=os.path.abspath(path))
    if "subscribe" in chosen:
        o.subscribe = [t.strip() for t in str(opts["subscribe"]).split(",") if t.strip()]
    elif "subscribepattern" in chosen:
        try:
            o.pattern = re.compile(str(opts["subscribepattern"]))
        except re.error as exc:
            raise SparkSourceError(f"subscribePattern is not a valid regex: {exc}") from None
    else:
        try:
            spec = json.loads(opts["assign"])
            o.assign = {str(t): [int(p) for p in parts] for t, parts in spec.items()}
        except (ValueError, AttributeError, TypeError):
            raise SparkSourceError('option assign must be JSON like {"orders":[0,1]}, '
                                   f"got {opts['assign']!r}") from None
    o.streaming = streaming
    o.starting = _offsets(opts, "startingOffsets", "latest" if streaming else "earliest")
    o.starting_ts = _int(opts, "startingTimestamp", None)
    o.starting_by_ts = _by_timestamp(opts, "startingOffsetsByTimestamp")
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise SparkSourceError(f"option {name} is for batch queries; a stream has no end")
    else:
        o.ending = _offsets(opts, "endingOffsets", "latest")
        o.ending_ts = _int(opts, "endingTimestamp", None)
        o.ending_by_ts = _by_timestamp(opts, "endingOffsetsByTimestamp")
    if not streaming and (o.starting == "latest" or
                          (isinstance(o.ending, str) and o.ending == "earliest")):
        raise SparkSourceError("a batch query needs startingOffsets != latest and "
                               "endingOffsets != earliest")
    o.fail_on_data_loss = _bool(opts, "failOnDataLoss", True)
    o.include_headers = _bool(opts, "includeHeaders", False)
    o.min_partitions = _int(opts, "minPartitions", 0)
    o.split_bytes = _int(opts, "splitBytes", DEFAULT_SPLIT_BYTES, minimum=1)
    o.max_rows = _int(opts, "maxRecordsPerBatch", DEFAULT_MAX_ROWS, minimum=1)
    o.max_bytes = _int(opts, "maxBytesPerBatch", DEFAULT_MAX_BYTES, minimum=1)
    return o


def list_partitions(data_dir: str) -> dict[str, list[int]]:
    """Topic -> sorted partitions, from the partition directories."""
    out: dict[str, list[int]] = {}
    for name in os.listdir(data_dir):
        parsed = parse_partition_dir(name)
        if parsed and os.path.isdir(os.path.join(data_dir, name)):
            out.setdefault(parsed[0], []).append(parsed[1])
    return {t: sorted(ps) for t, ps in sorted(out.items())}


def list_segments(directory: str) -> list[tuple[int, str]]:
    """``(base offset, path)`` of the live ``.log`` segments, ascending."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    segs = [(parse_segment_name(n), os.path.join(directory, n)) for n in names]
    return sorted((b, p) for b, p in segs if b is not None)


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


class Planner:
    """Resolves offsets and splits for one query; holds LMDB open read-only."""

    def __init__(self, o: Options) -> None:
        self.o = o
        self.meta = MetaStore(os.path.join(o.data_dir, FILENAME), readonly=True)
        self._points: dict[tuple[str, int], list[tuple[int, int, int]]] = {}  # index hints

    def close(self) -> None:
        self.meta.close()

    def plan(self) -> list[Split]:
        o = self.o
        splits: list[Split] = []
        for topic, partition in select(o, list_partitions(o.data_dir)):
            splits.extend(self.plan_partition(topic, partition))
        return self._min_partitions(splits)

    def bounds(self, topic: str, partition: int) -> tuple[int, int, int]:
        """``(pid, log start, high watermark)`` from the checkpoint (0s if none)."""
        pid = self.meta.partition_id(f"{topic}-{partition}", create=False) \
            if self.meta.has("parts") else None
        has = pid is not None and self.meta.has("ckpt")
        ckpt = load_checkpoint(self.meta, pid) if has else None
        if ckpt is None:
            return -1 if pid is None else pid, 0, 0
        return pid, ckpt.log_start_offset, ckpt.high_watermark

    def plan_partition(self, topic: str, partition: int) -> list[Split]:
        o = self.o
        bounds = self.bounds(topic, partition)
        start = self.resolve(topic, partition, o.starting, o.starting_ts, o.starting_by_ts,
                             EARLIEST, bounds)
        end = self.resolve(topic, partition, o.ending, o.ending_ts, o.ending_by_ts, LATEST, bounds)
        return self.plan_range(topic, partition, start, min(end, bounds[2]), bounds)

    def resolve(self, topic: str, partition: int, spec: "str | dict", ts: "int | None",
                by_ts: "dict | None", default: int, bounds: tuple[int, int, int]) -> int:
        """One side of a query's range as an offset: per-partition timestamps
        (``...ByTimestamp``) over one timestamp over the offsets option; a
        partition the option leaves out gets ``default`` (EARLIEST/LATEST)."""
        pid, lso, hw = bounds
        if by_ts is not None and partition in by_ts.get(topic, {}):
            ts = by_ts[topic][partition]
        if ts is not None:
            directory = os.path.join(self.o.data_dir, f"{topic}-{partition}")
            return self.offset_for_timestamp(directory, pid, lso, hw, ts)
        offset = _spec(spec, topic, partition, default)
        return lso if offset == EARLIEST else hw if offset == LATEST else offset

    def plan_range(self, topic: str, partition: int, start: int, end: int,
                   bounds: "tuple[int, int, int] | None" = None) -> list[Split]:
        """Splits of records [start, end) (``end`` at most the checkpointed
        high watermark); a start below the log start offset is data loss:
        an error, or (failOnDataLoss=false) a warning and the rest."""
        pid, lso, hw = bounds or self.bounds(topic, partition)
        if start < lso:
            lost = f"{topic}-{partition} offsets [{start}, {lso}) were deleted by retention"
            if self.o.fail_on_data_loss:
                raise SparkSourceError(f"{lost}; set failOnDataLoss=false to skip them")
            log.warning("%s; skipping them (failOnDataLoss=false)", lost)
            start = lso
        end = min(end, hw)
        if start >= end:
            return []
        directory = os.path.join(self.o.data_dir, f"{topic}-{partition}")
        return self._split(topic, partition, pid, directory, start, end)

    def _entries(self, pid: int) -> list[tuple[int, int, int]]:
        if pid < 0 or not self.meta.has("oidx"):
            return []
        return [e for e in iter_entries(self.meta, pid) if isinstance(e, tuple)]

    def _split(self, topic, partition, pid, directory, start, end) -> list[Split]:
        """Ranges of about ``split_bytes`` cut at sparse-index entries."""
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
        out = []
        for i, (off, _, seg, pos) in enumerate(cuts):
            lo = start if i == 0 else off
            hi = cuts[i + 1][0] if i + 1 < len(cuts) else end
            out.append(self._make(topic, partition, lo, hi, seg, pos))
        return out

    def _make(self, topic, partition, lo, hi, seg=-1, pos=0) -> Split:
        o = self.o
        return Split(o.data_dir, topic, partition, lo, hi, seg, pos, o.fail_on_data_loss,
                     o.include_headers, o.max_rows, o.max_bytes, o.columns, self._compacted(topic))

    def _compacted(self, topic: str) -> bool:
        """Whether the topic's stored settings say ``cleanup_policy`` compact."""
        if not self.meta.has("topics"):
            return False
        found = TopicStore(self.meta).get(topic)
        return found is not None and LogConfig().replace(**found.overrides).compacts

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
        """The index entry with the largest offset <= ``offset``, or (0, -1, 0)."""
        points = self._points.get((topic, partition), [])
        i = bisect.bisect_right(points, (offset, 1 << 64, 0))
        return points[i - 1] if i else (0, -1, 0)

    def offset_for_timestamp(self, directory: str, pid: int, lso: int, hw: int, ts: int) -> int:
        """First offset in [lso, hw) whose record timestamp >= ``ts``, else ``hw``
        (the search of ``Log.offset_for_timestamp``, read-only: the LMDB time
        index gives the start, the one walker finds the record)."""
        from .scan import iter_batches

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
