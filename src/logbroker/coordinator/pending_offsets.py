"""Offsets committed inside transactions, not yet decided (sans-I/O).

A TxnOffsetCommit is written to the group's offsets partition as a
transactional batch of its producer; its offsets wait here, per producer
and group, until that producer's marker lands on the partition: COMMIT
applies them to the groups' committed offsets, ABORT drops them (Kafka's
KIP-98 rule). A plain commit of the same group and partition written after
the transactional one wins: the transactional value is then not applied
at COMMIT (it stays listed until the marker, so a reader asking for stable
offsets still hears UNSTABLE_OFFSET_COMMIT meanwhile, as from Kafka).

One ``PendingOffsets`` per offsets partition (the coordinator's View),
fed in log order: live (after each write is acknowledged) and at load
(replaying the partition), so a new coordinator rebuilds the same state.

It also keeps, per producer, the epoch and next sequence of its
transactional batches on this partition (``next_sequence``), so the
coordinator's writes follow the partition's idempotent-producer rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SUPERSEDED = None  # a pending entry a later plain commit replaced


@dataclass
class PendingOffsets:
    # producer id -> group -> (topic, partition) -> CommittedOffset | SUPERSEDED
    by_producer: dict = field(default_factory=dict)
    # group -> {(topic, partition): number of producers with a pending entry}
    by_group: dict = field(default_factory=dict)
    # producer id -> (epoch, next sequence) of its transactional batches here
    sequences: dict = field(default_factory=dict)

    def add(self, producer_id: int, group: str, offsets: dict) -> None:
        """``offsets`` ({(topic, partition): CommittedOffset}) of ``group``
        were written in ``producer_id``'s open transaction."""
        mine = self.by_producer.setdefault(producer_id, {}).setdefault(group, {})
        counts = self.by_group.setdefault(group, {})
        for tp, value in offsets.items():
            if tp not in mine:
                counts[tp] = counts.get(tp, 0) + 1
            mine[tp] = value

    def plain_commit(self, group: str, tp: tuple) -> None:
        """A plain commit (or deletion) of ``group``'s ``tp`` was written: a
        pending transactional value of it no longer applies at COMMIT."""
        if tp not in self.by_group.get(group, ()):
            return
        for groups in self.by_producer.values():
            mine = groups.get(group)
            if mine is not None and tp in mine:
                mine[tp] = SUPERSEDED

    def complete(self, producer_id: int, commit: bool) -> list:
        """The producer's marker landed: its pending offsets leave; returns
        ``[(group, (topic, partition), CommittedOffset)]`` to apply (COMMIT,
        entries not superseded), empty for ABORT."""
        groups = self.by_producer.pop(producer_id, None)
        if not groups:
            return []
        out = []
        for group, mine in groups.items():
            counts = self.by_group.get(group, {})
            for tp, value in mine.items():
                left = counts.get(tp, 1) - 1
                if left > 0:
                    counts[tp] = left
                else:
                    counts.pop(tp, None)
                if commit and value is not SUPERSEDED:
                    out.append((group, tp, value))
            if not counts:
                self.by_group.pop(group, None)
        return out

    def unstable(self, group: str, tp: tuple) -> bool:
        """Whether ``group``'s ``tp`` has a transactional offset awaiting its marker."""
        return tp in self.by_group.get(group, ())

    def has_group(self, group: str) -> bool:
        return group in self.by_group

    def count(self, group: str) -> int:
        """Pending entries of ``group`` over all its producers (a bound a
        request checks before it adds more)."""
        return sum(len(groups.get(group, ())) for groups in self.by_producer.values())

    # -- sequences ---------------------------------------------------------------------
    def next_sequence(self, producer_id: int, epoch: int, count: int) -> int:
        """The base sequence of the producer's next batch of ``count``
        records in ``epoch`` (0 in a new epoch), reserved."""
        known = self.sequences.get(producer_id)
        seq = known[1] if known is not None and known[0] == epoch else 0
        self.sequences[producer_id] = (epoch, seq + count)
        return seq

    def release_sequence(self, producer_id: int, epoch: int, seq: int, count: int) -> None:
        """A reserved batch was not written: its sequence is free again
        (when no later batch reserved past it)."""
        if self.sequences.get(producer_id) == (epoch, seq + count):
            if seq == 0:
                del self.sequences[producer_id]
            else:
                self.sequences[producer_id] = (epoch, seq)

    def saw_batch(self, producer_id: int, epoch: int, base_sequence: int, count: int) -> None:
        """A transactional batch of the producer read from the log (load)."""
        if base_sequence >= 0:
            self.sequences[producer_id] = (epoch, base_sequence + count)
