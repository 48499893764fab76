"""The transactions of one partition, kept with the log: the state
(txn_state.py), the aborted index (aborted_index.py), their snapshots in
LMDB and their rebuild from the log.

    txns   (pid, offset) -> msgpack snapshot of the TxnState after the log up to offset

A snapshot is written with every checkpoint, at the log end then, in the
checkpoint's LMDB transaction (with the aborted index's pending rows and its
covered offset = that log end). Rows older than the newest one at or below the
recovery point are dropped then (a crash keeps everything up to the
recovery point, so that one is always usable), and rows past the log end
(a truncation's) too.

Loading (``load``): the newest snapshot at or below the recovered log end,
the aborted index cut back to it, then the batches after it replayed
(headers; a control batch's one record read). No snapshot at or below the
end (a truncation past them), one below the first segment, or an aborted
index whose covered offset is missing or below the snapshot's (the derived
table lost or stale): everything is replayed from the log start, the
producers' epochs seeded from the snapshot. No snapshot at all: a log
written before transactions existed (every log since gets one with its
first checkpoint), nothing is read. The snapshot table is primary, kept out
of the derived tables: an open transaction whose first records
DeleteRecords removed lives only there.
"""

from __future__ import annotations

import logging

import msgpack

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.walker import scan_file
from .aborted_index import AbortedIndex
from .metastore import PID, PID_U64, MetaStore, delete_prefix
from .txn_state import AbortedTxn, TxnState, replay

log = logging.getLogger(__name__)
WINDOW = 1 << 20
MAX_PRODUCERS = 10_000  # producer epochs a partition remembers without an open transaction


class Transactions:
    """State + aborted index of one partition. Not thread-safe: the Log
    calls it under its lock."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("aborted", "meta", "pid", "state")

    def __init__(self, meta: MetaStore, pid: int, state: "TxnState | None" = None,
                 aborted: "AbortedIndex | None" = None) -> None:
        self.meta, self.pid = meta, pid
        self.state = TxnState() if state is None else state
        self.aborted = AbortedIndex(meta, pid) if aborted is None else aborted

    @property
    def dirty(self) -> bool:
        """Aborted-index rows wait for the next checkpoint."""
        return self.aborted.dirty

    # -- the write path ----------------------------------------------------------------
    def on_batch(self, header: fmt.BatchHeader, offset: int, data) -> None:
        """A batch with a transactional or control bit written at ``offset``."""
        aborted = self.state.on_batch(header, offset, data)
        if aborted is not None:
            self.aborted.add(aborted)

    # -- queries -----------------------------------------------------------------------
    def last_stable_offset(self, high_watermark: int, log_start: int) -> int:
        """Kafka's: the oldest open transaction's first offset (never below
        the log start), capped by the high watermark."""
        first = self.state.first_unstable()
        return high_watermark if first is None else min(high_watermark, max(first, log_start))

    # -- cuts --------------------------------------------------------------------------
    def rewind(self, segments, log_start: int, end: int, index=None) -> None:
        """The log now ends at ``end`` (a truncation): the state becomes the
        newest stored snapshot at or below ``end`` replayed up to ``end``."""
        snap_offset, snap = newest_snapshot(self.meta, self.pid, end)
        first = _first_base(segments)
        if snap is None or snap_offset < first:  # retention may have taken its markers
            self.aborted.clear()
            self.state = replay_segments(_seeded(snap, self.state), segments, first, end,
                                         self.aborted.add)
            return
        self.aborted.truncate(snap_offset)
        self.state = replay_segments(TxnState.from_snapshot(snap), segments, snap_offset, end,
                                     self.aborted.add, index)

    def reset(self) -> None:
        """The log was emptied (``reset_to`` or a truncation below the log start)."""
        self.state = TxnState()
        self.aborted.clear()

    def delete_before(self, log_start: int) -> None:
        """The log start moved to ``log_start``: aborted transactions whose
        marker lies below it go; open ones stay (DeleteRecords below an open
        transaction keeps it open: its marker is still to come)."""
        self.aborted.delete_before(log_start)

    # -- persistence -------------------------------------------------------------------
    def persist(self, txn, log_end: int, recovery_point: int) -> None:
        """Write the snapshot at ``log_end`` and the aborted index in the
        checkpoint's transaction; prune snapshots no recovery needs."""
        self.state.forget_producers(MAX_PRODUCERS)
        db, prefix = self.meta.db("txns"), PID.pack(self.pid)
        txn.put(PID_U64.pack(self.pid, log_end), msgpack.packb(self.state.snapshot()), db=db)
        delete_prefix(txn, db, prefix, start=PID_U64.pack(self.pid, log_end + 1))
        keep = _newest_at_or_below(txn, db, self.pid, recovery_point)
        if keep is not None:
            delete_prefix(txn, db, prefix, stop=PID_U64.pack(self.pid, keep))
        self.aborted.persist(txn, log_end)


