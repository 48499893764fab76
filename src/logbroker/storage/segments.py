"""The segment list of one partition and its offsets (Kafka's LocalLog).

``Segments`` is the one owner of a log's state: the segment files, the log
start offset, the log end offset, the recovery point and the high
watermark. Nothing else assigns them; the Log, the loader, truncation and
retention change them only through the methods below, each of which keeps
the invariants:

- at least one segment; base offsets ascending; the last one is active;
- log start <= log end; the first segment's base <= log start;
- recovery point <= log end; it names the segment and byte position up to
  which every byte was fsynced;
- journaled <= log end: offsets below it are durable in the broker's
  journal (storage/journal.py) though maybe not yet in the files; the
  appends past the durable end (the larger of the two) are held, as
  written, for the journal (``capture``, ``take_journal``), up to
  ``JOURNAL_HOLD_BYTES``;
- log start <= high watermark <= log end.

Not thread-safe: the Log calls it under its lock.
"""

from __future__ import annotations

import bisect
import os
from dataclasses import dataclass
from typing import Iterator, Sequence

from ..errors import StorageError
from . import checkpoints as ck
from .files import FileCache
from .segment import Segment

JOURNAL_HOLD_BYTES = 1 << 20  # appends held for the journal per log; past it the log's
# next group commit syncs its file instead (a log nobody commits: acks=0 on an fsync topic)


@dataclass(frozen=True, slots=True)
class RecoveryPoint:
    """Every byte before ``position`` of segment ``segment`` is fsynced; the
    batch there (if any) starts at ``offset``."""

    offset: int
    segment: int
    position: int


