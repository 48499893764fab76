"""One syncfs for many logs (storage/shared_sync.py) on real logs: every
log's recovery point and HW move to what was written before the barrier,
and a failed barrier is each log's failed fsync (offline, or the unflushed
tail cut when the disk is full)."""

from __future__ import annotations

import errno

import pytest

from logbroker.errors import PartitionOfflineError, StorageError
from logbroker.storage.shared_sync import SharedSync
from tests.support.fixtures import batch, values_of


def logs_with_data(store, n: int) -> list:
    store.create_topic("s", partitions=n)
    out = []
    for p in range(n):
        lg = store.get_log("s", p)
        lg.append([batch([b"a%d" % p, b"b%d" % p])], sync=False)
        out.append(lg)
    return out


def test_one_barrier_makes_every_log_durable(store_factory, tmp_path):
    store = store_factory()
    logs = logs_with_data(store, 20)
    shared = SharedSync(str(tmp_path / "data"))
    try:
        assert shared.available and all(shared.covers(lg) for lg in logs)
        assert all(lg.flushed_point.offset == 0 for lg in logs)
        results = shared.flush(logs)
        assert shared.syncs == 1 and [e for _, e in results] == [None] * 20
        for lg in logs:
            assert lg.flushed_point.offset == lg.log_end_offset == 2
            assert lg.high_watermark == 2
    finally:
        shared.close()


def test_a_failed_barrier_fails_each_log_as_its_own_fsync(store_factory, tmp_path):
    store = store_factory()
    full, broken = logs_with_data(store, 2)
    full.flushed_by_barrier(full.flush_target())  # "a0", "b0" durable
    full.append([batch([b"c0"])], sync=False)
    with pytest.raises(StorageError, match="were not acknowledged"):
        full.flushed_by_barrier(full.flush_target(), OSError(errno.ENOSPC, "no space"))
    assert full.offline is None and values_of(full) == [b"a0", b"b0"]  # the tail cut, online
    with pytest.raises(PartitionOfflineError):
        broken.flushed_by_barrier(broken.flush_target(), OSError(errno.EIO, "I/O error"))
    assert broken.offline is not None


def test_closing_a_store_of_many_logs_takes_one_barrier(tmp_path):
    from tests.support.fixtures import open_store

    store = open_store(tmp_path / "data", flush="lazy")
    logs_with_data(store, 30)
    shared = SharedSync(str(tmp_path / "data"))
    try:
        store.close(shared=shared)
        assert shared.syncs == 1
    finally:
        shared.close()
    again = open_store(tmp_path / "data", flush="lazy")
    try:
        assert again.was_clean
        assert [values_of(again.get_log("s", p)) for p in (0, 29)] == [[b"a0", b"b0"],
                                                                     [b"a29", b"b29"]]
    finally:
        again.close()
