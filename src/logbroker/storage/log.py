"""The log of one topic-partition: appends, reads, durability, checkpoints.

Offsets are assigned here: ``append`` stamps each batch's base offset and
leader epoch in its 16 leading bytes (outside the CRC) and writes the batch
untouched otherwise. The segment list and the log's offsets belong to
``Segments``; the Log changes them only through its methods. Thread-safe:
one lock guards the state; fsyncs run outside it, shared by every append
waiting on them (group commit).
"""

from __future__ import annotations

import errno
import logging
import threading
import time

from ..errors import (CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError,
                      PartitionOfflineError, RecordTooLargeError, StorageError)
from ..records import format as fmt
from ..records.walker import split_batches
from . import checkpoints as ck
from .config import FLUSH_FSYNC, LogConfig
from .files import FileCache
from .loader import LoadedLog, load_log
from .locate import Locator
from .metastore import MetaStore
from .producer_state import TAIL_SCAN_BYTES, ProducerStates
from .results import AppendInfo, FileSlice, TimestampOffset
from .segment import Segment
from .segments import RecoveryPoint
from .truncation import delete_before, truncate_to

log = logging.getLogger(__name__)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """Append-only segmented log; use ``Log.open``."""

    def __init__(self, topic: str, partition: int, directory: str, config: LogConfig,
                 meta: MetaStore, loaded: LoadedLog, *, auto_hw: bool = True) -> None:
        self.topic, self.partition, self.directory = topic, partition, directory
        self.config, self.meta, self.pid = config, meta, loaded.pid
        self.index, self._segs, self._epochs = loaded.index, loaded.segments, loaded.epochs
        self.files = self._segs.files
        self.auto_hw = auto_hw  # single node: HW follows durable end (fsync) or LEO (lazy)
        self._producers = ProducerStates()
        self._lock = threading.RLock()
        self._flush_cond = threading.Condition()
        self._flushing = False
        self._flushed = self._segs.recovery_point.offset
        self._offline: "PartitionOfflineError | None" = None
        self._locator = Locator(self.name, self._segs, self.index, self._checkpoint_locked)
        self.fsyncs = 0
        self.scanned_bytes = loaded.scanned_bytes
        if loaded.offline is not None:
            self._fail(loaded.offline.removeprefix(f"{self.name}: "))
        else:
            with self._lock:
                self._checkpoint_locked()

    @classmethod
    def open(cls, directory: str, topic: str, partition: int, *, config: LogConfig,
             meta: MetaStore, files: FileCache, clean: bool, auto_hw: bool = True) -> "Log":
        """Load (creating if needed) the log in ``directory``; never raises for
        damaged data: a damaged log comes back with ``offline`` set."""
        loaded = load_log(directory, topic, partition, config=config, meta=meta, files=files,
                          clean=clean, auto_hw=auto_hw)
        return cls(topic, partition, directory, config, meta, loaded, auto_hw=auto_hw)

    # -- state -----------------------------------------------------------------
    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def log_start_offset(self) -> int:
        return self._segs.log_start

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._segs.log_end

    @property
    def high_watermark(self) -> int:
        return self._segs.high_watermark

    @property
    def recovery_point(self) -> int:
        return self._segs.recovery_point.offset

    @property
    def flushed_point(self) -> RecoveryPoint:
        """Offset, segment and byte position up to which everything is fsynced."""
        return self._segs.recovery_point

    @property
    def offline(self) -> "PartitionOfflineError | None":
        return self._offline

    @property
    def epochs(self) -> list[tuple[int, int]]:
        """Leader-epoch history ``[(epoch, start offset)]``, ascending."""
        return list(self._epochs.entries)

    @property
    def segments(self) -> tuple[Segment, ...]:
        """The segments, oldest first (a snapshot; read-only use)."""
        return tuple(self._segs)

    @property
    def active(self) -> Segment:
        return self._segs.active

    def size_in_bytes(self) -> int:
        return self._segs.size_in_bytes()

    def segment_end(self, seg: Segment) -> int:
        """The offset after ``seg``'s last batch."""
        return self._segs.segment_end(seg)

    def set_high_watermark(self, offset: int) -> None:
        """Move the HW (replication); clamped to [log start, log end]."""
        with self._lock:
            self._segs.set_high_watermark(offset)

    # -- append ------------------------------------------------------------------
    def append(self, batches, leader_epoch: int = 0, *, sync: "bool | None" = None,
               now: "int | None" = None) -> AppendInfo:
        """Validate, stamp and write ``batches`` (a sequence of batches, or one
        buffer holding a whole number of them).

        Everything is checked before anything is written: header, CRC and
        size of every batch, the leader epoch, and the idempotent producer
        state (a retried duplicate is not written again and reports its
        original offset; a sequence gap or stale producer epoch refuses the
        whole call). ``first_offset`` is the first batch's offset.
        Blocks until the bytes are fsynced when ``sync`` is true (default: the
        log's flush policy is "fsync"); concurrent appends share the fsync.
        A full disk raises StorageError with nothing written (the log stays
        online); other I/O errors take the partition offline.
        """
        parsed = self._validate(batches)
        with self._lock:
            self._check_online()
            self._epochs.check(leader_epoch, self.name)
            dups = self._check_producers(parsed)
            info = self._write(parsed, dups, leader_epoch, now_ms() if now is None else now)
        if self.config.flush == FLUSH_FSYNC if sync is None else sync:
            self._sync_to(info.last_offset + 1)
        return info

    def _validate(self, batches) -> list[tuple[memoryview, fmt.BatchHeader]]:
        if isinstance(batches, (bytes, bytearray, memoryview)):
            parsed = split_batches(batches)
        else:
            parsed = [item for raw in batches for item in split_batches(raw)]
        if not parsed:
            raise InvalidRequestError("append needs at least one batch")
        for mv, header in parsed:
            if header.size > self.config.max_batch_bytes:
                raise RecordTooLargeError(f"batch of {header.size} bytes exceeds max_batch_bytes "
                                          f"{self.config.max_batch_bytes}")
            fmt.check_crc(mv, 0, header)
        return parsed

    def _check_producers(self, parsed) -> list["int | None"]:
        if all(h.producer_id < 0 for _, h in parsed):
            return [None] * len(parsed)
        if not self._producers.loaded:
            self._producers.load(h for seg in self._segs.tail(TAIL_SCAN_BYTES)
                                 for _, h in seg.scan(0, seg.size, verify=False))
        return self._producers.check_all([h for _, h in parsed])

    def _write(self, parsed, dups: list, epoch: int, now: int) -> AppendInfo:
        total = sum(h.size for (_, h), dup in zip(parsed, dups) if dup is None)
        seg = self._segs.active
        if total and seg.size and (seg.size + total > self.config.segment_bytes
                                   or self._aged(seg, now)):
            seg = self._roll_locked(now)
        offset, pos, iov, written, offsets, max_ts = self._segs.log_end, seg.size, [], [], [], -1
        for (mv, h), dup in zip(parsed, dups):
            if dup is not None:
                offsets.append((dup, dup + h.record_count - 1))
                continue
            iov += (fmt.stamp(mv, offset, epoch), mv[fmt.STAMP_SIZE:])
            written.append((h, offset, pos))
            offsets.append((offset, offset + h.record_count - 1))
            max_ts = max(max_ts, h.max_timestamp)
            offset, pos = offset + h.record_count, pos + h.size
        if written:
            try:
                self._segs.append(iov, total, offset, max_ts, now)
            except OSError as exc:
                raise self._io_failed(f"write to {seg.path}", exc) from None
            self._wrote(written, seg, epoch)
        return AppendInfo(offsets[0][0], offsets[-1][1], max_ts, len(written), total)

    def _wrote(self, written: list, seg: Segment, epoch: int) -> None:
        for h, offset, pos in written:
            self.index.on_batch(offset, seg.base_offset, pos, h.size, h.max_timestamp)
            if h.producer_id >= 0:
                self._producers.record(h.producer_id, h.producer_epoch, h.base_sequence,
                                       h.record_count, offset)
        self._epochs.observe(epoch, written[0][1])
        if self.auto_hw and self.config.flush != FLUSH_FSYNC:
            self._segs.advance_high_watermark(self._segs.log_end)

    def _aged(self, seg: Segment, now: int) -> bool:
        return seg.created_ms >= 0 and now - seg.created_ms >= self.config.segment_ms

    # -- durability -------------------------------------------------------------
    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        self._sync_to(self._segs.log_end)

    def _sync_to(self, target: int) -> None:
        with self._flush_cond:
            while self._flushed < target:
                if not self._flushing:
                    self._flushing = True
                    break
                self._flush_cond.wait()
            else:
                return
        done = None
        try:
            with self._lock:
                point, seg = self._segs.flushed_point(), self._segs.active
            try:
                seg.flush()
            except OSError as exc:
                with self._lock:
                    raise self._fsync_failed(seg, exc) from None
            self.fsyncs += 1
            with self._lock:
                self._segs.mark_flushed(point)
                if self.auto_hw:
                    self._segs.advance_high_watermark(point.offset)
            done = point.offset
        finally:
            with self._flush_cond:
                self._flushing = False
                if done is not None and self._offline is None:
                    self._flushed = max(self._flushed, done)
                self._flush_cond.notify_all()
        self._check_online()

    def _fsync_failed(self, seg: Segment, exc: OSError) -> Exception:
        """A full disk at fsync: the unflushed tail (never acknowledged in
        fsync mode) is cut back to the recovery point and the log stays
        online; any other failure takes the partition offline (the page
        cache may have dropped the data: no retry can be trusted)."""
        if exc.errno not in _DISK_FULL:
            return self._fail(f"fsync of {seg.path} failed: {exc}")
        rp = self._segs.recovery_point
        try:
            self._truncate_locked(rp.offset)
        except Exception as cut:  # noqa: BLE001 - nothing else is safe then
            return self._fail(f"fsync of {seg.path} failed ({exc}) and the unflushed tail "
                              f"could not be cut: {cut}")
        return StorageError(f"{self.name}: fsync of {seg.path} failed: {exc.strerror}; offsets "
                            f">= {rp.offset} were not acknowledged and are dropped")

    def _io_failed(self, what: str, exc: OSError) -> Exception:
        if exc.errno in _DISK_FULL:
            log.warning("%s: %s failed: %s (nothing written; the partition stays online)",
                        self.name, what, exc.strerror)
            return StorageError(f"{self.name}: {what} failed: {exc.strerror}; nothing was written")
        return self._fail(f"{what} failed: {exc}")

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

    def roll_if_aged(self, now: int) -> bool:
        """Roll the active segment if it holds data older than ``segment_ms``."""
        with self._lock:
            self._check_online()
            if not (self._segs.active.size and self._aged(self._segs.active, now)):
                return False
            self._roll_locked(now)
            return True

    def _roll_locked(self, now: int) -> Segment:
        old = self._segs.active
        try:
            new = self._segs.roll()
        except OSError as exc:
            raise self._io_failed(f"roll of {old.path}", exc) from None
        if new is old:
            return old
        self.fsyncs += 1
        self._flushed = max(self._flushed, self._segs.log_end)
        if self.auto_hw:
            self._segs.advance_high_watermark(self._segs.log_end)
        self.index.restart_cadence()
        self._checkpoint_locked()
        return new

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
            if start is None:
                return b""
            return self._located(self._locator.read_from, start[0], start[1], max_bytes, start[2])

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
            size = self._located(self._locator.slice_from, seg, pos, max_bytes, limit)
            return FileSlice(seg, pos, size) if size else None

    def _start_of_read(self, offset: int, upto: "int | None") -> "tuple[Segment, int, int] | None":
        """(segment, position, limit) where a read at ``offset`` starts, or None
        when there is nothing below the limit yet (the read contract above)."""
        self._check_online()
        segs = self._segs
        if offset < segs.log_start or offset > segs.log_end:
            raise OffsetOutOfRangeError(f"{self.name}: offset {offset} is outside "
                                        f"[{segs.log_start}, {segs.log_end}]")
        limit = segs.log_end if upto is None else min(upto, segs.log_end)
        if offset >= limit:
            return None
        seg = segs.segment_for(offset)
        return seg, self._located(self._locator.locate, seg, offset)[0], limit

    def offset_for_timestamp(self, timestamp: int) -> "TimestampOffset | None":
        """The earliest record with timestamp >= ``timestamp`` (and its own)."""
        with self._lock:
            self._check_online()
            hit = self._located(self._locator.offset_for_timestamp, timestamp)
            return None if hit is None else TimestampOffset(*hit)

    def _located(self, fn, *args):
        """Run a Locator call; damage it finds takes the partition offline."""
        try:
            return fn(*args)
        except CorruptRecordError as exc:
            raise self._fail(exc.message) from None

    # -- truncation and retention ---------------------------------------------------
    def truncate_to(self, offset: int) -> None:
        """Drop offsets >= ``offset`` (whole batches: the log end becomes the
        base of the batch holding ``offset``). At or below the log start the
        log is emptied and restarts at ``offset``. Durable when it returns."""
        with self._lock:
            self._check_online()
            self._truncate_locked(offset)

    def _truncate_locked(self, offset: int) -> None:
        self._located(truncate_to, self._segs, self.index, self._epochs, self._locator, offset)
        self._flushed = min(self._flushed, self._segs.log_end)
        self._producers.clear()  # rebuilt from the new tail by the next idempotent append
        self._checkpoint_locked()

    def delete_before(self, offset: int, now: "int | None" = None) -> list[Segment]:
        """Retention: the log start becomes ``offset``; sealed segments wholly
        below it are deleted (renamed ``.deleted``, removed after
        ``file_delete_delay_ms``). The active segment is never deleted.
        Raises OffsetOutOfRangeError past the log end. Returns the segments."""
        with self._lock:
            self._check_online()
            deadline = (now_ms() if now is None else now) + self.config.file_delete_delay_ms
            start = self._segs.log_start
            try:
                doomed = delete_before(self._segs, self.index, offset, deadline)
            except OffsetOutOfRangeError as exc:
                raise OffsetOutOfRangeError(f"{self.name}: {exc.message}") from None
            if self._segs.log_start != start:
                self._checkpoint_locked()
            return doomed

    def purge_deleted(self, now: "int | None" = None) -> int:
        """Remove ``.deleted`` files whose delay has passed; returns how many."""
        with self._lock:
            return self._segs.purge(now_ms() if now is None else now)

    # -- checkpoints ------------------------------------------------------------------
    def checkpoint(self, *, clean: bool = False) -> None:
        with self._lock:
            self._checkpoint_locked(clean=clean)

    def _checkpoint_locked(self, clean: bool = False) -> None:
        ck.write_checkpoint(self.meta, self.pid, self._segs, self.index, self._epochs, clean=clean)

    def close(self) -> None:
        """Flush, write a clean checkpoint, release descriptors."""
        if self._offline is None:
            self.flush()
            self.checkpoint(clean=True)
        with self._lock:
            self._segs.close()

    def remove_files(self) -> None:
        """Delete every file of this log (topic deletion)."""
        with self._lock:
            self._segs.remove_files()
