"""Loading a partition log from disk (Kafka's LogLoader): files -> a value.

``load_log`` reads the segment files and the partition's LMDB rows and
returns a frozen ``LoadedLog`` that the Log is built from; it never touches
a Log.

Clean (the store's marker was present and the checkpoint matches the files):
nothing is read but file sizes; reopen time does not grow with data size.

Unclean: every batch from the recovery point on is checked (length, magic,
CRC, contiguous offsets); the first invalid one and everything after it
(later segments included) is truncated; the index past the recovery point is
rebuilt from the scan. Damage below the recovery point (a flushed segment
shorter or longer than recorded, a recovery point beyond the end of its
file, a segment missing between two others) is never truncated: the log
loads offline with an error naming the file, byte position and offset.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from ..errors import CorruptRecordError
from . import checkpoints as ck
from .config import LogConfig
from .epochs import LeaderEpochs
from .files import FileCache
from .index import PartitionIndex
from .locate import rebuild_index
from .metastore import MetaStore
from .segment import DELETED_SUFFIX, Segment, parse_segment_name, segment_name
from .segments import RecoveryPoint, Segments
from .cleaner_state import rewind_clean_point
from .swap import recover_swaps
from .txn_store import Transactions
from . import txn_store

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedLog:
    """What a Log is built from. ``offline`` is the reason the partition must
    serve nothing, or None."""

    name: str
    pid: int
    segments: Segments
    index: PartitionIndex
    epochs: LeaderEpochs
    offline: "str | None" = None
    scanned_bytes: int = field(default=0)
    txns: "Transactions | None" = None  # None: none loaded (offline), an empty one is made
    # opened clean, nothing rebuilt: its stored checkpoint says what a new one would
    # (Store.open writes no first checkpoint for it: 50,000 partitions restart sooner)
    unchanged: bool = False


class _Offline(Exception):
    pass


_START = RecoveryPoint(0, 0, 0)  # every new log's (frozen: shared)


def fresh_log(directory: str, topic: str, partition: int, pid: int, *, config: LogConfig,
              meta: MetaStore, files: FileCache) -> LoadedLog:
    """A brand-new empty log whose ``directory`` does not exist yet: the
    directory and an empty first segment are created, nothing is read and
    no descriptor is kept (the segment opens at its first append or read).
    Neither is fsynced: the caller's LMDB rows record the partition, and the
    store creates the directory again at its next open if a power cut lost
    it (Store.open). ``pid`` must be newly allocated (no rows of its own)."""
    os.mkdir(directory)
    seg = Segment.create(directory, 0, files, sync=False)
    segs = Segments(directory, files, [seg], log_start=0, log_end=0,
                    recovery_point=_START, high_watermark=0)
    index = PartitionIndex(meta, pid, config.index_interval_bytes)
    index.max_seen = -1  # what recovery of an empty log sets
    index.restart_cadence()
    txns = Transactions(meta, pid)
    txns.aborted.stored = False  # a new pid has no rows
    return LoadedLog(f"{topic}-{partition}", pid, segs, index, LeaderEpochs(), txns=txns)


def load_log(directory: str, topic: str, partition: int, *, config: LogConfig, meta: MetaStore,
             files: FileCache, clean: bool, auto_hw: bool = True) -> LoadedLog:
    """Load (creating if needed) the log in ``directory``; never raises for
    damaged data: a damaged log loads with ``offline`` set."""
    return _Loader(directory, f"{topic}-{partition}", config, meta, files, auto_hw).load(clean)


class _Loader:
    def __init__(self, directory: str, name: str, config: LogConfig, meta: MetaStore,
                 files: FileCache, auto_hw: bool) -> None:
        self.directory, self.name, self.config, self.files = directory, name, config, files
        self.auto_hw, self.meta = auto_hw, meta
        self.pid = meta.partition_id(name)
        self.ckpt = ck.load_checkpoint(meta, self.pid)
        self.infos = ck.load_segment_infos(meta, self.pid)
        self.index = PartitionIndex(meta, self.pid, config.index_interval_bytes)
        self.epochs = LeaderEpochs(ck.load_epochs(meta, self.pid))
        self.new_infos: dict[int, ck.SegmentInfo] = {}
        self.deleted: set[int] = set()  # bases of segments found renamed .deleted
        self.segments = self._list_segments()
        first = self.segments[0].base_offset
        self.log_start = max(self.ckpt.log_start_offset, first) if self.ckpt else first
        c = self.ckpt
        self.rp = RecoveryPoint(c.recovery_point, c.rp_segment, c.rp_position) if c \
            else RecoveryPoint(self.log_start, self.log_start, 0)
        self.scanned = 0
        self.unchanged = False  # _open_clean with a complete index

    def _list_segments(self) -> list[Segment]:
        try:
            entries = os.listdir(self.directory)
        except FileNotFoundError:  # lost (storage/creation.py): made again
            os.makedirs(self.directory, exist_ok=True)
            entries = []
        self.swapped = recover_swaps(self.directory, entries)  # an interrupted compaction swap
        for start, end in self.swapped:  # the summaries of its range are void
            self.infos = {b: i for b, i in self.infos.items() if not start <= b < end}
        if self.swapped:
            entries = os.listdir(self.directory)
        bases = []
        for entry in entries:
            if entry.endswith(DELETED_SUFFIX):
                os.unlink(os.path.join(self.directory, entry))
                if (gone := parse_segment_name(entry[:-len(DELETED_SUFFIX)])) is not None:
                    self.deleted.add(gone)
            elif (base := parse_segment_name(entry)) is not None:
                bases.append(base)
        if not bases:
            bases = [self.ckpt.log_start_offset if self.ckpt else 0]
            Segment.create(self.directory, bases[0], self.files)
        return [Segment(self.directory, b, self.files,
                        size=os.stat(os.path.join(self.directory, segment_name(b))).st_size)
                for b in sorted(bases)]

    def load(self, clean: bool) -> LoadedLog:
        try:
            self._check_no_gap()
            if clean and not self.swapped and self._matches():
                end, hw = self._open_clean()
            else:
                end, hw = self._recover()
            rewind_clean_point(self.meta, self.pid, end)
            txns = self._transactions(end)
        except _Offline as why:  # the offsets shown are the last ones known durable
            c = self.ckpt
            end = self.log_start if c is None else max(self.log_start, c.recovery_point)
            return self._value(end, c.high_watermark if c else 0, offline=f"{self.name}: {why}")
        return self._value(end, hw, txns=txns)

    def _transactions(self, end: int) -> Transactions:
        """The transaction state and aborted index (txn_store.load): the
        newest snapshot at or below ``end`` and the batches after it."""
        try:
            return txn_store.load(self.meta, self.pid, self.segments, self.log_start, end,
                                  self.index)
        except CorruptRecordError as exc:
            raise _Offline(f"transaction state rebuild: {exc.message}") from None

    def _value(self, end: int, hw: int, offline: "str | None" = None,
               txns: "Transactions | None" = None) -> LoadedLog:
        segs = Segments(self.directory, self.files, self.segments, log_start=self.log_start,
                        log_end=end, recovery_point=self.rp, high_watermark=hw,
                        new_infos=self.new_infos)
        unchanged = self.unchanged and offline is None and not self.new_infos \
            and not self.epochs.dirty
        return LoadedLog(self.name, self.pid, segs, self.index, self.epochs, offline, self.scanned,
                         txns if txns is not None else Transactions(self.meta, self.pid),
                         unchanged)

    def _check_no_gap(self) -> None:
        """A sealed segment whose recorded end is not the next file's base
        means a segment file between them is missing."""
        for seg, nxt in zip(self.segments, self.segments[1:]):
            info = self.infos.get(seg.base_offset)
            if info is not None and info.next_offset != nxt.base_offset:
                raise _Offline(f"segment file(s) missing between {seg.path} (ends at offset "
                               f"{info.next_offset}) and {nxt.path} (starts at offset "
                               f"{nxt.base_offset}): offsets [{info.next_offset}, "
                               f"{nxt.base_offset}) are lost")

    # -- clean ------------------------------------------------------------------------
    def _matches(self) -> bool:
        c, segs = self.ckpt, self.segments
        if c is None or not c.clean or c.active_segment != segs[-1].base_offset:
            return False
        if segs[-1].size != c.active_size:
            return False
        return all(s.base_offset in self.infos and self.infos[s.base_offset].size == s.size
                   for s in segs[:-1])

    def _open_clean(self) -> tuple[int, int]:
        c = self.ckpt
        for seg in self.segments[:-1]:
            seg.max_timestamp = self.infos[seg.base_offset].max_timestamp
        active = self.segments[-1]
        active.max_timestamp, active.created_ms = c.active_max_ts, c.active_created_ms
        self.index.load_last_time()
        self.index.max_seen = self.index.last_time
        if not self._index_complete():
            log.warning("%s: offset index incomplete; rebuilding it from segments", self.name)
            self._rebuild_index()
        else:
            self.unchanged = True
        self.index.restart_cadence()
        return c.log_end_offset, min(c.high_watermark, c.log_end_offset)

    def _index_complete(self) -> bool:
        """Every segment holding data has an index entry (its first batch's:
        at its base offset, or past it when compaction left a gap there)."""
        ends = [s.base_offset for s in self.segments[1:]] + [1 << 63]
        return all(self.index.has(s.base_offset) or _entry_in(self.index, s.base_offset, end)
                   for s, end in zip(self.segments, ends) if s.size)

    def _rebuild_index(self) -> None:
        try:
            rebuild_index(self.index, self.segments)
        except CorruptRecordError as exc:
            raise _Offline(f"index rebuild: {exc.message}") from None

    # -- unclean ----------------------------------------------------------------------
    def _recover(self) -> tuple[int, int]:
        first = self._check_below_recovery_point()
        rp, has_ckpt = self.rp, self.ckpt is not None
        self.index.truncate(rp.offset if has_ckpt else 0)
        self.index.load_last_time()
        self.index.max_seen = self.index.last_time
        expected = rp.offset if has_ckpt else self.segments[0].base_offset
        scanned: list[Segment] = []
        for i in range(first, len(self.segments)):
            seg = self.segments[i]
            pos = rp.position if (has_ckpt and seg.base_offset == rp.segment) else 0
            if pos == 0 and seg.base_offset < expected:
                self._drop_from(i, expected, f"{seg.path} starts at {seg.base_offset}, "
                                             f"below the end {expected} of the log before it")
                break
            expected = max(expected, seg.base_offset) if pos == 0 else expected  # a gap
            expected, problem = self._scan(seg, pos, expected)
            scanned.append(seg)
            if problem is not None:
                if not has_ckpt and i < len(self.segments) - 1:
                    raise _Offline(f"{seg.path} byte {problem[0]} (offset {expected}): {problem[1]}; "
                                   "no checkpoint tells whether it was flushed, so nothing is "
                                   "truncated")
                self._cut(i, *problem)
                break
        return self._finish(scanned, expected)

    def _scan(self, seg: Segment, pos: int, expected: int) -> tuple[int, "tuple[int, str] | None"]:
        """CRC-check ``seg`` from ``pos``; index and learn epochs on the way.
        Returns the next expected offset and (position, reason) of damage."""
        self.index.restart_cadence()
        try:
            for bpos, header in seg.scan(pos, seg.size, verify=True):
                if header.base_offset < expected:  # above it: a gap (compaction)
                    raise CorruptRecordError(f"batch at offset {header.base_offset}, expected "
                                             f"{expected} or above", position=bpos)
                seg.max_timestamp = max(seg.max_timestamp, header.max_timestamp)
                self.epochs.observe(header.leader_epoch, header.base_offset)
                self.index.on_batch(header.base_offset, seg.base_offset, bpos, header.size,
                                    header.max_timestamp)
                expected = header.next_offset
                pos = bpos + header.size
            self.scanned += pos
            if pos < seg.size:
                return expected, (pos, "incomplete batch at the end")
        except CorruptRecordError as exc:
            return expected, (exc.position, exc.message)
        return expected, None

    def _check_below_recovery_point(self) -> int:
        """Index of the segment where scanning starts; raises _Offline on damage."""
        c = self.ckpt
        if c is None:
            return 0
        bases = [s.base_offset for s in self.segments]
        if c.rp_segment in self.deleted:  # a reset renamed it, then crashed before its checkpoint
            log.warning("%s: the recovery point's segment %s was deleted by a restart of the log; "
                        "recovering from %s", self.name, segment_name(c.rp_segment),
                        self.segments[0].path)
            self.log_start = bases[0]
            self.rp = RecoveryPoint(bases[0], bases[0], 0)
            self.index.clear()
            self.epochs.clear()
            return 0
        if c.rp_segment not in bases:
            if c.rp_segment < bases[0] and c.rp_position == 0:
                self.rp = RecoveryPoint(bases[0], bases[0], 0)
                return 0
            raise _Offline(f"segment {segment_name(c.rp_segment)} holding the recovery point "
                           f"(offset {c.recovery_point}) is missing")
        i = bases.index(c.rp_segment)
        for seg in self.segments[:i]:
            info = self.infos.get(seg.base_offset)
            if info is not None and info.size != seg.size:
                raise _Offline(f"{seg.path} is {seg.size} bytes but {info.size} were flushed "
                               f"(byte {min(seg.size, info.size)}, offset up to {info.next_offset})")
        seg = self.segments[i]
        if seg.size < c.rp_position:
            raise _Offline(f"{seg.path} is {seg.size} bytes, shorter than its flushed length "
                           f"{c.rp_position} (byte {seg.size}, offset {c.recovery_point})")
        return i

    def _cut(self, i: int, position: int, why: str) -> None:
        seg, later = self.segments[i], self.segments[i + 1:]
        dropped = seg.size - position + sum(s.size for s in later)
        log.warning("%s: recovery truncates %s at byte %d (%s); %d bytes dropped, %d later "
                    "segment(s)", self.name, seg.path, position, why, dropped, len(later))
        for s in later:
            s.remove()
        del self.segments[i + 1:]
        seg.truncate(position)

    def _drop_from(self, i: int, expected: int, why: str) -> None:
        """Remove segments i.. (they do not continue the log); keep one segment."""
        log.warning("%s: recovery drops %d segment(s) from %s: %s", self.name,
                    len(self.segments) - i, self.segments[i].path, why)
        for later in self.segments[i:]:
            later.remove()
        del self.segments[i:]
        if not self.segments:
            self.segments.append(Segment.create(self.directory, expected, self.files))

    def _finish(self, scanned: list[Segment], end: int) -> tuple[int, int]:
        for seg in scanned:
            if seg.size:  # an empty one has nothing to flush: no descriptor taken for it
                seg.flush()
        for seg, nxt in zip(self.segments, self.segments[1:]):
            if seg in scanned or seg.base_offset not in self.infos:
                if seg not in scanned:
                    seg.max_timestamp = max((h.max_timestamp for _, h in seg.scan(0, seg.size,
                                                                                  verify=False)),
                                            default=-1)
                self.new_infos[seg.base_offset] = ck.SegmentInfo(seg.size, nxt.base_offset,
                                                                 seg.max_timestamp, -1)
            else:
                seg.max_timestamp = self.infos[seg.base_offset].max_timestamp
        if end < self.log_start:  # the log start outlived the data (Kafka: truncateFullyAndStartAt)
            log.warning("%s: log end %d below log start %d after recovery; restarting empty at %d",
                        self.name, end, self.log_start, self.log_start)
            for seg in self.segments:
                seg.remove()
            self.segments = [Segment.create(self.directory, self.log_start, self.files)]
            self.index.clear()
            end = self.log_start
        active = self.segments[-1]
        self.rp = RecoveryPoint(end, active.base_offset, active.size)
        self.epochs.truncate_after(end)  # an epoch begun at the end with no batch yet stays
        self.epochs.dirty = True
        if active.size and active.created_ms < 0:
            active.created_ms = int(time.time() * 1000)
        if self.ckpt is None or self.swapped or not self._index_complete():
            self._rebuild_index()
        self.index.max_seen = max(self.index.last_time, *(s.max_timestamp for s in self.segments))
        self.index.restart_cadence()
        hw = end if self.auto_hw else min(self.ckpt.high_watermark if self.ckpt else 0, end)
        return end, hw


def _entry_in(index: PartitionIndex, base: int, end: int) -> bool:
    """Whether ``index`` has an entry of the segment of ``base`` below ``end``."""
    entry = index.lookup(end - 1)
    return entry is not None and entry[1] == base
