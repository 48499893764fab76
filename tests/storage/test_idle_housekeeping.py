"""Idle partitions cost housekeeping no writes (issue 32, "idle costs
nothing"): the periodic checkpoint writes only the logs that changed since
their last one, and what it skipped is still recovered after a crash."""

from __future__ import annotations

import time

from tests.support.fixtures import batch, crash, open_store, values_of

HOUR_MS = 3_600_000


def test_the_periodic_checkpoint_writes_only_changed_logs(tmp_path):
    store = open_store(tmp_path / "d")
    store.create_topic("t", 50)
    now = int(time.time() * 1000) + HOUR_MS
    stats = store.tick(now)  # the first due pass: everything was checkpointed at creation
    assert stats["checkpoints"] == 0
    busy = store.get_log("t", 7)
    busy.append([batch([b"a", b"b"])])
    busy.flush()
    stats = store.tick(now + HOUR_MS)
    assert stats["checkpoints"] == 1  # only the log that moved
    assert store.tick(now + 2 * HOUR_MS)["checkpoints"] == 0  # and not again
    store.get_log("t", 3).append([batch([b"c"])])  # written, not yet flushed: still new
    assert store.tick(now + 3 * HOUR_MS)["checkpoints"] == 1
    crash(store)

    store = open_store(tmp_path / "d")
    try:
        assert values_of(store.get_log("t", 7)) == [b"a", b"b"]
        assert values_of(store.get_log("t", 3)) == [b"c"]  # the page cache survived the crash
        assert all(store.get_log("t", p).log_end_offset == 0 for p in range(50) if p not in (3, 7))
    finally:
        store.close()
