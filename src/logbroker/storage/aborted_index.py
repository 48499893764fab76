"""The aborted-transaction index of one partition (Kafka's .txnindex), in
LMDB (table ``aidx``, derived: rebuilt from the log when missing or stale).

    aidx   (pid, marker offset) -> (producer id i64, first offset u64, LSO u64)
           (pid, 2^64-1)        -> covered: the log offset the rows are complete up to

Entries are added as abort markers are written (``add``) and wait in memory
(``pending``) until the partition's next checkpoint writes them in its LMDB
transaction, with the covered offset (the offset of the transaction state
snapshot stored beside them, storage/txn_store.py). The loader checks the
covered offset against that snapshot; rows past it are dropped and rebuilt
by replaying the log from the snapshot; a missing or mismatched covered
offset means the whole index is rebuilt from the log start. Rows of markers
below the log start are dropped (retention, DeleteRecords); a truncation
drops the rows of markers at or past the cut.
"""

from __future__ import annotations

import bisect
import struct

from .metastore import PID, PID_U64, MetaStore, delete_prefix
from .txn_state import AbortedTxn

_ROW = struct.Struct(">qQQ")
_U64 = struct.Struct(">Q")
COVERED = (1 << 64) - 1  # the key offset of the covered-offset row


class AbortedIndex:
    """Not thread-safe: the Log calls it under its lock."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_dropped_below", "_dropped_from", "meta", "pending", "pid", "stored")

    def __init__(self, meta: MetaStore, pid: int) -> None:
        self.meta, self.pid = meta, pid
        self.pending: list[AbortedTxn] = []  # by marker offset
        self._dropped_from: "int | None" = None  # LMDB rows with marker offset >= this are void
        self._dropped_below: "int | None" = None  # LMDB rows with marker offset < this are void
        self.stored = True  # LMDB may hold rows (False: known to hold none; searches skip it)

    @property
    def dirty(self) -> bool:
        """Rows or drops wait for the next checkpoint."""
        return bool(self.pending) or self._dropped_from is not None \
            or self._dropped_below is not None

    def add(self, txn: AbortedTxn) -> None:
        self.pending.append(txn)

    def search(self, start: int, end: int) -> list[tuple[int, int]]:
        """``[(producer id, first offset)]`` of the aborted transactions whose
        records overlap ``[start, end)`` (marker at or past ``start``, first
        offset below ``end``), by first offset."""
        return [(t.producer_id, t.first_offset) for t in self.search_full(start, end)]

    def search_full(self, start: int, end: int) -> list[AbortedTxn]:
        """``search`` as ``AbortedTxn`` values, by first offset. Stops at the
        first entry whose LSO is at or past ``end``: no transaction open up
        to then began below ``end``, so none after it overlaps (Kafka's rule)."""
        found, done = [], False
        for txn in (list(self._stored_from(start, end)) if self.stored else ()):
            if txn.first_offset < end:
                found.append(txn)
            if txn.last_stable_offset >= end:
                done = True
                break
        if not done:
            i = bisect.bisect_left([t.last_offset for t in self.pending], start)
            for txn in self.pending[i:]:
                if txn.first_offset < end:
                    found.append(txn)
                if txn.last_stable_offset >= end:
                    break
        found.sort(key=lambda t: (t.first_offset, t.producer_id))
        return found

    def _stored_from(self, start: int, end: int):
        """LMDB rows with marker offset >= ``start`` (not voided), in order,
        up to and with the first whose LSO is at or past ``end``."""
        limit = self._dropped_from
        first_pending = self.pending[0].last_offset if self.pending else None
        with self.meta.read() as txn:
            cur = txn.cursor(db=self.meta.db("aidx"))
            low = max(start, self._dropped_below or 0)
            if not cur.set_range(PID_U64.pack(self.pid, low)):
                return
            prefix = PID.pack(self.pid)
            for key, value in cur:
                if not key.startswith(prefix):
                    return
                last = PID_U64.unpack(key)[1]
                if last == COVERED or (limit is not None and last >= limit) \
                        or (first_pending is not None and last >= first_pending):
                    return
                producer, first, lso = _ROW.unpack(value)
                yield AbortedTxn(producer, first, last, lso)
                if lso >= end:
                    return

    def truncate(self, offset: int) -> None:
        """Forget transactions whose marker is at or past ``offset``."""
        self.pending = [t for t in self.pending if t.last_offset < offset]
        self._dropped_from = offset if self._dropped_from is None else min(offset,
                                                                           self._dropped_from)

    def delete_before(self, offset: int) -> None:
        """Forget transactions whose marker is below ``offset`` (the log start)."""
        self.pending = [t for t in self.pending if t.last_offset >= offset]
        self._dropped_below = max(offset, self._dropped_below or 0)

    def clear(self) -> None:
        self.pending = []
        self._dropped_from = 0

    def persist(self, txn, covered: int) -> None:
        """Write pending rows, apply drops and store ``covered`` in the
        caller's transaction."""
        db, prefix = self.meta.db("aidx"), PID.pack(self.pid)
        if self._dropped_below is not None:
            delete_prefix(txn, db, prefix, stop=PID_U64.pack(self.pid, self._dropped_below))
        if self._dropped_from is not None:
            delete_prefix(txn, db, prefix, start=PID_U64.pack(self.pid, self._dropped_from),
                          stop=PID_U64.pack(self.pid, COVERED))
        for t in self.pending:
            txn.put(PID_U64.pack(self.pid, t.last_offset),
                    _ROW.pack(t.producer_id, t.first_offset, t.last_stable_offset), db=db)
        txn.put(PID_U64.pack(self.pid, COVERED), _U64.pack(covered), db=db)
        self.stored = self.stored or bool(self.pending)
        self.pending = []
        self._dropped_from = self._dropped_below = None

    def check_stored(self) -> None:
        """Learn whether LMDB holds any row of this partition (at load: a
        partition that never saw an abort then reads nothing per search)."""
        with self.meta.read() as txn:
            cur = txn.cursor(db=self.meta.db("aidx"))
            self.stored = bool(cur.set_range(PID.pack(self.pid))) and \
                PID_U64.unpack(cur.key())[0] == self.pid and \
                PID_U64.unpack(cur.key())[1] != COVERED

    def covered(self) -> "int | None":
        """The covered offset stored in LMDB, None when there is none."""
        with self.meta.read() as txn:
            raw = txn.get(PID_U64.pack(self.pid, COVERED), db=self.meta.db("aidx"))
        return None if raw is None else _U64.unpack(raw)[0]


def iter_aborted(meta: MetaStore, pid: int):
    """The stored rows of ``pid`` as ``AbortedTxn`` (read-only tools)."""
    if not meta.has("aidx"):
        return
    with meta.read() as txn:
        cur = txn.cursor(db=meta.db("aidx"))
        if not cur.set_range(PID.pack(pid)):
            return
        for key, value in cur:
            if not key.startswith(PID.pack(pid)):
                return
            last = PID_U64.unpack(key)[1]
            if last == COVERED or len(value) != _ROW.size:
                continue
            producer, first, lso = _ROW.unpack(value)
            yield AbortedTxn(producer, first, last, lso)
