"""Which batches a read_committed reader leaves out (Kafka's rule, pure).

A reader of a range gets, with it, the aborted transactions that have
records there: ``(producer_id, first_offset)`` pairs (a Fetch's ``txn``,
the Spark planner's ``Split.aborted``). Walking the batches in offset
order, a producer becomes "aborting" once a batch reaching
``first_offset`` of one of its aborted transactions is met; its
transactional batches are left out until its next control batch (the
abort marker: a producer has one transaction open at a time, so the first
marker after ``first_offset`` ends the aborted one). Control batches are
left out in every isolation: they hold markers, not records.

Costs per batch: one attribute test, plus a set lookup for a
transactional batch; the aborted list is consumed once, in order.
"""

from __future__ import annotations

from . import format as fmt


class AbortedFilter:
    """Feed it every batch header of a walk, in offset order
    (``hidden(header)``); not thread-safe. ``aborted``: the pairs, any
    order (sorted here)."""

    __slots__ = ("_pending", "_next", "_active", "_known")

    def __init__(self, aborted=()) -> None:
        self._pending: list = []
        self._next = 0
        self._active: set[int] = set()
        self._known: set = set()
        self.extend(aborted)

    def extend(self, aborted) -> None:
        """More pairs, as each Fetch answer brings those of its range (the
        same pair again is ignored)."""
        fresh = [(int(p), int(f)) for p, f in aborted if (p, f) not in self._known]
        if fresh:
            self._known.update(fresh)
            self._pending = sorted(self._pending[self._next:] + fresh, key=lambda a: a[1])
            self._next = 0

    def hidden(self, header: fmt.BatchHeader) -> bool:
        """Whether the reader leaves this batch out."""
        return self.hidden_fields(header.magic, header.attributes, header.producer_id,
                                  header.base_offset + header.last_offset_delta)

    def hidden_fields(self, magic: int, attributes: int, producer_id: int,
                      last_offset: int) -> bool:
        """``hidden`` from a header's fields (for walks over ``read_fields`` tuples)."""
        transactional, control = fmt.txn_flags(magic, attributes)
        if not (transactional or control):
            return False
        pending = self._pending
        while self._next < len(pending) and pending[self._next][1] <= last_offset:
            self._active.add(pending[self._next][0])
            self._next += 1
        if control:
            self._active.discard(producer_id)
            return True
        return producer_id in self._active
