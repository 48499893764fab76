"""The broker's group commit (durability.py) on a real log: a lone fsync a
client waits on runs on the loop thread (no thread hop), one that no answer
waits on (a transaction's markers: ``inline=False``) goes to a worker
thread, and both release their waiters only once the offsets are durable."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from logbroker.durability import DataNotifier, GroupCommit
from tests.support.fixtures import batch


class CountingExecutor(ThreadPoolExecutor):
    """A real thread pool that counts the fsyncs handed to it."""

    def __init__(self) -> None:
        super().__init__(max_workers=2)
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return super().submit(*args, **kwargs)


def test_only_fsyncs_an_answer_waits_on_run_on_the_loop(store_factory):
    s = store_factory()
    s.create_topic("t")
    lg = s.get_log("t", 0)
    executor = CountingExecutor()

    async def run() -> list:
        commit = GroupCommit(executor, DataNotifier())
        seen = []
        for inline in (True, False, True, False):
            info = lg.append([batch([b"x"])], sync=False)
            end = info.last_offset + 1
            assert lg.recovery_point < end
            before = executor.submitted
            commit.fsync_seconds = 0.0  # fsyncs quick so far (a loaded disk's slow ones offload all)
            await commit.request(lg, end, inline=inline)
            assert lg.recovery_point >= end
            seen.append(executor.submitted - before)
        return seen

    try:
        assert asyncio.run(run()) == [0, 1, 0, 1]
    finally:
        executor.shutdown()


def test_many_logs_in_one_turn_share_one_barrier(store_factory, tmp_path):
    from logbroker.durability import SHARED_FROM
    from logbroker.storage.shared_sync import SharedSync

    s = store_factory()
    n = SHARED_FROM + 2
    s.create_topic("many", partitions=n)
    logs = [s.get_log("many", p) for p in range(n)]
    executor, shared = CountingExecutor(), SharedSync(str(tmp_path / "data"))

    async def run() -> None:
        commit = GroupCommit(executor, DataNotifier(), shared=shared)
        waits = []
        for lg in logs:  # one loop turn: every request joins the same kick
            end = lg.append([batch([b"x", b"y"])], sync=False).last_offset + 1
            waits.append(commit.request(lg, end))
        await asyncio.gather(*waits)

    try:
        asyncio.run(run())
        assert shared.syncs == 1 and executor.submitted == 1
        assert all(lg.flushed_point.offset == lg.log_end_offset == 2 for lg in logs)
    finally:
        shared.close()
        executor.shutdown()


def test_a_turn_of_many_logs_starts_their_barrier_before_it_ends(store_factory, tmp_path):
    """Decision 116: once ``EARLY_FROM`` logs are queued in one turn, their
    barrier is handed to a worker at once (the turn appends on meanwhile);
    the turn's later logs get a second barrier after it. Every waiter is
    released only once its offsets are durable."""
    from logbroker.durability import EARLY_FROM, SHARED_FROM
    from logbroker.storage.shared_sync import SharedSync

    s = store_factory()
    n = EARLY_FROM + SHARED_FROM + 2  # the rest share a barrier too
    s.create_topic("many", partitions=n)
    logs = [s.get_log("many", p) for p in range(n)]
    executor, shared = CountingExecutor(), SharedSync(str(tmp_path / "data"))
    submitted_at = []

    async def run() -> None:
        commit = GroupCommit(executor, DataNotifier(), shared=shared)
        waits = []
        for lg in logs:  # one loop turn
            end = lg.append([batch([b"x", b"y"])], sync=False).last_offset + 1
            waits.append(commit.request(lg, end))
            submitted_at.append(executor.submitted)
        await asyncio.gather(*waits)

    try:
        asyncio.run(run())
        assert submitted_at[EARLY_FROM - 2] == 0 and submitted_at[EARLY_FROM - 1] == 1
        assert submitted_at[-1] == 1  # the rest wait for the turn's end
        assert shared.syncs == 2 and executor.submitted == 2
        assert all(lg.flushed_point.offset == lg.log_end_offset == 2 for lg in logs)
    finally:
        shared.close()
        executor.shutdown()
