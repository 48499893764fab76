"""The log of one topic-partition: segments, offsets, durability.

Offsets are assigned here: ``append`` stamps each batch's base offset and
leader epoch in its 16 leading bytes (outside the CRC) and writes the batch
untouched otherwise. Thread-safe: one lock guards the segment list and the
offsets; fsyncs run outside it, shared by every append waiting on them (group
commit).
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time
from typing import Sequence

from .config import FLUSH_FSYNC, LogConfig
from ..errors import (CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError,
                      PartitionOfflineError, RecordTooLargeError, StorageError)
from ..records import format as fmt
from . import checkpoints as ck
from .files import FileCache
from .index import PartitionIndex
from .locate import Locator
from .metastore import MetaStore
from .results import AppendInfo, FileSlice, TimestampOffset
from .segment import Segment

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """Append-only segmented log; built by ``recovery.open_log``."""

    def __init__(self, *, topic: str, partition: int, directory: str, pid: int,
                 config: LogConfig, meta: MetaStore, files: FileCache, segments: list[Segment],
                 log_start: int, log_end: int, high_watermark: int,
                 recovery_point: tuple[int, int, int], epochs: list[tuple[int, int]],
                 index: PartitionIndex, max_ts_so_far: int = -1, auto_hw: bool = True) -> None:
        self.topic, self.partition, self.directory, self.pid = topic, partition, directory, pid
        self.config, self.meta, self.files, self.index = config, meta, files, index
        self.segments = segments
        self._log_start, self._leo, self._hw = log_start, log_end, high_watermark
        self._rp = recovery_point  # (offset, segment base, position)
        self.epochs = epochs
        self._epochs_dirty = False  # a new epoch not yet in LMDB (stored at the next checkpoint)
        self.auto_hw = auto_hw  # single node: HW follows durable end (fsync) or LEO (lazy)
        self._lock = threading.RLock()
        self._flush_cond = threading.Condition()
        self._flushing = False
        self._flushed = recovery_point[0]
        self._since_index = 0
        self._max_ts_so_far = max_ts_so_far
        self._new_infos: dict[int, ck.SegmentInfo] = {}
        self._trash: list[tuple[float, Segment]] = []
        self._offline: "PartitionOfflineError | None" = None
        self._locator = Locator(self)
        self.fsyncs = 0

    # -- state -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._leo

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._rp[0]

    @property
    def offline(self) -> "PartitionOfflineError | None":
        return self._offline

    @property
    def active(self) -> Segment:
        return self.segments[-1]

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def set_high_watermark(self, offset: int) -> None:
        """Move the HW (replication); clamped to [log start, log end]."""
        with self._lock:
            self._hw = max(self._log_start, min(offset, self._leo))

    # -- append ------------------------------------------------------------------
    def append(self, batches: Sequence, leader_epoch: int = 0, *, sync: "bool | None" = None,
               now: "int | None" = None) -> AppendInfo:
        """Validate (header, CRC, size), stamp and write ``batches``.

        Blocks until the bytes are fsynced when ``sync`` is true (default: the
        log's flush policy is "fsync"); concurrent appends share the fsync.
        Raises CorruptRecordError / RecordTooLargeError before writing anything.
        """
        parsed, total = self._validate(batches)
        with self._lock:
            self._check_online()
            if self.epochs and leader_epoch < self.epochs[-1][0]:
                raise InvalidRequestError(f"{self.name}: leader epoch {leader_epoch} is older "
                                          f"than the log's {self.epochs[-1][0]}")
            now = now_ms() if now is None else now
            seg = self.active
            if seg.size and (seg.size + total > self.config.segment_bytes or self._aged(seg, now)):
                seg = self._roll_locked(now)
            first, iov, pos, max_ts = self._leo, [], seg.size, -1
            for mv, header in parsed:
                iov += (fmt.stamp(mv, self._leo, leader_epoch), mv[fmt.STAMP_SIZE:])
                self._max_ts_so_far = max(self._max_ts_so_far, header.max_timestamp)
                if pos == 0 or self._since_index >= self.config.index_interval_bytes:
                    self.index.add(self._leo, seg.base_offset, pos, self._max_ts_so_far)
                    self._since_index = 0
                self._since_index += header.size
                max_ts = max(max_ts, header.max_timestamp)
                self._leo += header.record_count
                pos += header.size
            try:
                seg.write(iov, total)
            except OSError as exc:
                raise self._fail(f"write to {seg.path} failed: {exc}") from None
            if seg.created_ms < 0:
                seg.created_ms = now
            seg.max_timestamp = max(seg.max_timestamp, max_ts)
            if not self.epochs or leader_epoch > self.epochs[-1][0]:
                self._new_epoch(leader_epoch, first)
            info = AppendInfo(first, self._leo - 1, max_ts, len(parsed), total)
            if self.auto_hw and self.config.flush != FLUSH_FSYNC:
                self._hw = self._leo
        if self.config.flush == FLUSH_FSYNC if sync is None else sync:
            self._sync_to(info.last_offset + 1)
        return info

    def _validate(self, batches: Sequence) -> tuple[list, int]:
        parsed, total = [], 0
        for raw in batches:
            mv = memoryview(raw).cast("B")
            header = fmt.read_header(mv, 0)
            if header.size != len(mv):
                raise CorruptRecordError(f"batch announces {header.size} bytes but {len(mv)} were sent")
            if header.size > self.config.max_batch_bytes:
                raise RecordTooLargeError(f"batch of {header.size} bytes exceeds max_batch_bytes "
                                          f"{self.config.max_batch_bytes}")
            fmt.check_crc(mv, 0, header)
            parsed.append((mv, header))
            total += header.size
        if not parsed:
            raise InvalidRequestError("append needs at least one batch")
        return parsed, total

    def _new_epoch(self, epoch: int, start: int) -> None:
        """Remember a new leader epoch. It reaches LMDB with the next checkpoint,
        not on the append path (an LMDB commit is an fsync): the epoch is also
        in the batch headers, and recovery re-adds the epochs of the batches it
        scans past the recovery point."""
        self.epochs.append((epoch, start))
        self._epochs_dirty = True

    def _store_epochs(self) -> None:
        with self.meta.write() as txn:
            ck.store_epochs(txn, self.meta, self.pid, self.epochs)
        self._epochs_dirty = False

    def _aged(self, seg: Segment, now: int) -> bool:
        return seg.created_ms >= 0 and now - seg.created_ms >= self.config.segment_ms

    # -- durability -------------------------------------------------------------
    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        self._sync_to(self._leo)

    def _sync_to(self, target: int) -> None:
        with self._flush_cond:
            while self._flushed < target:
                if not self._flushing:
                    self._flushing = True
                    break
                self._flush_cond.wait()
            else:
                return
        try:
            with self._lock:
                end, seg, pos = self._leo, self.active, self.active.size
            try:
                seg.flush()
            except OSError as exc:
                with self._lock:
                    raise self._fail(f"fsync of {seg.path} failed: {exc}") from None
            self.fsyncs += 1
            with self._lock:
                if end > self._rp[0]:
                    self._rp = (end, seg.base_offset, pos)
                if self.auto_hw and end > self._hw:
                    self._hw = end
        finally:
            with self._flush_cond:
                self._flushing = False
                self._flushed = max(self._flushed, end if self._offline is None else self._flushed)
                self._flush_cond.notify_all()
        self._check_online()

    def _fail(self, why: str) -> PartitionOfflineError:
        self._offline = PartitionOfflineError(f"{self.name}: {why}")
        log.error("partition offline: %s", self._offline.message)
        return self._offline

    def _check_online(self) -> None:
        if self._offline is not None:
            raise self._offline

    # -- segments ---------------------------------------------------------------
    def roll(self, now: "int | None" = None) -> Segment:
        """Seal the active segment (if it holds data) and start a new one."""
        with self._lock:
            self._check_online()
            return self._roll_locked(now_ms() if now is None else now)

    def _roll_locked(self, now: int) -> Segment:
        old = self.active
        if old.size == 0:
            return old
        old.flush()  # a sealed segment is always durable
        self.fsyncs += 1
        self.segments.append(Segment.create(self.directory, self._leo, self.files))
        self._new_infos[old.base_offset] = ck.SegmentInfo(old.size, self._leo, old.max_timestamp,
                                                          old.created_ms)
        self._rp = (self._leo, self._leo, 0)
        self._flushed = max(self._flushed, self._leo)
        if self.auto_hw:
            self._hw = max(self._hw, self._leo)
        self._since_index = 0
        self._checkpoint_locked()
        return self.active

    def segment_for(self, offset: int) -> Segment:
        """The segment whose range holds ``offset`` (the first one if below)."""
        i = bisect.bisect_right([s.base_offset for s in self.segments], offset) - 1
        return self.segments[max(i, 0)]

    def segment_end(self, seg: Segment) -> int:
        """The offset after ``seg``'s last batch."""
        i = self.segments.index(seg)
        return self.segments[i + 1].base_offset if i + 1 < len(self.segments) else self._leo

    # -- reads ------------------------------------------------------------------
    def read(self, offset: int, max_bytes: int, upto: "int | None" = None) -> bytes:
        """Raw batches starting at the batch that holds ``offset``.

        - ``offset`` < log start or > log end: OffsetOutOfRangeError.
        - ``offset`` == log end (or >= ``upto``): b"" (nothing yet).
        - inside a batch: that whole batch comes first (a consumer skips the
          records below its offset); in a gap: the next batch after it.
        - Returns whole batches whose last offset < ``upto`` (default: log
          end), from one segment, at most ``max_bytes`` unless the first batch
          alone is larger (then that one batch, so readers always progress).
        Never blocks on other appends beyond the log's lock.
        """
        with self._lock:
            start = self._start_of_read(offset, upto)
            return b"" if start is None else self._locator.read_from(start[0], start[1], max_bytes, start[2])

    def slice(self, offset: int, max_bytes: int, upto: "int | None" = None) -> "FileSlice | None":
        """Like ``read`` but returns where the bytes lie, for ``sendfile``:
        the same start and offset contract, None where ``read`` returns b"".
        The slice may end inside its last batch when ``max_bytes`` cuts it
        (a reader drops an incomplete trailing batch and fetches again)."""
        with self._lock:
            start = self._start_of_read(offset, upto)
            if start is None:
                return None
            seg, pos, limit = start
            size = self._locator.slice_from(seg, pos, max_bytes, limit)
            return FileSlice(seg, pos, size) if size else None

    def _start_of_read(self, offset: int, upto: "int | None") -> "tuple[Segment, int, int] | None":
        """(segment, position, limit) where a read at ``offset`` starts, or None
        when there is nothing below the limit yet (the read contract above)."""
        self._check_online()
        if offset < self._log_start or offset > self._leo:
            raise OffsetOutOfRangeError(f"{self.name}: offset {offset} is outside "
                                        f"[{self._log_start}, {self._leo}]")
        limit = self._leo if upto is None else min(upto, self._leo)
        if offset >= limit:
            return None
        seg = self.segment_for(offset)
        return seg, self._locator.locate(seg, offset)[0], limit

    def offset_for_timestamp(self, timestamp: int) -> "TimestampOffset | None":
        """The earliest record with timestamp >= ``timestamp`` (and its own)."""
        with self._lock:
            self._check_online()
            return self._locator.offset_for_timestamp(timestamp)

    def tail_headers(self, max_bytes: int) -> list[fmt.BatchHeader]:
        """Headers of the batches in the last segments holding >= ``max_bytes``
        (whole segments, oldest first); for rebuilding in-memory state."""
        with self._lock:
            self._check_online()
            chosen, total = [], 0
            for seg in reversed(self.segments):
                chosen.insert(0, seg)
                total += seg.size
                if total >= max_bytes:
                    break
            return [h for seg in chosen for _, h in seg.scan(0, seg.size, verify=False)]

    # -- truncation and retention ---------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop offsets >= ``offset`` (whole batches: the log end becomes the
        base of the batch holding ``offset``). At or below the log start the
        log is emptied and restarts at ``offset``. Durable when it returns."""
        from .truncation import truncate_to

        with self._lock:
            self._check_online()
            truncate_to(self, offset)

    def delete_before(self, offset: int, now: "int | None" = None) -> list[Segment]:
        """Retention: the log start becomes ``offset``; sealed segments wholly
        below it are deleted (renamed ``.deleted``, removed after
        ``file_delete_delay_ms``). The active segment is never deleted.
        Raises OffsetOutOfRangeError past the log end. Returns the segments."""
        from .truncation import delete_before

        with self._lock:
            self._check_online()
            return delete_before(self, offset, now_ms() if now is None else now)

    def purge_deleted(self, now: "int | None" = None) -> int:
        """Remove ``.deleted`` files whose delay has passed; returns how many."""
        now = now_ms() if now is None else now
        with self._lock:
            due = [s for t, s in self._trash if t <= now]
            self._trash = [(t, s) for t, s in self._trash if t > now]
        for seg in due:
            seg.remove()
        return len(due)

    # -- checkpoints ------------------------------------------------------------------
    def checkpoint(self, *, clean: bool = False) -> None:
        with self._lock:
            self._checkpoint_locked(clean=clean)

    def _checkpoint_locked(self, clean: bool = False) -> None:
        a = self.active
        c = ck.Checkpoint(self._rp[0], self._rp[1], self._rp[2], self._log_start, self._hw, clean,
                          self._leo, a.base_offset, a.size, a.max_timestamp, a.created_ms)
        with self.meta.write() as txn:
            self.index.persist(txn)
            for base, info in self._new_infos.items():
                ck.store_segment_info(txn, self.meta, self.pid, base, info)
            ck.delete_segment_infos(txn, self.meta, self.pid, below=self.segments[0].base_offset,
                                    from_=a.base_offset)
            ck.store_checkpoint(txn, self.meta, self.pid, c)
            stored_epochs = self._epochs_dirty
            if stored_epochs:
                ck.store_epochs(txn, self.meta, self.pid, self.epochs)
        if stored_epochs:  # only once the commit succeeded
            self._epochs_dirty = False
        self._new_infos = {}

    def close(self) -> None:
        """Flush, write a clean checkpoint, release descriptors."""
        if self._offline is None:
            self.flush()
            self.checkpoint(clean=True)
        with self._lock:
            for seg in self.segments:
                seg.close()
            for _, seg in self._trash:
                seg.close()

    def remove_files(self) -> None:
        """Delete every file of this log (topic deletion)."""
        with self._lock:
            for seg in self.segments + [s for _, s in self._trash]:
                seg.remove()
            try:
                os.rmdir(self.directory)
            except OSError as exc:
                raise StorageError(f"cannot remove {self.directory}: {exc}") from None
