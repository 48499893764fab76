"""What the compactor remembers of one partition (primary state, in LMDB).

- ``clean_point``: every offset below it has been cleaned with a key map
  that covered it: no two records below it share a key (Kafka's cleaner
  checkpoint). Compaction passes start their key map here.
- ``passes``: ``(end, ms)`` pairs, ascending both ways: the pass that
  ended at wall-clock time ``ms`` moved the clean point to ``end``. A
  record's tombstone clock is the time of the first pass whose ``end`` is
  above it, i.e. when the record was first cleaned (Kafka's choice).
  Passes whose tombstones have all expired collapse into one entry, and
  at most ``MAX_PASSES`` are kept (two neighbours merge into the later one:
  a tombstone may then live longer than ``delete_retention_ms``, never
  shorter).

Stored under the partition's ``ckpt`` key plus ``/cleaner``, so
``MetaStore.forget_partition`` drops it with the partition.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from .metastore import PID, MetaStore

MAX_PASSES = 64
_SUFFIX = b"/cleaner"


@dataclass(frozen=True)
class CleanerState:
    clean_point: int = 0
    passes: tuple[tuple[int, int], ...] = ()
    tombstones_below: int = 0  # the horizon the last pass applied

    def tombstone_horizon(self, now: int, delete_retention_ms: int) -> int:
        """Tombstones at offsets below this were first cleaned at least
        ``delete_retention_ms`` before ``now``: compaction removes them."""
        return max((end for end, ms in self.passes if ms + delete_retention_ms <= now), default=0)

    def after_pass(self, end: int, now: int, delete_retention_ms: int,
                   applied: int) -> "CleanerState":
        """The state once a pass that removed the tombstones below
        ``applied`` moved the clean point to ``end`` at ``now``."""
        horizon = self.tombstone_horizon(now, delete_retention_ms)
        if end <= self.clean_point:
            return CleanerState(self.clean_point, self.passes, max(applied, self.tombstones_below))
        live = [(e, ms) for e, ms in self.passes if e > horizon]
        old = [(horizon, max(ms for e, ms in self.passes if e <= horizon))] if horizon else []
        passes = old + live + [(end, now)]
        while len(passes) > MAX_PASSES:
            passes = passes[:1] + passes[2:]  # the oldest live pass merges into the next
        return CleanerState(end, tuple(passes), max(applied, self.tombstones_below))

    def rewound(self, end: int) -> "CleanerState":
        """The state after the log was cut back to ``end`` (truncation)."""
        return CleanerState(min(self.clean_point, end), self.passes,
                            min(self.tombstones_below, end))


def _key(pid: int) -> bytes:
    return PID.pack(pid) + _SUFFIX


def load_state(meta: MetaStore, pid: int) -> CleanerState:
    with meta.read() as txn:
        raw = txn.get(_key(pid), db=meta.db("ckpt"))
    if raw is None:
        return CleanerState()
    point, passes, below = msgpack.unpackb(raw)
    return CleanerState(point, tuple((e, ms) for e, ms in passes), below)


def store_state(txn, meta: MetaStore, pid: int, state: CleanerState) -> None:
    txn.put(_key(pid), msgpack.packb([state.clean_point, [list(p) for p in state.passes],
                                      state.tombstones_below]), db=meta.db("ckpt"))


def rewind_clean_point(meta: MetaStore, pid: int, end: int) -> None:
    """The log was cut back to ``end`` (truncation, reset, recovery): what
    is appended from there is dirty again."""
    state = load_state(meta, pid)
    if state.clean_point > end:
        with meta.write() as txn:
            store_state(txn, meta, pid, state.rewound(end))