class Segments:
    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = (
        "_hw", "_jbytes", "_jchunks", "_jgap", "_list", "_log_end", "_log_start", "_new_infos",
        "_rp", "_trash", "cuts", "directory", "files", "journaled"
    )

    def __init__(self, directory: str, files: FileCache, segments: list[Segment], *,
                 log_start: int, log_end: int, recovery_point: RecoveryPoint,
                 high_watermark: int, new_infos: "dict[int, ck.SegmentInfo] | None" = None) -> None:
        assert segments, "a log has at least one segment"
        self.directory, self.files = directory, files
        self._list = segments
        self._log_start, self._log_end = log_start, log_end
        self._rp = recovery_point
        self._hw = max(log_start, min(high_watermark, log_end))
        self._new_infos: dict[int, ck.SegmentInfo] = dict(new_infos or {})
        self._trash: list[tuple[int, Segment]] = []
        self.cuts = 0  # truncations and resets so far (the compactor checks none came between)
        self.journaled = 0
        # (base, end, buffers, bytes) of appends held for the journal; () when none (no list
        # for the cyclic GC to walk on an idle log), None when not capturing
        self._jchunks: "list | tuple | None" = None
        self._jbytes = 0
        self._jgap = 0  # offsets below it were appended but not held (over JOURNAL_HOLD_BYTES)

    # -- state ------------------------------------------------------------------------
    @property
    def log_start(self) -> int:
        return self._log_start

    @property
    def log_end(self) -> int:
        """The next offset to be assigned."""
        return self._log_end

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> RecoveryPoint:
        return self._rp

    @property
    def active(self) -> Segment:
        return self._list[-1]

    @property
    def first(self) -> Segment:
        return self._list[0]

    def __iter__(self) -> Iterator[Segment]:
        return iter(tuple(self._list))

    def __len__(self) -> int:
        return len(self._list)

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._list)

    def segment_for(self, offset: int) -> Segment:
        """The segment whose range holds ``offset`` (the first one if below)."""
        segs = self._list
        if len(segs) == 1 or offset >= segs[-1].base_offset:  # most reads: the active one
            return segs[-1] if offset >= segs[-1].base_offset else segs[0]
        i = bisect.bisect_right(segs, offset, key=_base) - 1
        return segs[max(i, 0)]

    def segment_end(self, seg: Segment) -> int:
        """The offset after ``seg``'s last batch."""
        i = self._list.index(seg)
        return self._list[i + 1].base_offset if i + 1 < len(self._list) else self._log_end

    def from_segment(self, seg: Segment) -> list[Segment]:
        """``seg`` and every later segment, in order."""
        return self._list[self._list.index(seg):]

    def tail(self, min_bytes: int) -> list[Segment]:
        """The last segments holding at least ``min_bytes`` (all if fewer), oldest first."""
        chosen, total = [], 0
        for seg in reversed(self._list):
            chosen.insert(0, seg)
            total += seg.size
            if total >= min_bytes:
                break
        return chosen

    @property
    def has_new_infos(self) -> bool:
        """Summaries of sealed segments wait for the next checkpoint."""
        return bool(self._new_infos)

    def take_new_infos(self) -> dict[int, ck.SegmentInfo]:
        """Summaries of segments sealed since the last call (for the checkpoint)."""
        infos = self._new_infos
        if infos:  # an empty one stays: no new dict per partition per checkpoint
            self._new_infos = {}
        return infos

    def restore_new_infos(self, infos: dict[int, ck.SegmentInfo]) -> None:
        """Put back summaries a failed checkpoint did not store."""
        self._new_infos = {**infos, **self._new_infos}

    # -- growth -----------------------------------------------------------------------
    def append(self, buffers: Sequence, nbytes: int, next_offset: int, max_timestamp: int,
               now: int) -> None:
        """Write ``buffers`` at the end of the active segment; the log end
        becomes ``next_offset``. On OSError nothing changed (a partial write
        is cut off again) and the error propagates."""
        seg = self.active
        try:
            seg.write(buffers, nbytes)
        except OSError:
            seg.discard_after(seg.size)
            raise
        if seg.created_ms < 0:
            seg.created_ms = now
        seg.max_timestamp = max(seg.max_timestamp, max_timestamp)
        if self._jchunks is not None:
            self._hold(buffers, nbytes, next_offset)
        self._log_end = next_offset

    # -- the journal's share ------------------------------------------------------------
    def capture(self, on: bool) -> None:
        """Hold each append's buffers for the journal from now on (or stop)."""
        if on and self._jchunks is None:
            self._jchunks, self._jgap = (), self._log_end
        elif not on:
            self._jchunks, self._jbytes = None, 0

    @property
    def durable_end(self) -> int:
        """Offsets below it are durable: fsynced or in the journal."""
        return self._rp.offset if self._rp.offset > self.journaled else self.journaled

    def _hold(self, buffers: Sequence, nbytes: int, next_offset: int) -> None:
        chunk = (self._log_end, next_offset, buffers, nbytes)
        if self._jchunks:
            self._jchunks.append(chunk)
        else:
            self._jchunks = [chunk]
        self._jbytes += nbytes
        if self._jbytes > JOURNAL_HOLD_BYTES:  # let go: a file sync covers these
            self._jchunks, self._jbytes, self._jgap = (), 0, next_offset

    def take_journal(self) -> "list | None":
        """The held appends past the durable end, handed over (no longer
        held): ``[(base offset, end offset, buffers, bytes)]`` in offset order;
        None when some offsets past the durable end are not held (the log
        was not capturing, or let go): only a file sync can cover them."""
        held = self._jchunks
        if held is None or self._jgap > self.durable_end:
            return None
        self._jchunks, self._jbytes = (), 0
        durable = self.durable_end
        return [c for c in held if c[1] > durable]

    def mark_journaled(self, offset: int) -> None:
        """Everything below ``offset`` is in the journal (never moves back)."""
        if self.journaled < offset <= self._log_end:
            self.journaled = offset

    def _synced_to(self, offset: int) -> None:
        """The files are durable below ``offset``: appends held below it go."""
        held = self._jchunks
        if held and held[0][1] <= offset:
            i = 1
            while i < len(held) and held[i][1] <= offset:
                i += 1
            self._jbytes -= sum(c[3] for c in held[:i])
            del held[:i]
            if not held:
                self._jchunks = ()

    def _forget_journal(self) -> None:
        """A cut: what was held or journaled past the new end is void (the
        journal skips the old generation's entries: storage/journal.py)."""
        if self._jchunks is not None:
            self._jchunks, self._jbytes, self._jgap = (), 0, self._log_end
        self.journaled = min(self.journaled, self._log_end)

    def roll(self, base: "int | None" = None) -> Segment:
        """Seal the active segment (fsynced first) and start a new one at
        ``base`` (default: the log end; a follower copying a compacted
        leader may start it past the end, where the leader's starts); the
        log end and the recovery point move to it. Returns the active segment."""
        old = self.active
        if old.size == 0:
            return old
        base = self._log_end if base is None else max(base, self._log_end)
        old.flush()
        new = Segment.create(self.directory, base, self.files)
        self._list.append(new)
        self._new_infos[old.base_offset] = ck.SegmentInfo(old.size, base, old.max_timestamp,
                                                          old.created_ms)
        self._log_end = base
        self._rp = RecoveryPoint(base, base, 0)
        self._synced_to(base)
        return new

    def mark_flushed(self, point: RecoveryPoint) -> None:
        """Everything before ``point`` is now fsynced (never moves back)."""
        if point.offset > self._rp.offset and point.offset <= self._log_end:
            self._rp = point
            self._synced_to(point.offset)

    def flushed_point(self) -> RecoveryPoint:
        """The recovery point an fsync of the active segment, now, would give."""
        return RecoveryPoint(self._log_end, self.active.base_offset, self.active.size)

    def set_high_watermark(self, offset: int) -> None:
        """Clamped to [log start, log end]."""
        self._hw = max(self._log_start, min(offset, self._log_end))

    def advance_high_watermark(self, offset: int) -> None:
        """Move the HW forward only (clamped)."""
        if offset > self._hw:
            self.set_high_watermark(offset)

    # -- removal ----------------------------------------------------------------------
    def truncate_tail(self, seg: Segment, position: int, new_end: int) -> None:
        """Cut ``seg`` at byte ``position`` (the start of the batch at
        ``new_end``, or its end: a sealed segment becomes active again) and
        remove every later segment; durable on return, so the recovery point
        is the new end."""
        doomed = self._list[self._list.index(seg) + 1:]
        for later in doomed:
            later.remove()
        del self._list[self._list.index(seg) + 1:]
        if position < seg.size:
            seg.truncate(position)
            seg.max_timestamp = max((h.max_timestamp for _, h in seg.scan(0, seg.size,
                                                                          verify=False)),
                                    default=-1)
        if seg.size == 0:
            seg.created_ms = -1
        self._log_end = new_end
        self._hw = min(self._hw, self._log_end)
        self._rp = self.flushed_point()
        self._forget_journal()
        self.cuts += 1

    def reset(self, offset: int, deadline: int) -> None:
        """The log restarts empty at ``offset`` (any offset). Every segment is
        renamed ``.deleted`` first (``purge`` removes it after ``deadline``);
        creating the new one fsyncs the directory, renames included, so a
        crash before the caller's checkpoint leaves the old recovery point's
        segment renamed, which the loader takes for a reset, not for damage."""
        for seg in self._list:
            seg.mark_deleted()
            self._trash.append((deadline, seg))
        self._list = [Segment.create(self.directory, offset, self.files)]
        self._new_infos.clear()
        self._log_start = self._log_end = offset
        self._rp = RecoveryPoint(offset, offset, 0)
        self._hw = offset
        self._forget_journal()
        self.cuts += 1

    def delete_head(self, offset: int, deadline: int) -> list[Segment]:
        """Retention: the log start becomes ``offset`` (<= log end); sealed
        segments wholly below it are renamed ``.deleted`` and removed by
        ``purge`` after ``deadline``. Returns them."""
        self._log_start = max(self._log_start, offset)
        doomed = []
        while len(self._list) > 1 and self._list[1].base_offset <= offset:
            doomed.append(self._list.pop(0))
        for seg in doomed:
            seg.mark_deleted()
            self._trash.append((deadline, seg))
        first = self._list[0].base_offset
        if self._rp.offset < first:  # everything before the first kept segment is gone anyway
            self._rp = RecoveryPoint(first, first, 0)
        self._hw = max(self._hw, self._log_start)
        return doomed

    def replace(self, group: list[Segment], new: Segment, deadline: int) -> bool:
        """Compaction: the consecutive segments ``group`` (sealed, unchanged
        since the compactor read them: same objects, same sizes) give way to
        ``new``, their cleaned version; they go to the trash (``purge``
        removes them after ``deadline``). False, nothing changed, if the
        group is no longer there as it was."""
        if group[0] not in self._list:
            return False
        i = self._list.index(group[0])
        if self._list[i:i + len(group)] != group or i + len(group) >= len(self._list):
            return False
        self._list[i:i + len(group)] = [new]
        self._trash += [(deadline, seg) for seg in group]
        for seg in group:  # their summaries (if not yet stored) are void: the caller stored new's
            self._new_infos.pop(seg.base_offset, None)
        return True

    def holds(self, group: list[Segment], sizes: list[int]) -> bool:
        """Whether ``group`` still lies in the log, sealed, with these sizes."""
        if group[0] not in self._list:
            return False
        i = self._list.index(group[0])
        return self._list[i:i + len(group)] == group and i + len(group) < len(self._list) \
            and [s.size for s in group] == sizes

    def purge(self, now: int) -> int:
        """Remove ``.deleted`` files whose delay has passed; returns how many."""
        if not self._trash:  # most partitions, every housekeeping pass: no new lists
            return 0
        due = [s for t, s in self._trash if t <= now]
        self._trash = [(t, s) for t, s in self._trash if t > now]
        for seg in due:
            seg.remove()
        return len(due)

    # -- life -------------------------------------------------------------------------
    def close(self) -> None:
        for seg in self._list + [s for _, s in self._trash]:
            seg.close()

    def remove_files(self) -> None:
        """Delete every file of this log and its directory (topic deletion)."""
        for seg in self._list + [s for _, s in self._trash]:
            seg.remove()
        try:
            os.rmdir(self.directory)
        except OSError as exc:
            raise StorageError(f"cannot remove {self.directory}: {exc}") from None


def _base(seg) -> int:
    return seg.base_offset
