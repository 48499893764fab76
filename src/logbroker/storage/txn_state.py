"""Transaction state of one partition (Kafka's ProducerStateManager, its
transactional half): the open transactions, the producers' epochs as the
markers left them, and the aborted transactions each abort marker closes.

Pure and derived: every change comes from a batch header written to the log
(``on_batch``; a control batch also needs its marker, read from its record),
so the state after offset N is a function of the log up to N; ``replay``
rebuilds it from any starting snapshot (``snapshot`` / ``from_snapshot``).

- A transactional batch opens its producer's transaction at its base
  offset, if none is open; the batch's max timestamp is kept as the time it
  opened (``opened``: the producer's create time, or the broker's under
  LogAppendTime; -1 when unknown, a snapshot written before it was kept).
  It is shown only (the console's age of an open transaction), never used
  to decide anything.
- A marker closes it (commit or abort); an abort yields an ``AbortedTxn``
  (producer, first offset, marker offset, LSO after it) for the aborted
  index. The producer's epoch becomes the marker's, its coordinator epoch
  the marker's. A marker with nothing open changes only those.

Open transactions are kept in a dict in the order they opened, which is
their first offsets' order (offsets only grow): the oldest is the first
key, so the first unstable offset costs O(1) (an OrderedDict: a plain
dict's iteration would skip every removed entry before it). Not thread-safe: the Log
calls it under its lock.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import (CorruptRecordError, InvalidProducerEpochError,
                      TransactionCoordinatorFencedError)
from ..records import format as fmt
from ..records.control import read_marker


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    """One aborted transaction: ``producer_id``'s records from
    ``first_offset`` up to its abort marker at ``last_offset``;
    ``last_stable_offset`` is the partition's first unstable offset just
    after the marker (the next offset when nothing else was open): a search
    of the aborted index for a range ending at or below it can stop there
    (Kafka's rule)."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


_NONE = MappingProxyType({})  # the maps of a partition no transactional producer wrote to


class TxnState:
    """One partition's transactions. Until a transactional batch or marker
    arrives its three maps are one shared read-only empty mapping (a broker
    of 50,000 partitions, few of them transactional, holds no 256 B of empty
    dicts each); every change goes through ``_own`` first."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("open", "opened", "producers")

    def __init__(self) -> None:
        # producer -> (epoch, first offset), by first offset; an OrderedDict: its
        # first entry stays O(1) to reach however many were removed before it
        self.open: "OrderedDict[int, tuple[int, int]]" = _NONE
        self.producers: dict[int, tuple[int, int]] = _NONE  # producer -> (epoch, coordinator epoch)
        self.opened: dict[int, int] = _NONE  # producer -> its open transaction's first timestamp

    def _own(self) -> "TxnState":
        """Give this state maps of its own before changing them."""
        if self.open is _NONE:
            self.open, self.producers, self.opened = OrderedDict(), {}, {}
        return self

    # -- queries -------------------------------------------------------------------
    def first_unstable(self) -> "int | None":
        """The first offset of the oldest open transaction, None when none is."""
        for _, first in self.open.values():
            return first
        return None

    def open_transactions(self) -> list[tuple[int, int, int]]:
        """``[(producer id, producer epoch, first offset)]``, oldest first."""
        return [(pid, epoch, first) for pid, (epoch, first) in self.open.items()]

    def open_detail(self) -> list[tuple[int, int, int, int]]:
        """``[(producer id, producer epoch, first offset, opened ms)]``,
        oldest first; opened ms -1 when unknown (module docstring)."""
        opened = self.opened
        return [(pid, epoch, first, opened.get(pid, -1))
                for pid, (epoch, first) in self.open.items()]

    def epoch_of(self, producer_id: int) -> int:
        """The producer's epoch as transactional batches and markers left it (-1: unknown)."""
        known = self.producers.get(producer_id)
        return -1 if known is None else known[0]

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int,
                     known_epoch: int = -1) -> None:
        """Raise (nothing changed) for a marker the partition must refuse: a
        producer epoch older than the one known (``known_epoch``: also the
        idempotent state's), a coordinator epoch older than this producer's
        last marker's."""
        epoch, coord = self.producers.get(producer_id, (-1, -1))
        if producer_epoch < max(epoch, known_epoch):
            raise InvalidProducerEpochError(f"marker of producer {producer_id} epoch "
                                            f"{producer_epoch}, older than {max(epoch, known_epoch)}")
        if coordinator_epoch < coord:
            raise TransactionCoordinatorFencedError(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, "
                f"older than {coord}")

    # -- changes -------------------------------------------------------------------
    def on_batch(self, header: fmt.BatchHeader, offset: int, data=None) -> "AbortedTxn | None":
        """A batch with a transactional or control bit (the caller tested
        ``attributes & TXN_BITS``) was written at ``offset``; ``data`` is its
        bytes (read only for a control batch). Returns the aborted
        transaction an abort marker closed, else None."""
        transactional, control = fmt.txn_flags(header.magic, header.attributes)
        pid = header.producer_id
        if pid < 0:  # no producer: nothing to open or close (the write path skips it too)
            return None
        if control:
            try:
                commit, coordinator_epoch = read_marker(data, header)
            except CorruptRecordError:  # not a marker we know (a newer version): no state change
                return None
            return self.on_marker(pid, header.producer_epoch, commit, coordinator_epoch, offset)
        if transactional:
            self.on_transactional(pid, header.producer_epoch, offset, header.max_timestamp)
        return None

    def on_transactional(self, pid: int, epoch: int, offset: int, timestamp: int = -1) -> None:
        self._own()
        if pid not in self.open:
            self.open[pid] = (epoch, offset)
            self.opened[pid] = timestamp
        known = self.producers.get(pid)
        if known is None or known[0] < epoch:
            self.producers[pid] = (epoch, -1 if known is None else known[1])

    def on_marker(self, pid: int, epoch: int, commit: bool, coordinator_epoch: int,
                  offset: int) -> "AbortedTxn | None":
        self._own()
        opened = self.open.pop(pid, None)
        self.opened.pop(pid, None)
        known = self.producers.get(pid, (-1, -1))
        self.producers[pid] = (max(epoch, known[0]), max(coordinator_epoch, known[1]))
        if opened is None or commit:
            return None
        lso = self.first_unstable()
        return AbortedTxn(pid, opened[1], offset, offset + 1 if lso is None else lso)

    def forget_producers(self, keep: int) -> int:
        """Drop the epochs of producers with no open transaction, oldest
        first, until at most ``keep`` are left; returns how many went (the
        bound on what a partition remembers; a forgotten producer's next
        marker or batch is accepted at any epoch, as a new one's)."""
        extra = len(self.producers) - keep
        if extra <= 0:
            return 0
        gone = [pid for pid in self.producers if pid not in self.open][:extra]
        for pid in gone:
            del self.producers[pid]
        return len(gone)

    # -- snapshots -----------------------------------------------------------------
    def snapshot(self) -> dict:
        """The state as plain values (msgpack-able)."""
        return {"open": [[pid, e, f] for pid, (e, f) in self.open.items()],
                "producers": [[pid, e, c] for pid, (e, c) in self.producers.items()],
                "opened": [[pid, ts] for pid, ts in self.opened.items()]}

    @classmethod
    def from_snapshot(cls, snap: "dict | None") -> "TxnState":
        state = cls()
        if snap:
            state._own()
            for pid, epoch, first in sorted(snap.get("open", ()), key=lambda row: row[2]):
                state.open[pid] = (epoch, first)
            for pid, epoch, coord in snap.get("producers", ()):
                state.producers[pid] = (epoch, coord)
            for pid, ts in snap.get("opened", ()):  # absent in snapshots written before it
                if pid in state.open:
                    state.opened[pid] = ts
        return state


def replay(state: TxnState, batches, on_abort=None) -> TxnState:
    """Apply ``batches`` (``(header, read)`` in log order: ``read()`` gives a
    control batch's bytes) to ``state``; each aborted transaction goes to
    ``on_abort``. Batches without a transactional bit cost one test."""
    for header, read in batches:
        if header.attributes & fmt.TXN_BITS:
            aborted = state.on_batch(header, header.base_offset,
                                     read() if fmt.txn_flags(header.magic, header.attributes)[1]
                                     else None)
            if aborted is not None and on_abort is not None:
                on_abort(aborted)
    return state
