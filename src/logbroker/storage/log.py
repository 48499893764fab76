"""The log of one topic-partition: appends, reads, durability, checkpoints,
the leader-epoch calls of replication and the swap of a compacted group.

Offsets are assigned here: ``append`` stamps each batch's base offset and
leader epoch in its 16 leading bytes (outside the CRC) and writes the batch
untouched otherwise. The segment list and the log's offsets belong to
``Segments``; the Log changes them only through its methods. Thread-safe:
one lock guards the state; fsyncs run outside it, shared by every append
waiting on them (group commit).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import time

from ..errors import (CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError,
                      PartitionOfflineError, StorageError)
from ..records import format as fmt
from ..records.control import marker_batch
from ..records.walker import split_batches
from . import checkpoints as ck
from .appender import Appender
from .config import FLUSH_FSYNC, LogConfig
from .files import FileCache
from .flusher import Flusher
from .incoming import check_replicated, parse_batches
from .loader import LoadedLog, fresh_log, load_log
from .locate import Locator
from .cleaner_state import CleanerState, rewind_clean_point
from .metastore import MetaStore
from .results import AppendInfo, FileSlice, TimestampOffset
from .segment import Segment
from .segments import RecoveryPoint
from .swap import Cleaned, SwapFailed, install
from .truncation import delete_before, reset, truncate_to

log = logging.getLogger(__name__)
_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


def now_ms() -> int:
    return int(time.time() * 1000)


class Log:
    """Append-only segmented log; use ``Log.open``."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = (
        "_appender", "_ckpt_clean", "_ckpt_sig", "_epochs", "_flusher", "_follower", "_locator",
        "_lock", "_offline", "_on_dev", "_segs", "_txns", "auto_hw", "config", "directory",
        "files", "index", "journal", "meta", "partition", "pid", "scanned_bytes", "topic",
        "__weakref__"
    )

    def __init__(self, topic: str, partition: int, directory: str, config: LogConfig,
                 meta: MetaStore, loaded: LoadedLog, *, auto_hw: bool = True,
                 checkpoint: bool = True, journal=None) -> None:
        """``checkpoint=False``: the caller writes the first checkpoint
        (``checkpoint_many``: a slice of new partitions, one transaction).
        ``journal``: the data dir's (storage/journal.py): an fsync log then
        holds its appends for it until they are durable; None: it holds none."""
        self.topic, self.partition, self.directory = topic, partition, directory
        self.config, self.meta, self.pid = config, meta, loaded.pid
        self.index, self._segs, self._epochs = loaded.index, loaded.segments, loaded.epochs
        self.files = self._segs.files
        self.auto_hw = auto_hw  # single node: HW follows durable end (fsync) or LEO (lazy)
        self._follower = False  # a follower never rolls by age (set_follower)
        self._on_dev: "bool | None" = None  # on_device's answer, once asked
        self._ckpt_sig: "tuple | None" = None  # what the last checkpoint wrote (checkpoint_due)
        if loaded.unchanged:  # its stored checkpoint is what a new one would write
            self._ckpt_sig = self._signature()
        self._ckpt_clean = loaded.unchanged  # ... and a clean one (needs_clean_checkpoint)
        self._txns = loaded.txns
        self._appender = Appender(config, self._segs, self.index, self._epochs, self._roll_locked,
                                  self._txns)
        self._lock = threading.RLock()
        self._flusher = Flusher(self._segs.recovery_point.offset)
        self._offline: "PartitionOfflineError | None" = None
        self._locator = Locator(self.name, self._segs, self.index, self._checkpoint_locked)
        self.scanned_bytes = loaded.scanned_bytes
        self.journal = journal
        self._segs.capture(journal is not None and config.flush == FLUSH_FSYNC)
        if loaded.offline is not None:
            self._fail(loaded.offline.removeprefix(f"{self.name}: "))
        elif checkpoint:
            with self._lock:
                self._checkpoint_locked()

    @classmethod
    def open(cls, directory: str, topic: str, partition: int, *, config: LogConfig,
             meta: MetaStore, files: FileCache, clean: bool, auto_hw: bool = True,
             checkpoint: bool = True, journal=None) -> "Log":
        """Load (creating if needed) the log in ``directory``; never raises for
        damaged data: a damaged log comes back with ``offline`` set.
        ``checkpoint=False``: the caller writes the first checkpoint of an
        online log before using it (``checkpoint_many``)."""
        loaded = load_log(directory, topic, partition, config=config, meta=meta, files=files,
                          clean=clean, auto_hw=auto_hw)
        return cls(topic, partition, directory, config, meta, loaded, auto_hw=auto_hw,
                   checkpoint=checkpoint, journal=journal)

    @classmethod
    def fresh(cls, directory: str, topic: str, partition: int, pid: int, *, config: LogConfig,
              meta: MetaStore, files: FileCache, auto_hw: bool = True, journal=None) -> "Log":
        """A brand-new empty log (loader.fresh_log: ``directory`` must not
        exist, ``pid`` newly allocated), without its first checkpoint: the
        caller writes it (``checkpoint_many``)."""
        loaded = fresh_log(directory, topic, partition, pid, config=config, meta=meta, files=files)
        return cls(topic, partition, directory, config, meta, loaded, auto_hw=auto_hw,
                   checkpoint=False, journal=journal)

    def reconfigure(self, config: LogConfig) -> None:
        """Apply a topic's altered settings live: the next append, roll,
        retention and compaction pass use ``config`` (segments already
        written keep their size)."""
        with self._lock:
            self.config = self._appender.config = config
            self.index.interval = config.index_interval_bytes
            self._segs.capture(self.journal is not None and config.flush == FLUSH_FSYNC)

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
        """Offsets below it are durable: fsynced, or in the journal (the
        stored recovery point, ``flushed_point``, counts the files only)."""
        return self._segs.durable_end

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

    # -- transactions ---------------------------------------------------------------
    @property
    def last_stable_offset(self) -> int:
        """The first offset of the oldest open transaction (never below the
        log start), capped by the high watermark (= the HW when none is open)."""
        with self._lock:
            return self._txns.last_stable_offset(self._segs.high_watermark, self._segs.log_start)

    def aborted_transactions(self, start: int, end: int) -> list[tuple[int, int]]:
        """``[(producer id, first offset)]`` of the aborted transactions whose
        records overlap ``[start, end)``, by first offset."""
        with self._lock:
            return self._txns.aborted.search(start, end)

    def aborted_in(self, start: int, end: int) -> list:
        """The aborted transactions (``txn_state.AbortedTxn``: producer,
        first offset, marker offset) overlapping ``[start, end)`` (compaction)."""
        with self._lock:
            return self._txns.aborted.search_full(start, end)

    def open_transactions(self) -> list[tuple[int, int, int]]:
        """``[(producer id, producer epoch, first offset)]``, oldest first."""
        with self._lock:
            return self._txns.state.open_transactions()

    def open_transactions_detail(self) -> list[tuple[int, int, int, int]]:
        """``[(producer id, producer epoch, first offset, opened ms)]``,
        oldest first (opened ms: the first batch's max timestamp, -1 unknown)."""
        with self._lock:
            return self._txns.state.open_detail()

    def transaction_numbers(self) -> tuple[int, int]:
        """``(last stable offset, open transactions)``, under one lock (a
        snapshot's per-partition read: O(1))."""
        with self._lock:
            return (self._txns.last_stable_offset(self._segs.high_watermark, self._segs.log_start),
                    len(self._txns.state.open))

    def open_transaction_of(self, producer_id: int) -> "tuple[int, int] | None":
        """``(producer epoch, first offset)`` of ``producer_id``'s open
        transaction here, None when it has none (O(1))."""
        with self._lock:
            return self._txns.state.open.get(producer_id)

    def txn_producer(self, producer_id: int) -> "tuple[int, int]":
        """``(producer epoch, coordinator epoch)`` as this partition's
        transactional batches and markers left them (-1 each: unknown)."""
        with self._lock:
            return self._txns.state.producers.get(producer_id, (-1, -1))

    def segment_end(self, seg: Segment) -> int:
        """The offset after ``seg``'s last batch."""
        return self._segs.segment_end(seg)

    # -- replication -------------------------------------------------------------
    def set_high_watermark(self, offset: int) -> None:
        """Move the HW (replication); clamped to [log start, log end]."""
        with self._lock:
            self._segs.set_high_watermark(offset)

    def set_replicated(self, on: bool) -> None:
        """On: appends and flushes no longer move the HW; only
        ``set_high_watermark`` does (a cluster's HW is the ISR's minimum).
        Off (single node): the HW catches up at once with the durable end
        (fsync policy) or the log end (lazy) and follows it from then on."""
        with self._lock:
            self.auto_hw = not on
            if not on:
                segs = self._segs
                segs.advance_high_watermark(segs.recovery_point.offset
                                            if self.config.flush == FLUSH_FSYNC else segs.log_end)

    def set_follower(self, on: bool) -> None:
        """A follower's segments roll where its leader's did (the segment base
        given to ``append_replicated``), never by age here, so the replicas
        stay byte-identical file by file."""
        self._follower = on

    def reset_to(self, offset: int, now: "int | None" = None) -> None:
        """Empty the log and restart it at ``offset``, any offset, above the
        log end too (a follower behind its leader's log start). The epoch
        history and producer state are forgotten; the old segments are renamed
        ``.deleted`` and removed after ``file_delete_delay_ms``. Durable when it
        returns (a crash before its checkpoint reopens at ``offset`` too)."""
        if not 0 <= offset <= fmt.MAX_OFFSET:
            raise InvalidRequestError(f"{self.name}: cannot restart at offset {offset}")
        with self._lock:
            self._check_online()
            try:
                reset(self._segs, self.index, self._epochs, offset, self._deadline(now))
            except OSError as exc:
                raise self._fail(f"restarting the log at offset {offset} failed: {exc}") from None
            self._after_cut(emptied=True)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: ``(e, end)``, ``e`` the largest epoch
        <= ``epoch`` in the history, ``end`` the start offset of the next newer
        epoch there, or the log end if ``e`` is the newest; ``(-1, -1)`` when
        no epoch <= ``epoch`` is known (an empty history, or only newer ones)."""
        with self._lock:
            self._check_online()
            return self._epochs.end_offset_for(epoch, self._segs.log_end)

    def assign_epoch(self, epoch: int, *, checkpoint: bool = True) -> bool:
        """Become leader in ``epoch``: ``(epoch, log end)`` enters the history
        at once, before any batch of it is written, and is checkpointed before
        this returns (recovery keeps an epoch that starts at the log end). No-op
        if ``epoch`` is the newest already; FencedLeaderEpochError if older.
        ``checkpoint=False``: the caller checkpoints before any append
        (``assign_epochs``). True if the history changed."""
        with self._lock:
            self._check_online()
            changed = self._epochs.assign(epoch, self._segs.log_end, self.name)
            if changed and checkpoint:
                self._checkpoint_locked()
            return changed

    @staticmethod
    def assign_epochs(pairs) -> None:
        """``assign_epoch`` of many (log, epoch) pairs of logs nobody appends
        to yet, their checkpoints in one transaction (a new topic's leaders)."""
        Log.checkpoint_many([lg for lg, epoch in pairs if lg.assign_epoch(epoch, checkpoint=False)])

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
        parsed = parse_batches(batches, max_batch_bytes=self.config.max_batch_bytes,
                               require_keys=self.config.compacts)
        with self._lock:
            self._check_online()
            self._epochs.check(leader_epoch, self)
            dups = self._appender.duplicates(parsed)
            info = self._written(self._appender.write, parsed, dups, leader_epoch,
                                 now_ms() if now is None else now)
            if info.batches and self.auto_hw and self.config.flush != FLUSH_FSYNC:
                self._segs.advance_high_watermark(self._segs.log_end)
        self._sync_for(info, sync)
        return info

    def append_replicated(self, batches, *, sync: "bool | None" = None,
                          segment_base: "int | None" = None,
                          now: "int | None" = None) -> AppendInfo:
        """A follower's append of whole batches exactly as the leader stored
        them (stamped), in one buffer or a sequence of buffers.

        Checked before anything is written (incoming.check_replicated):
        header, length and CRC of every batch (not ``max_batch_bytes``: what
        the leader took, a follower takes, as in Kafka); the first base offset
        is at or past the log end (a gap of a compacted leader; below it
        InvalidRequestError naming both: truncate or ``reset_to`` first); no
        overlap; epochs never decrease nor go below an epoch of this log that
        holds data. Written unchanged; the index, the
        epochs (each batch's own) and the producer state follow, so a promoted
        follower deduplicates retries. The HW is not moved. Durable on return
        when ``sync`` is true (default: the fsync policy), as ``append``.

        Segments roll as ``append``'s do (this call's size, the segment's
        age) or, given ``segment_base`` (the base of the leader's segment the
        batches were read from), exactly where the leader's did: before the
        first batch if it starts that segment, never otherwise.
        """
        parsed = parse_batches(batches, check_records=False)
        with self._lock:
            self._check_online()
            check_replicated(parsed, self._segs.log_end, self._epochs, self.name)
            info = self._written(self._appender.write_replicated, parsed, segment_base,
                                 now_ms() if now is None else now)
        self._sync_for(info, sync)
        return info

    def append_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                      coordinator_epoch: int, leader_epoch: int, *, sync: "bool | None" = None,
                      now: "int | None" = None) -> AppendInfo:
        """Write a transaction marker of ``producer_id`` (records/control.py:
        a Kafka control batch) in ``leader_epoch``, as ``append`` writes a
        batch (durable on return when ``sync``, the HW as ``append``'s).
        Refused, nothing written: a producer epoch older than the one the
        partition knows for the producer (InvalidProducerEpochError), a
        coordinator epoch older than this producer's last marker's
        (TransactionCoordinatorFencedError), a stale leader epoch. Closes
        the producer's open transaction (an abort enters the aborted index);
        the producer's epoch becomes ``producer_epoch``. A producer with no
        open transaction gets the marker all the same (Kafka's rule)."""
        if not (0 <= producer_id <= fmt.MAX_OFFSET and 0 <= producer_epoch < 1 << 15
                and -(1 << 31) <= coordinator_epoch < 1 << 31):
            raise InvalidRequestError(f"{self.name}: marker fields out of range (producer "
                                      f"{producer_id}, epoch {producer_epoch}, coordinator epoch "
                                      f"{coordinator_epoch})")
        now = now_ms() if now is None else now
        parsed = split_batches(marker_batch(producer_id, producer_epoch, commit,
                                            coordinator_epoch, now))
        with self._lock:
            self._check_online()
            self._epochs.check(leader_epoch, self)
            self._appender.load_producers()
            self._txns.state.check_marker(producer_id, producer_epoch, coordinator_epoch,
                                          self._appender.producers.epoch_of(producer_id))
            info = self._written(self._appender.write, parsed, [None], leader_epoch, now)
            if self.auto_hw and self.config.flush != FLUSH_FSYNC:
                self._segs.advance_high_watermark(self._segs.log_end)
        self._sync_for(info, sync)
        return info

    def _sync_for(self, info: AppendInfo, sync: "bool | None") -> None:
        if self.config.flush == FLUSH_FSYNC if sync is None else sync:
            self._sync_to(info.last_offset + 1)

    def _written(self, write, *args) -> AppendInfo:
        """Run an Appender write; an I/O error becomes the Log's (see ``_io_failed``)."""
        try:
            return write(*args)
        except OSError as exc:
            raise self._io_failed(f"write to {self._segs.active.path}", exc) from None

    # -- durability -------------------------------------------------------------
    def flush(self) -> None:
        """fsync everything appended so far and advance the recovery point."""
        self._sync_to(self._segs.log_end)

    @property
    def fsyncs(self) -> int:
        """fsyncs of segment data so far (group commit shares them)."""
        return self._flusher.fsyncs

    def _sync_to(self, target: int) -> None:
        self._flusher.sync_to(target, self._fsync)
        self._check_online()

    def _fsync(self) -> "int | None":
        """fsync the active segment outside the lock; the offset now durable."""
        target = self.flush_target()
        try:
            target[1].flush()
        except OSError as exc:
            return self._mark_durable(target, exc)
        return self._mark_durable(target)

    def flush_target(self) -> tuple:
        """What an fsync of the active segment, or a barrier covering the
        whole filesystem (storage/shared_sync.py), issued after this call
        makes durable; hand it to ``flushed_by_barrier`` once that returns."""
        with self._lock:
            return self._segs.flushed_point(), self._segs.active

    def flushed_by_barrier(self, target: tuple, exc: "OSError | None" = None) -> None:
        """A barrier issued after ``flush_target`` returned ``target``
        succeeded (``exc`` None: the recovery point and, on a single node,
        the HW advance) or failed (handled as this log's fsync failing:
        raised, the log offline or its unflushed tail cut)."""
        done = self._mark_durable(target, exc)
        if done is not None:
            self._flusher.synced(done)
        self._check_online()

    @property
    def generation(self) -> int:
        """Cuts of this log since it was opened (the journal's entries of an
        older generation are void). Read without the lock."""
        return self._segs.cuts

    def journal_take(self) -> tuple:
        """``(generation, held)``: the appends held past the durable end,
        handed to the journal (``Segments.take_journal``; None: a file sync
        must cover them)."""
        with self._lock:
            return self._segs.cuts, self._segs.take_journal()

    def journaled(self, generation: int, end: int) -> None:
        """The journal made offsets below ``end`` durable (taken in
        ``generation``: after a cut nothing moves); on a single node the HW
        follows."""
        with self._lock:
            if generation != self._segs.cuts or self._offline is not None:
                return
            self._segs.mark_journaled(end)
            if self.auto_hw:
                self._segs.advance_high_watermark(self._segs.durable_end)

    def _mark_durable(self, target: tuple, exc: "OSError | None" = None) -> "int | None":
        point, seg = target
        with self._lock:
            if exc is not None:
                raise self._fsync_failed(seg, exc) from None
            self._segs.mark_flushed(point)
            if self.auto_hw:
                self._segs.advance_high_watermark(point.offset)
            return point.offset if self._offline is None else None

    def _fsync_failed(self, seg: Segment, exc: OSError) -> Exception:
        """A full disk at fsync: the unflushed tail (never acknowledged in
        fsync mode) is cut back to the durable end and the log stays
        online; any other failure takes the partition offline (the page
        cache may have dropped the data: no retry can be trusted)."""
        if exc.errno not in _DISK_FULL:
            return self._fail(f"fsync of {seg.path} failed: {exc}")
        durable = self._segs.durable_end  # fsynced or journaled: acknowledged, kept
        try:
            self._truncate_locked(durable)
        except Exception as cut:  # noqa: BLE001 - nothing else is safe then
            return self._fail(f"fsync of {seg.path} failed ({exc}) and the unflushed tail "
                              f"could not be cut: {cut}")
        return StorageError(f"{self.name}: fsync of {seg.path} failed: {exc.strerror}; offsets "
                            f">= {durable} were not acknowledged and are dropped")

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
            if self._follower or not (self._segs.active.size
                                      and self._appender.aged(self._segs.active, now)):
                return False
            self._roll_locked(now)
            return True

    def _roll_locked(self, now: int, base: "int | None" = None) -> Segment:
        old = self._segs.active
        try:
            new = self._segs.roll(base)
        except OSError as exc:
            raise self._io_failed(f"roll of {old.path}", exc) from None
        if new is old:
            return old
        self._flusher.synced(self._segs.log_end)
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
            self._check_online()
            start = self._located(self._locator.start_of_read, offset, upto)
            if start is None:
                return b""
            return self._located(self._locator.read_from, start[0], start[1], max_bytes, start[2])

    def slice(self, offset: int, max_bytes: int, upto: "int | None" = None) -> "FileSlice | None":
        """Like ``read`` but returns where the bytes lie, for ``sendfile``:
        the same start and offset contract, None where ``read`` returns b"".
        The slice may end inside its last batch when ``max_bytes`` cuts it
        (a reader drops an incomplete trailing batch and fetches again)."""
        with self._lock:
            self._check_online()
            found = self._located(self._locator.slice, offset, max_bytes, upto)
            return None if found is None else FileSlice(*found)

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
        log is emptied and restarts at ``offset``. Durable when it returns.
        A negative offset (an unknown epoch's end, -1) is refused."""
        if offset < 0:
            raise InvalidRequestError(f"{self.name}: cannot truncate to offset {offset}")
        with self._lock:
            self._check_online()
            self._truncate_locked(offset)

    def _truncate_locked(self, offset: int) -> None:
        self._located(truncate_to, self._segs, self.index, self._epochs, self._locator, offset,
                      self._deadline(None))
        self._after_cut()

    def _after_cut(self, emptied: bool = False) -> None:
        segs = self._segs
        rewind_clean_point(self.meta, self.pid, segs.log_end)
        self._flusher.cut(segs.log_end)
        if self.journal is not None:
            try:
                self.journal.cut(self)
            except OSError as exc:
                raise self._fail(f"recording the cut at {segs.log_end} in the journal "
                                 f"failed: {exc}") from None
        if emptied or segs.log_end <= segs.log_start:
            self._txns.reset()
        else:
            self._located(self._txns.rewind, segs, segs.log_start, segs.log_end, self.index)
        self._appender.producers.clear()  # rebuilt from the new tail by the next idempotent append
        self._checkpoint_locked()

    def _deadline(self, now: "int | None") -> int:
        """When segments deleted now may be removed (``file_delete_delay_ms``)."""
        return (now_ms() if now is None else now) + self.config.file_delete_delay_ms

    def delete_before(self, offset: int, now: "int | None" = None, *,
                      checkpoint: bool = True) -> list[Segment]:
        """Retention: the log start becomes ``offset``; sealed segments wholly
        below it are deleted (renamed ``.deleted``, removed after
        ``file_delete_delay_ms``). The active segment is never deleted.
        Raises OffsetOutOfRangeError past the log end. Returns the segments.
        ``checkpoint=False``: the caller checkpoints (``checkpoint_many``,
        one commit for many logs: DeleteRecords); until then a crash keeps
        the old log start, bounded by the first segment left."""
        with self._lock:
            self._check_online()
            start = self._segs.log_start
            try:
                doomed = delete_before(self._segs, self.index, offset, self._deadline(now))
            except OffsetOutOfRangeError as exc:
                raise OffsetOutOfRangeError(f"{self.name}: {exc.message}") from None
            if self._segs.log_start != start:
                self._txns.delete_before(self._segs.log_start)
            if checkpoint and self._segs.log_start != start:
                self._checkpoint_locked()
            return doomed

    def purge_deleted(self, now: "int | None" = None) -> int:
        """Remove ``.deleted`` files whose delay has passed; returns how many."""
        with self._lock:
            return self._segs.purge(now_ms() if now is None else now)

    # -- compaction (storage/compaction.py reads, storage/swap.py installs) ----------------
    @property
    def cuts(self) -> int:
        """Truncations and resets so far: a compaction pass that read the
        log under another count is void (its key map may name records that
        are gone)."""
        return self._segs.cuts

    def install_cleaned(self, cleaned: "Cleaned | None", state: "CleanerState | None",
                        cuts: int, now: "int | None" = None) -> bool:
        """Swap a compacted group in (storage/swap.py, steps 2-4; with
        ``cleaned`` None only ``state`` is stored), under the lock: appends
        and reads wait only for a few renames and one LMDB commit. False
        when the log changed since the compactor read it (nothing done).
        A failure after the swap's commit point takes the partition
        offline (the loader finishes the swap at the next start)."""
        with self._lock:
            self._check_online()
            try:
                done = install(self._segs, self.index, self.meta, self.pid, cleaned, state, cuts,
                               self._deadline(now))
            except SwapFailed as exc:
                raise self._fail(str(exc)) from None
            if done and cleaned is not None:
                self._checkpoint_locked()
            return done

    # -- checkpoints ------------------------------------------------------------------
    def checkpoint(self, *, clean: bool = False) -> None:
        with self._lock:
            self._checkpoint_locked(clean=clean)

    def _checkpoint_locked(self, clean: bool = False) -> None:
        Log.checkpoint_many([self], clean=clean)  # the lock is reentrant

    def _signature(self) -> tuple:
        """What a checkpoint records of the log's offsets and files: equal
        signatures, nothing pending (index rows, segment summaries, leader
        epochs), and a checkpoint would write what the last one wrote."""
        segs = self._segs
        active = segs.active
        return (segs.recovery_point, segs.log_start, segs.high_watermark, segs.log_end,
                segs.first.base_offset, active.base_offset, active.size)

    def on_device(self, dev: int) -> bool:
        """Whether the log's directory is on device ``dev`` (the shared
        barrier's filesystem: shared_sync.py); asked once, the answer kept
        (a slot, not a map keyed by log: 50,000 partitions)."""
        if self._on_dev is None:
            try:
                self._on_dev = os.stat(self.directory).st_dev == dev
            except OSError:
                self._on_dev = False
        return self._on_dev

    def checkpoint_due(self) -> bool:
        """Whether the periodic checkpoint has anything new to write (an idle
        partition's has not: 50,000 idle partitions cost no LMDB writes).
        Read without the lock: a change racing it is seen at the next pass."""
        return (self._ckpt_sig != self._signature() or self.index.dirty or self._epochs.dirty
                or self._segs.has_new_infos or self._txns.dirty)

    def needs_clean_checkpoint(self) -> bool:
        """Whether a clean close must write this log's checkpoint: False only
        when the stored one is clean and what a new one would write (opened
        clean and untouched since, or closed clean already): 50,000 idle
        partitions stop without rewriting 50,000 checkpoints."""
        return not self._ckpt_clean or self.checkpoint_due()

    @staticmethod
    def checkpoint_many(logs: list, *, clean: bool = False) -> None:
        """The checkpoints of ``logs`` (online, of one data dir) in ONE LMDB
        transaction, each taken under its log's lock: one fsync of LMDB for
        a slice of partitions created, or closed, together."""
        if not logs:
            return
        with contextlib.ExitStack() as held:
            for one in logs:
                held.enter_context(one._lock)
            sigs = [one._signature() for one in logs]
            ck.write_checkpoints(logs[0].meta, [(one.pid, one._segs, one.index, one._epochs,
                                                 one._txns) for one in logs], clean=clean)
            for one, sig in zip(logs, sigs):
                one._ckpt_sig, one._ckpt_clean = sig, clean

    def close(self) -> None:
        """Flush, write a clean checkpoint, release descriptors."""
        if self._offline is None:
            self.flush()
            self.checkpoint(clean=True)
        self.release()

    def release(self) -> None:
        """Release the descriptors (after the last checkpoint: ``close``)."""
        with self._lock:
            self._segs.close()

    def remove_files(self) -> None:
        """Delete every file of this log (topic deletion)."""
        with self._lock:
            self._segs.remove_files()