def newest_snapshot(meta: MetaStore, pid: int, offset: int) -> tuple[int, "dict | None"]:
    """``(offset, snapshot)`` of the newest stored snapshot at or below ``offset``."""
    with meta.read() as txn:
        at = _newest_at_or_below(txn, meta.db("txns"), pid, offset)
        if at is None:
            return -1, None
        raw = txn.get(PID_U64.pack(pid, at), db=meta.db("txns"))
    try:
        return at, msgpack.unpackb(raw, strict_map_key=False)
    except (ValueError, msgpack.UnpackException):
        log.warning("partition %d: transaction snapshot at %d unreadable; rebuilding", pid, at)
        return -1, None


def _any_snapshot(meta: MetaStore, pid: int) -> bool:
    with meta.read() as txn:
        cur = txn.cursor(db=meta.db("txns"))
        return cur.set_range(PID.pack(pid)) and cur.key().startswith(PID.pack(pid))


def _newest_at_or_below(txn, db, pid: int, offset: int) -> "int | None":
    cur = txn.cursor(db=db)
    found = cur.prev() if cur.set_range(PID_U64.pack(pid, offset + 1)) else cur.last()
    if not found or not cur.key().startswith(PID.pack(pid)):
        return None
    return PID_U64.unpack(cur.key())[1]


def _first_base(segments) -> int:
    for seg in segments:
        return seg.base_offset
    return 0


def replay_segments(state: TxnState, segments, start: int, end: int, on_abort,
                    index=None) -> TxnState:
    """``state`` (the log's up to ``start``) with the batches of
    ``segments`` in ``[start, end)`` applied (headers only; a control batch's
    bytes for its marker). Segments wholly outside the range are not read;
    the one holding ``start`` is read from ``index``'s entry for it (a
    ``PartitionIndex``), if given. CorruptRecordError names the file and byte."""
    segs = list(segments)
    for i, seg in enumerate(segs):
        seg_end = segs[i + 1].base_offset if i + 1 < len(segs) else end
        if seg_end <= start or seg.base_offset >= end or not seg.size:
            continue
        pos = 0
        if index is not None and seg.base_offset < start:
            entry = index.lookup(start)
            if entry is not None and entry[1] == seg.base_offset:
                pos = entry[2]
        try:
            batches = ((h, (lambda d=data: d)) for _, h, data in
                       scan_file(seg.read, pos, seg.size, verify=False, window=WINDOW)
                       if start <= h.base_offset < end)
            replay(state, batches, on_abort)
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{seg.path} at byte {exc.position}: {exc.message}",
                                     position=exc.position) from None
    return state


def load(meta: MetaStore, pid: int, segments, log_start: int, end: int,
         index=None) -> Transactions:
    """The transactions of a loaded log ending at ``end`` (module docstring)."""
    aborted = AbortedIndex(meta, pid)
    aborted.check_stored()
    snap_offset, snap = newest_snapshot(meta, pid, end)
    covered = aborted.covered()
    first = _first_base(segments)
    if snap is None and not _any_snapshot(meta, pid):
        return Transactions(meta, pid, TxnState(), aborted)  # written before transactions
    if snap is None or snap_offset < first:
        log.warning("partition %d: no usable transaction snapshot at or below %d; rebuilding "
                    "the transaction state from the log", pid, end)
        aborted.clear()
        state = replay_segments(_seeded(snap), segments, first, end, aborted.add)
        return Transactions(meta, pid, state, aborted)
    if covered is None or covered < snap_offset:
        log.warning("partition %d: aborted-transaction index stale (covered %s, snapshot %d); "
                    "rebuilding it from the log", pid, covered, snap_offset)
        aborted.clear()  # the open ones come from the snapshot: its first records may be gone
        replay_segments(_seeded(snap), segments, first, snap_offset, aborted.add)
    elif covered > snap_offset:
        # rows past the snapshot: the log was cut back (persist writes none at or past
        # ``covered``, and a clean close's snapshot is at ``covered``: nothing to drop)
        aborted.truncate(snap_offset)
    state = replay_segments(TxnState.from_snapshot(snap), segments, snap_offset, end,
                            aborted.add, index)
    return Transactions(meta, pid, state, aborted)


def _seeded(snap: "dict | None", known: "TxnState | None" = None) -> TxnState:
    """A state for a replay from the log start: the producers' epochs of a
    snapshot and of ``known`` (the markers that set them may be gone),
    nothing open."""
    state = TxnState()._own()
    if snap:
        state.producers.update(TxnState.from_snapshot(snap).producers)
    if known is not None:
        for pid, (epoch, coord) in known.producers.items():
            old = state.producers.get(pid, (-1, -1))
            state.producers[pid] = (max(epoch, old[0]), max(coord, old[1]))
    return state


__all__ = ["AbortedTxn", "Transactions", "load", "newest_snapshot", "replay_segments"]
