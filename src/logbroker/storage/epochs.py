"""Leader-epoch history of one partition: epoch -> first offset written in it.

Kafka's LeaderEpochFileCache, small. Every batch header carries its epoch
too, so the history is stored with checkpoints (not per append: an LMDB
commit is an fsync) and recovery re-adds the epochs of the batches it scans
past the recovery point. Not thread-safe: the Log calls it under its lock.
"""

from __future__ import annotations

from ..errors import InvalidRequestError
from . import checkpoints as ck
from .metastore import MetaStore


class LeaderEpochs:
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

    def check(self, epoch: int, name: str) -> None:
        """Refuse an append in an epoch older than the newest one."""
        if epoch < self.latest:
            raise InvalidRequestError(f"{name}: leader epoch {epoch} is older than the log's "
                                      f"{self.latest}")

    def observe(self, epoch: int, start: int) -> None:
        """A batch of ``epoch`` starts at ``start``: a newer epoch begins there."""
        if epoch > self.latest:
            self._entries.append((epoch, start))
            self.dirty = True

    def truncate_from(self, end: int) -> None:
        """Forget epochs that start at or after ``end`` (the log was cut there)."""
        kept = [(e, s) for e, s in self._entries if s < end]
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
