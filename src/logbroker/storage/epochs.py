"""Leader-epoch history of one partition: epoch -> first offset written in it.

Kafka's LeaderEpochFileCache, small. Every batch header carries its epoch
too, so the history is stored with checkpoints (not per append: an LMDB
commit is an fsync) and recovery re-adds the epochs of the batches it scans
past the recovery point. Not thread-safe: the Log calls it under its lock.

Entries are ascending in epoch and in start offset, at most one per start
offset. The newest entry may start at the log end with no batch yet: a new
leader's epoch (``assign``), or one whose batches a crash took; a follower
that then receives older-epoch batches there from the current leader drops
it (``check_replicated``), as Kafka drops non-monotonic entries.
"""

from __future__ import annotations

from ..errors import FencedLeaderEpochError, InvalidRequestError
from . import checkpoints as ck
from .metastore import MetaStore


class LeaderEpochs:
    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_entries", "dirty")

    def __init__(self, entries: "list[tuple[int, int]] | None" = None, *, dirty: bool = False) -> None:
        self._entries = list(entries or [])
        self.dirty = dirty  # a change not yet in LMDB

    @property
    def entries(self) -> tuple[tuple[int, int], ...]:
        """``((epoch, start offset), ...)`` ascending."""
        return tuple(self._entries)

    @property
    def latest(self) -> int:
        """The newest epoch, -1 when none was written."""
        return self._entries[-1][0] if self._entries else -1

    def check(self, epoch: int, log) -> None:
        """Refuse an append in an epoch older than the newest one (the error
        names ``log``: its name is built only then, not on every append)."""
        if epoch < self.latest:
            raise InvalidRequestError(f"{log.name}: leader epoch {epoch} is older than the "
                                      f"log's {self.latest}")

    def check_replicated(self, epoch: int, log_end: int, name: str) -> None:
        """Refuse a follower's batch of ``epoch`` at ``log_end`` if a newer
        epoch already holds data; newer epochs with no batch (starting at the
        log end) give way to the leader's log (``truncate_from(log_end)``
        after the write drops them)."""
        newer = [start for e, start in self._entries if e > epoch]
        if newer and newer[0] < log_end:
            raise InvalidRequestError(f"{name}: a batch of leader epoch {epoch} at offset "
                                      f"{log_end} is older than the log's epoch {self.latest}")

    def observe(self, epoch: int, start: int) -> None:
        """A batch of ``epoch`` starts at ``start``: a newer epoch begins there
        (replacing a newer-but-empty entry that starts at the same offset)."""
        if epoch > self.latest:
            self._add(epoch, start)

    def assign(self, epoch: int, start: int, name: str) -> bool:
        """A new leader's epoch begins at ``start`` (the log end) before any
        batch is written in it. Returns False (nothing changed) if ``epoch``
        is already the newest; raises FencedLeaderEpochError if it is older."""
        if epoch == self.latest:
            return False
        if epoch < self.latest:
            raise FencedLeaderEpochError(f"{name}: cannot become leader in epoch {epoch}: the "
                                         f"log is already in epoch {self.latest}")
        self._add(epoch, start)
        return True

    def _add(self, epoch: int, start: int) -> None:
        while self._entries and self._entries[-1][1] >= start:
            self._entries.pop()
        self._entries.append((epoch, start))
        self.dirty = True

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: ``(e, end)`` where ``e`` is the
        largest epoch <= ``epoch`` in the history and ``end`` the start of the
        next newer epoch, or ``log_end`` when ``e`` is the newest; ``(-1, -1)``
        when the history has no epoch <= ``epoch`` (empty, or all newer)."""
        found = (-1, -1)
        for i, (e, _) in enumerate(self._entries):
            if e > epoch:
                break
            nxt = self._entries[i + 1][1] if i + 1 < len(self._entries) else log_end
            found = (e, nxt)
        return found

    def truncate_from(self, end: int) -> None:
        """Forget epochs that start at or after ``end`` (the log was cut there)."""
        self._keep(lambda start: start < end)

    def truncate_after(self, end: int) -> None:
        """Forget epochs that start after ``end`` (recovery: one starting
        exactly at the recovered log end is an epoch begun with no batch yet,
        e.g. a new leader's, and stays)."""
        self._keep(lambda start: start <= end)

    def clear(self) -> None:
        """Forget the whole history (the log restarts empty elsewhere)."""
        self._keep(lambda start: False)

    def _keep(self, wanted) -> None:
        kept = [(e, s) for e, s in self._entries if wanted(s)]
        if kept != self._entries:
            self._entries, self.dirty = kept, True

    def store(self, txn, meta: MetaStore, pid: int) -> bool:
        """Write the history into ``txn`` if it changed; True if it did (call
        ``stored()`` once the transaction committed)."""
        if self.dirty:
            ck.store_epochs(txn, meta, pid, self._entries)
        return self.dirty

    def stored(self) -> None:
        self.dirty = False
