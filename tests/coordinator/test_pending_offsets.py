"""Transactional offsets awaiting their marker (coordinator/pending_offsets.py), pure."""

from __future__ import annotations

from logbroker.coordinator.pending_offsets import PendingOffsets
from logbroker.storage.groups import CommittedOffset

TP, TP2 = ("t", 0), ("t", 1)


def c(offset: int) -> CommittedOffset:
    return CommittedOffset(offset, "", 0)


def test_commit_applies_abort_drops_and_counts_follow():
    p = PendingOffsets()
    p.add(7, "g", {TP: c(5), TP2: c(6)})
    p.add(8, "g", {TP: c(9)})
    p.add(8, "h", {TP: c(1)})
    assert p.unstable("g", TP) and p.unstable("g", TP2) and p.count("g") == 3
    assert p.complete(8, False) == []  # abort: dropped
    assert p.unstable("g", TP) and p.count("g") == 2 and not p.has_group("h")
    assert sorted(p.complete(7, True)) == [("g", TP, c(5)), ("g", TP2, c(6))]
    assert not p.unstable("g", TP) and p.count("g") == 0 and not p.has_group("g")
    assert p.complete(7, True) == []  # a second marker: nothing (markers are idempotent)


def test_a_later_plain_commit_wins_but_the_entry_stays_unstable_until_the_marker():
    p = PendingOffsets()
    p.add(7, "g", {TP: c(5), TP2: c(6)})
    p.plain_commit("g", TP)
    assert p.unstable("g", TP)
    assert p.complete(7, True) == [("g", TP2, c(6))]
    p.plain_commit("g", TP)  # nothing pending: no effect
    assert not p.has_group("g")


def test_sequences_follow_the_epoch_and_a_failed_write_gives_its_sequence_back():
    p = PendingOffsets()
    assert p.next_sequence(7, 0, 2) == 0
    assert p.next_sequence(7, 0, 1) == 2
    p.release_sequence(7, 0, 2, 1)
    assert p.next_sequence(7, 0, 1) == 2
    assert p.next_sequence(7, 1, 1) == 0  # a new epoch starts at 0
    p.saw_batch(9, 3, 10, 4)
    assert p.next_sequence(9, 3, 1) == 14
