"""Bounded in-memory samples for the console's charts (lag and throughput).

``History.record(state)`` keeps, per sample, the per-topic traffic totals
and each group's total lag; at most ``keep`` samples (a ring) and at most
``MAX_GROUPS`` groups (a group missing from a sample is forgotten).
``run(take, period)`` samples every ``period`` seconds until cancelled; a
failed sample is logged and the loop goes on (it never kills the broker).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections import deque

from . import views

log = logging.getLogger("logbroker.console")
SAMPLE_S = 2.0  # the throughput page polls every 2 s
KEEP = 450  # samples: 15 minutes at 2 s
MAX_GROUPS = 1_000


class History:
    def __init__(self, keep: int = KEEP) -> None:
        self.keep = keep
        self.traffic: deque = deque(maxlen=keep)  # (ts_ms, {topic: [bytes_in, records_in, bytes_out]})
        self.lags: dict[str, deque] = {}  # group -> deque of (ts_ms, total lag)
        self.failures = 0

    def record(self, state) -> None:
        self.traffic.append((state.taken_ms, views.topic_totals(state)))
        seen = set()
        for g in sorted(state.groups, key=lambda g: g["name"])[:MAX_GROUPS]:
            ring = self.lags.get(g["name"])
            if ring is None:
                ring = self.lags[g["name"]] = deque(maxlen=self.keep)
            ring.append((state.taken_ms, views.total_lag(state, g)))
            seen.add(g["name"])
        for gone in set(self.lags) - seen:
            del self.lags[gone]

    def lag_of(self, group: str) -> list:
        return [list(s) for s in self.lags.get(group, ())]

    async def run(self, take, period: float = SAMPLE_S) -> None:
        """Sample ``take()`` (a state, or an awaitable of one) now and every
        ``period`` s until cancelled."""
        while True:
            try:
                state = take()
                if inspect.isawaitable(state):
                    state = await state
                self.record(state)
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - the sampler logs and goes on
                self.failures += 1
                log.exception("console sample failed (the charts miss one point)")
            await asyncio.sleep(period)
