"""pytest fixtures; the helpers they use live in tests/fixtures.py."""

from __future__ import annotations

import pytest

from fixtures import OPEN, BrokerProcess, Store, open_store


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
    while OPEN:
        OPEN.pop().close()


@pytest.fixture
def broker(tmp_path):
    """A real ``logbroker serve`` on 127.0.0.1 (a free port), killed by PID after the test."""
    b = BrokerProcess(tmp_path / "data")
    try:
        yield b.start()
    finally:
        b.kill()
