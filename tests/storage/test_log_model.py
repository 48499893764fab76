"""A hypothesis state machine: append / roll / truncate / retention / reopen /
a shared barrier (syncfs, storage/shared_sync.py) / a journal write
(storage/journal.py) and its checkpoint / crash (with the tail the files
did not sync torn anywhere: a power cut) against an in-memory model of the
log: what the journal acknowledged survives any tear."""

from __future__ import annotations

import shutil
import tempfile

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
import pytest
from hypothesis.stateful import (RuleBasedStateMachine, invariant, precondition, rule,
                                 run_state_machine_as_test)

from tests.support.fixtures import crash, open_store, values_of
from logbroker.records import build_batch
from logbroker.storage.shared_sync import SharedSync

SETTINGS = dict(segment_bytes=300, index_interval_bytes=64, file_delete_delay_ms=0)
values_st = st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=6)


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="lbmodel-")
        self.store = open_store(self.dir, **SETTINGS)
        self.store.create_topic("m")
        self.records: list[tuple[int, bytes, int]] = []  # (offset, value, ts) from log start
        self.start = 0
        self.next = 0
        self.ts = 1_000
        self.shared = SharedSync(self.dir)

    @property
    def log(self):
        return self.store.get_log("m", 0)

    def teardown(self) -> None:
        try:
            self.shared.close()
            self.store.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    @rule(batches=st.lists(values_st, min_size=1, max_size=3), sync=st.booleans(),
          jitter=st.integers(-5, 20))
    def append(self, batches, sync, jitter):
        raw, stamps = [], []
        for vals in batches:
            self.ts += jitter if jitter > 0 else 1
            stamps.append(self.ts)
            raw.append(build_batch([(v, None, (), self.ts) for v in vals]))
        info = self.log.append(raw, sync=sync)
        assert info.first_offset == self.next
        for vals, ts in zip(batches, stamps):
            for v in vals:
                self.records.append((self.next, v, ts))
                self.next += 1
        assert info.last_offset == self.next - 1

    @rule()
    def roll(self):
        self.log.roll()

    @rule()
    def shared_barrier(self):
        """Everything appended so far made durable by one syncfs: a crash keeps it."""
        [(lg, error)] = self.shared.flush([self.log])
        assert error is None and lg.flushed_point.offset == lg.log_end_offset

    @rule()
    def journal_write(self):
        """The journal makes everything appended so far durable (not the files)."""
        [(lg, error)] = self.store.journal.flush([self.log])
        assert error is None and lg.recovery_point == lg.log_end_offset

    @rule()
    def journal_checkpoint(self):
        self.store.journal.checkpoint()

    @rule(data=st.data())
    def truncate(self, data):
        target = data.draw(st.integers(max(0, self.start - 2), self.next + 2))
        self.log.truncate_to(target)
        if target >= self.next:
            return
        if target <= self.start:
            self.records, self.start, self.next = [], target, target
            return
        # whole batches go: the log end becomes the base of the batch holding target
        new_end = self.log.log_end_offset
        assert new_end <= target
        self.records = [r for r in self.records if r[0] < new_end]
        self.next = new_end

    @rule(data=st.data())
    def delete_before(self, data):
        target = data.draw(st.integers(self.start, self.next))
        self.log.delete_before(target)
        self.log.purge_deleted(now=1 << 62)
        if target > self.start:
            self.start = target
            self.records = [r for r in self.records if r[0] >= target]

    @rule()
    def reopen(self):
        self.store.close()
        self.store = open_store(self.dir, **SETTINGS)

    @rule(data=st.data())
    def crash_and_tear(self, data):
        """Kill the process; optionally tear the unflushed part of the tail."""
        log = self.log
        rp, durable = log.flushed_point, log.recovery_point  # files / files or journal
        seg, flushed_pos = log.active, (rp.position if rp.segment == log.active.base_offset else 0)
        path, size = seg.path, seg.size
        batches = [(pos, h) for pos, h in seg.scan(0, size, verify=False)]
        crash(self.store)
        cut = data.draw(st.integers(flushed_pos, size))
        if cut < size:
            with open(path, "r+b") as fh:
                fh.truncate(cut)
            lost = [h.base_offset for pos, h in batches if pos + h.size > cut]
            if lost:  # a log start past the surviving data restarts the log there;
                # the journal's replay gives back everything below its durable end
                self.next = max(lost[0], self.start, durable)
                self.records = [r for r in self.records if r[0] < self.next]
        self.store = open_store(self.dir, **SETTINGS)
        assert self.log.offline is None, self.log.offline

    @precondition(lambda self: self.records)
    @rule(data=st.data())
    def by_timestamp(self, data):
        ts = data.draw(st.integers(self.records[0][2] - 5, self.records[-1][2] + 5))
        hit = self.log.offset_for_timestamp(ts)
        expected = next(((o, t) for o, _, t in self.records if t >= ts), None)
        assert (None if hit is None else (hit.offset, hit.timestamp)) == expected

    @invariant()
    def matches_model(self):
        log = self.log
        assert (log.log_start_offset, log.log_end_offset) == (self.start, self.next)
        assert values_of(log, self.start) == [v for _, v, _ in self.records]


TestLogMachine = LogMachine.TestCase
# the default suite's share (~10 s); test_log_machine_long (-m slow) runs 2,000 of 60 steps
TestLogMachine.settings = settings(max_examples=50, stateful_step_count=30, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
def test_log_machine_long():
    run_state_machine_as_test(LogMachine, settings=settings(
        max_examples=2000, stateful_step_count=60, deadline=None,
        suppress_health_check=[HealthCheck.too_slow]))
