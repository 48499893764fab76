"""The sparse offset index and the time index of one partition (derived).

Entries are added as batches are appended, one per ``index_interval_bytes``
and always for the first batch of a segment. New entries wait in memory
(``pending``) and reach LMDB with the partition's next checkpoint, in the
same transaction, so the index on disk always covers at least up to the
persisted recovery point. Everything here can be rebuilt from segments; a
lookup is only a hint that the Log checks against the batch header it finds.

    offset index: batch base offset -> (segment base offset, byte position)
    time index:   max timestamp so far -> batch base offset (monotonic both ways)
"""

from __future__ import annotations

import bisect
import struct

from .metastore import PID, PID_U64, MetaStore, delete_prefix, iter_prefix

_POS = struct.Struct(">QI")
_U64 = struct.Struct(">Q")
_TS_BIAS = 1 << 63


def _ts_key(pid: int, ts: int) -> bytes:
    return PID_U64.pack(pid, max(0, min(ts + _TS_BIAS, (1 << 64) - 1)))


class PartitionIndex:
    """Offset and time index of partition ``pid``: LMDB rows plus pending ones."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = (
        "_dropped_below", "_dropped_from", "_since", "interval", "last_time", "max_seen", "meta",
        "pending", "pending_time", "pid"
    )

    def __init__(self, meta: MetaStore, pid: int, interval: int = 4096) -> None:
        self.meta, self.pid, self.interval = meta, pid, interval
        self.max_seen = -1 << 63  # largest batch max timestamp seen (the time entries' value)
        self._since = interval  # bytes appended since the last entry
        self.pending: list[tuple[int, int, int]] = []  # (offset, segment, pos), ascending
        self.pending_time: list[tuple[int, int]] = []  # (ts, offset), ascending both
        self.last_time = -1 << 63  # largest timestamp with a time entry
        self._dropped_from: "int | None" = None  # LMDB rows >= this offset are void
        self._dropped_below: "int | None" = None  # LMDB rows < this offset are void

    def add(self, offset: int, segment: int, position: int, max_timestamp: int) -> None:
        self.pending.append((offset, segment, position))
        if max_timestamp > self.last_time:
            self.last_time = max_timestamp
            self.pending_time.append((max_timestamp, offset))

    def on_batch(self, offset: int, segment: int, position: int, size: int,
                 max_timestamp: int) -> None:
        """A batch of ``size`` bytes was written at ``position`` of ``segment``:
        index it if it opens the segment or ``interval`` bytes passed since the
        last entry. The one place the index cadence is decided."""
        self.max_seen = max(self.max_seen, max_timestamp)
        if position == 0 or self._since >= self.interval:
            self.add(offset, segment, position, self.max_seen)
            self._since = 0
        self._since += size

    def restart_cadence(self) -> None:
        """The next batch gets an entry (after a reopen, a cut or a rebuild)."""
        self._since = self.interval

    def lookup(self, offset: int) -> "tuple[int, int, int] | None":
        """The entry with the largest batch offset <= ``offset``, or None."""
        i = bisect.bisect_right(self.pending, (offset, 1 << 64, 0))
        if i:
            return self.pending[i - 1]
        limit = offset if self._dropped_from is None else min(offset, self._dropped_from - 1)
        if limit < 0:
            return None
        with self.meta.read() as txn:
            cur = txn.cursor(db=self.meta.db("oidx"))
            if cur.set_range(PID_U64.pack(self.pid, limit + 1)):
                found = cur.prev()
            else:
                found = cur.last()
            if not found or not cur.key().startswith(PID.pack(self.pid)):
                return None
            key_offset = PID_U64.unpack(cur.key())[1]
            if self._dropped_below is not None and key_offset < self._dropped_below:
                return None
            return (key_offset, *_POS.unpack(cur.value()))

    def lookup_time(self, ts: int) -> "int | None":
        """Offset of the last time entry with timestamp < ``ts`` (scan start), or None."""
        i = bisect.bisect_left(self.pending_time, (ts, -1))
        if i:
            return self.pending_time[i - 1][1]
        with self.meta.read() as txn:
            cur = txn.cursor(db=self.meta.db("tidx"))
            found = cur.prev() if cur.set_range(_ts_key(self.pid, ts)) else cur.last()
            if not found or not cur.key().startswith(PID.pack(self.pid)):
                return None
            offset = _U64.unpack(cur.value())[0]
        if self._dropped_from is not None and offset >= self._dropped_from:
            return None
        if self._dropped_below is not None and offset < self._dropped_below:
            return None
        return offset

    def truncate(self, offset: int) -> None:
        """Forget entries for batches at offsets >= ``offset``."""
        self.pending = [e for e in self.pending if e[0] < offset]
        self.pending_time = [e for e in self.pending_time if e[1] < offset]
        self._dropped_from = offset if self._dropped_from is None else min(offset, self._dropped_from)
        self.last_time = self.pending_time[-1][0] if self.pending_time else -1 << 63

    def delete_before(self, offset: int) -> None:
        """Forget entries for batches at offsets < ``offset`` (retention)."""
        self.pending = [e for e in self.pending if e[0] >= offset]
        self.pending_time = [e for e in self.pending_time if e[1] >= offset]
        self._dropped_below = max(offset, self._dropped_below or 0)

    def replace_range(self, txn, start: int, end: int, entries) -> None:
        """Compaction: the offset entries of batches in ``[start, end)``
        become ``entries`` (``(offset, segment, position)``, ascending), in
        the caller's transaction. Time entries stay: they are scan starts,
        and a scan from an offset in a gap finds the next batch."""
        self.pending = [e for e in self.pending if not start <= e[0] < end]
        delete_prefix(txn, self.meta.db("oidx"), PID.pack(self.pid),
                      start=PID_U64.pack(self.pid, start), stop=PID_U64.pack(self.pid, end))
        for offset, segment, pos in entries:
            txn.put(PID_U64.pack(self.pid, offset), _POS.pack(segment, pos), db=self.meta.db("oidx"))

    def clear(self) -> None:
        """Forget everything (before a rebuild)."""
        self.pending, self.pending_time = [], []
        self.last_time = self.max_seen = -1 << 63
        self._since = self.interval
        self._dropped_from = 0

    @property
    def dirty(self) -> bool:
        """Rows or drops wait for the next checkpoint (``persist``)."""
        return bool(self.pending or self.pending_time or self._dropped_from is not None
                    or self._dropped_below is not None)

    def persist(self, txn) -> None:
        """Write pending entries and apply drops inside the caller's transaction."""
        oidx, tidx = self.meta.db("oidx"), self.meta.db("tidx")
        prefix = PID.pack(self.pid)
        if self._dropped_below is not None:
            delete_prefix(txn, oidx, prefix, stop=PID_U64.pack(self.pid, self._dropped_below))
            self._delete_time(txn, lambda off: off < self._dropped_below, forward=True)
        if self._dropped_from is not None:
            delete_prefix(txn, oidx, prefix, start=PID_U64.pack(self.pid, self._dropped_from))
            self._delete_time(txn, lambda off: off >= self._dropped_from, forward=False)
        for offset, segment, pos in self.pending:
            txn.put(PID_U64.pack(self.pid, offset), _POS.pack(segment, pos), db=oidx)
        for ts, offset in self.pending_time:
            txn.put(_ts_key(self.pid, ts), _U64.pack(offset), db=tidx)
        self.pending, self.pending_time = [], []
        self._dropped_from = self._dropped_below = None

    def _delete_time(self, txn, doomed, *, forward: bool) -> None:
        """Delete time rows from one end of this pid's range while ``doomed(offset)``."""
        db = self.meta.db("tidx")
        cur = txn.cursor(db=db)
        prefix = PID.pack(self.pid)
        if forward:
            rows = cur.iternext() if cur.set_range(prefix) else iter(())
        else:
            found = cur.set_range(PID.pack(self.pid + 1))
            ok = cur.prev() if found else cur.last()
            rows = cur.iterprev() if ok else iter(())
        keys = []
        for key, value in rows:
            if not key.startswith(prefix) or not doomed(_U64.unpack(value)[0]):
                break
            keys.append(key)
        for key in keys:
            txn.delete(key, db=db)

    def has(self, offset: int) -> bool:
        """Whether an entry exists for the batch at exactly ``offset``."""
        entry = self.lookup(offset)
        return entry is not None and entry[0] == offset

    def load_last_time(self) -> None:
        """Set ``last_time`` to the newest live time entry, so entries stay monotonic."""
        if self.pending_time:
            self.last_time = self.pending_time[-1][0]
            return
        self.last_time = -1 << 63
        with self.meta.read() as txn:
            cur = txn.cursor(db=self.meta.db("tidx"))
            ok = cur.prev() if cur.set_range(PID.pack(self.pid + 1)) else cur.last()
            if not ok:
                return
            for key, value in cur.iterprev():
                if not key.startswith(PID.pack(self.pid)):
                    return
                offset = _U64.unpack(value)[0]
                if self._dropped_from is None or offset < self._dropped_from:
                    self.last_time = PID_U64.unpack(key)[1] - _TS_BIAS
                    return


def iter_entries(meta: MetaStore, pid: int):
    """Offset-index rows of ``pid`` as stored in LMDB: ``(offset, segment, position)``
    in offset order, or the raw value bytes of a malformed row (read-only tools)."""
    with meta.read() as txn:
        for key, value in iter_prefix(txn, meta.db("oidx"), PID.pack(pid)):
            try:
                yield (PID_U64.unpack(key)[1], *_POS.unpack(value))
            except struct.error:
                yield bytes(value)

