"""The write path of one log: batches laid out at the end of the active
segment, with the index, the leader epochs and the idempotent producer
state kept in step.

Two ways in: ``write`` (a producer's batches: stamped with their offsets
and the leader's epoch, retried duplicates skipped) and ``write_replicated``
(a leader's batches as it stored them: written unchanged, each batch's own
epoch recorded). Both write with one ``pwritev`` (``Segments.append``),
after rolling the active segment if due. The checks come first, from
incoming.py; the Appender only writes. Not thread-safe: the Log calls it
under its lock and turns an OSError of the write into its own error.
"""

from __future__ import annotations

from typing import Callable

from ..records import format as fmt
from .config import LogConfig
from .epochs import LeaderEpochs
from .incoming import Parsed
from .index import PartitionIndex
from .producer_state import TAIL_SCAN_BYTES, ProducerStates
from .results import AppendInfo
from .segment import Segment
from .segments import Segments
from .txn_store import Transactions


class Appender:
    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_roll", "config", "epochs", "index", "producers", "segments", "txns")

    def __init__(self, config: LogConfig, segments: Segments, index: PartitionIndex,
                 epochs: LeaderEpochs, roll: Callable[..., Segment],
                 txns: Transactions) -> None:
        """``roll(now, base=None)`` seals the active segment (the Log's roll:
        it fsyncs and checkpoints) and returns the new one (of ``base``).
        ``txns``: the partition's transactions, kept in step with each batch
        that has a transactional or control bit."""
        self.config, self.segments, self.index, self.epochs = config, segments, index, epochs
        self.producers = ProducerStates()
        self.txns = txns
        self._roll = roll

    def load_producers(self) -> None:
        """Rebuild the idempotent state from the log's tail, if not yet, and
        give it the epochs the transaction state knows (markers' bumps)."""
        if self.producers.loaded:
            return
        self.producers.load(h for seg in self.segments.tail(TAIL_SCAN_BYTES) if seg.size
                            for _, h in seg.scan(0, seg.size, verify=False))
        for pid, (epoch, _) in self.txns.state.producers.items():
            self.producers.bump(pid, epoch)

    def duplicates(self, parsed: Parsed) -> list["int | None"]:
        """For each batch, its original base offset if it retries one of its
        producer's last batches, else None; raises (nothing changed) for a
        stale producer epoch or a sequence gap. The state is rebuilt from the
        log's tail the first time an idempotent batch comes."""
        if all(h.producer_id < 0 for _, h in parsed):
            return [None] * len(parsed)
        self.load_producers()
        return self.producers.check_all([h for _, h in parsed])

    def write(self, parsed: Parsed, dups: list, epoch: int, now: int) -> AppendInfo:
        """Stamp and write the batches that are not duplicates, at the log end."""
        total = 0
        for (mv, _), dup in zip(parsed, dups):
            if dup is None:
                total += len(mv)  # mv: the whole batch
        seg = self._active_for(total, now) if total else self.segments.active
        offset, pos, iov, written, offsets, max_ts = self.segments.log_end, seg.size, [], [], [], -1
        for (mv, h), dup in zip(parsed, dups):
            if dup is not None:
                offsets.append((dup, dup + h.record_count - 1))
                continue
            iov += (fmt.stamp(mv, offset, epoch), mv[fmt.STAMP_SIZE:])
            written.append((h, offset, pos, mv))
            offsets.append((offset, offset + h.record_count - 1))
            if h.max_timestamp > max_ts:
                max_ts = h.max_timestamp
            offset, pos = offset + h.record_count, pos + len(mv)
        if written:
            self.segments.append(iov, total, offset, max_ts, now)
            self._wrote(written, seg)
            self.epochs.observe(epoch, written[0][1])
        return AppendInfo(offsets[0][0], offsets[-1][1], max_ts, len(written), total)

    def write_replicated(self, parsed: Parsed, segment_base: "int | None", now: int) -> AppendInfo:
        """Write the leader's batches unchanged (checked by
        ``incoming.check_replicated``). Rolls as ``write`` does, or, given
        ``segment_base``, only where the leader's segment of that base starts."""
        first, last = parsed[0][1], parsed[-1][1]
        total, max_ts = sum(h.size for _, h in parsed), max(h.max_timestamp for _, h in parsed)
        if segment_base is None:
            seg = self._active_for(total, now)
        else:
            seg = self.segments.active
            if seg.size and seg.base_offset < segment_base <= first.base_offset:
                seg = self._roll(now, segment_base)
        written, pos = [], seg.size
        for mv, h in parsed:
            written.append((h, h.base_offset, pos, mv))
            pos += h.size
        self.segments.append([mv for mv, _ in parsed], total, last.next_offset, max_ts, now)
        if first.leader_epoch < self.epochs.latest:  # newer epochs with no batch give way
            self.epochs.truncate_from(first.base_offset)
        for h, offset, _, _ in self._wrote(written, seg):
            self.epochs.observe(h.leader_epoch, offset)
        return AppendInfo(first.base_offset, last.last_offset, max_ts, len(parsed), total)

    def _wrote(self, written: list, seg: Segment) -> list:
        """Index, producer and transaction state of ``(header, offset,
        position, bytes)`` just written. A batch without a transactional or
        control bit costs one test more than before transactions."""
        for h, offset, pos, mv in written:
            self.index.on_batch(offset, seg.base_offset, pos, h.size, h.max_timestamp)
            if h.producer_id >= 0:
                if h.attributes & fmt.TXN_BITS:
                    self._txn_batch(h, offset, mv)
                else:
                    self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence,
                                          h.record_count, offset)
        return written

    def _txn_batch(self, h: fmt.BatchHeader, offset: int, mv) -> None:
        """A transactional batch (its transaction opens, its sequence counts)
        or a marker (the transaction closes, the producer's epoch is the
        marker's: older ones are fenced)."""
        self.txns.on_batch(h, offset, mv)
        if fmt.txn_flags(h.magic, h.attributes)[1]:
            self.producers.bump(h.producer_id, h.producer_epoch)
        else:
            self.producers.record(h.producer_id, h.producer_epoch, h.base_sequence,
                                  h.record_count, offset)

    def _active_for(self, total: int, now: int) -> Segment:
        """The segment ``total`` more bytes go to: a new one if the active one
        holds data and would pass ``segment_bytes`` or is older than ``segment_ms``."""
        seg = self.segments.active
        if seg.size and (seg.size + total > self.config.segment_bytes or self.aged(seg, now)):
            return self._roll(now)
        return seg

    def aged(self, seg: Segment, now: int) -> bool:
        return seg.created_ms >= 0 and now - seg.created_ms >= self.config.segment_ms
