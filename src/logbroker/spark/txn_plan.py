"""read_committed over a data dir, for the planner (spark/plan.py): where a
partition's stable records end and which aborted transactions lie in a
range — read-only, from the broker's LMDB and segment files, never
written, while the broker may be appending.

The partition's transaction state at its checkpointed high watermark is
the newest snapshot at or below it (storage/txn_store.py) with the
batches after it, up to the high watermark, replayed (headers; a marker's
one record). The last stable offset is the first offset of the oldest
transaction still open there, else the high watermark. Aborted
transactions: the aborted index's rows (storage/aborted_index.py) plus
those the replay found (an index row is written with a later checkpoint),
each once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..storage.aborted_index import AbortedIndex
from ..storage.metastore import MetaStore
from ..storage.txn_state import TxnState
from ..storage.txn_store import newest_snapshot, replay_segments
from .scan import list_segments


@dataclass(frozen=True)
class _FileSegment:
    """What ``replay_segments`` reads of a segment file: base, size, path, read."""

    base_offset: int
    path: str
    size: int

    def read(self, position: int, size: int) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(position)
            return f.read(size)


@dataclass(frozen=True)
class StableView:
    """A partition read_committed as of its checkpointed high watermark."""

    last_stable_offset: int
    aborted: tuple  # AbortedTxn values found by the replay past the index's rows

    def search(self, meta: MetaStore, pid: int, start: int, end: int) -> tuple:
        """(producer id, first offset) of the aborted transactions with
        records in [start, end), by first offset."""
        found = set()
        if meta.has("aidx"):
            found.update(AbortedIndex(meta, pid).search(start, end))
        found.update((t.producer_id, t.first_offset) for t in self.aborted
                     if t.last_offset >= start and t.first_offset < end)
        return tuple(sorted(found, key=lambda a: (a[1], a[0])))


def stable_view(meta: MetaStore, pid: int, directory: str, high_watermark: int) -> StableView:
    """The partition ``pid`` (its files in ``directory``) as of ``high_watermark``."""
    if pid < 0 or not meta.has("txns"):
        return StableView(high_watermark, ())  # a data dir from before transactions
    at, snap = newest_snapshot(meta, pid, high_watermark)
    if snap is None:
        return StableView(high_watermark, ())
    segments = []
    for base, path in list_segments(directory):
        try:
            segments.append(_FileSegment(base, path, os.path.getsize(path)))
        except FileNotFoundError:  # deleted by retention since listed
            continue
    found: list = []
    state = replay_segments(TxnState.from_snapshot(snap), segments, at, high_watermark,
                            found.append)
    first = state.first_unstable()
    lso = high_watermark if first is None else min(first, high_watermark)
    return StableView(lso, tuple(found))
