"""Numbers every bench uses: units, bounded timing loops, medians with their
spread, percentiles. Standard library only, so client processes import it
cheaply."""

from __future__ import annotations

import math
import statistics
import time
from typing import Callable

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def summary(values: list[float]) -> dict:
    """Median, min, max and count of a run's repeats."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def percentile_ms(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank percentile ``q`` (0 < q <= 1) of sorted nanoseconds, in ms."""
    return sorted_ns[max(0, math.ceil(q * len(sorted_ns)) - 1)] / 1e6


def bounded(step: Callable[[int], int], max_calls: int, max_seconds: float) -> tuple[int, int, float]:
    """Call ``step(i)`` (returns bytes handled) until ``max_calls`` or ``max_seconds``.
    Returns (calls, bytes, elapsed seconds)."""
    calls = nbytes = 0
    start = time.perf_counter()
    deadline = start + max_seconds
    while calls < max_calls:
        nbytes += step(calls)
        calls += 1
        if time.perf_counter() >= deadline:
            break
    return calls, nbytes, time.perf_counter() - start


def timed(thunk: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of each of ``repeats`` calls of ``thunk``."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        thunk()
        out.append(time.perf_counter() - t)
    return out
