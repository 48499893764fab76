"""Fixtures and helpers shared by the client tests (this module has no tests).

Brokers are real ``logbroker serve`` processes on 127.0.0.1 (tests/broker_proc.py)
with a data dir under ``tmp_path``; each is killed by PID when its test ends.
Waits are bounded: helpers poll with deadlines, never sleep to synchronise.
"""

from __future__ import annotations

import time

FAST = dict(request_timeout_ms=5_000, connect_timeout_ms=2_000)


def consume(consumer, n: int, timeout: float = 15.0) -> list:
    """Poll until ``n`` records arrived (more are kept) or ``timeout`` passed."""
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


async def aconsume(consumer, n: int, timeout: float = 15.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += await consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


def wait_until(predicate, timeout: float = 10.0, what: str = "condition"):
    """Call ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)
