"""Shared fixtures: stores in temporary dirs, crash simulation, batch makers."""

from __future__ import annotations

import os

import pytest

from logbroker.config import LogConfig, StorageConfig
from logbroker.records import build_batch
from logbroker.storage.store import Store


def open_store(path, **log_settings) -> Store:
    return Store.open(str(path), StorageConfig(log=LogConfig(**log_settings), map_size=64 << 20))


def crash(store: Store) -> None:
    """Abandon ``store`` as a killed process would: nothing flushed or
    checkpointed, the clean marker not written (the page cache survives, as
    it does when only the process dies)."""
    store.files.close_all()
    store.meta.close()
    os.close(store._lock_fd)


def batch(values, ts: int = 1_000_000, key: "bytes | None" = None) -> bytes:
    """One batch of ``values`` (bytes) all stamped with timestamp ``ts``."""
    return build_batch([(v, key, (), ts) for v in values])


def values_of(log, start: int = 0) -> list[bytes]:
    """Every record value of ``log`` from ``start`` to its end, in offset order."""
    from logbroker.records import decode_batch, scan_batches

    out, offset = [], max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"read at {offset} returned nothing before the end {log.log_end_offset}"
        for pos, header in scan_batches(data):
            for rec in decode_batch(data[pos:pos + header.size]).records():
                if rec.offset >= offset:
                    out.append(rec.value)
            offset = header.next_offset
    return out


@pytest.fixture
def store_factory(tmp_path):
    opened: list[Store] = []

    def make(**log_settings) -> Store:
        s = open_store(tmp_path / "data", **log_settings)
        opened.append(s)
        return s

    yield make
    for s in opened:
        try:
            s.close()
        except Exception:
            pass


@pytest.fixture(autouse=True)
def close_raw_conns():
    """Close every raw test connection a test left open."""
    yield
    from wire import OPEN

    while OPEN:
        OPEN.pop().close()


@pytest.fixture
def broker(tmp_path):
    """A real ``logbroker serve`` on 127.0.0.1 (a free port), killed by PID after the test."""
    from broker_proc import BrokerProcess

    b = BrokerProcess(tmp_path / "data")
    try:
        yield b.start()
    finally:
        b.kill()
