"""Exponential backoff with jitter: how long a client waits before it tries again.

Pure (no I/O, no clock): ``delay(attempt)`` is ``initial * 2**(attempt - 1)``
capped at ``cap``, times a random factor in ``1 - jitter .. 1 + jitter``
(never above ``cap``), so many clients that failed together do not retry
together. ``next()`` / ``reset()`` keep the attempt count for a caller that
retries one thing in a loop. The random source is injectable for tests.
"""

from __future__ import annotations

import random
from typing import Callable


class Backoff:
    """``Backoff(initial=0.05, cap=1.0, jitter=0.2)``, seconds. ``initial`` 0
    means "retry at once" (every delay is 0)."""

    __slots__ = ("initial", "cap", "jitter", "attempts", "_random")

    def __init__(self, initial: float = 0.05, cap: float = 1.0, jitter: float = 0.2,
                 rng: "Callable[[], float]" = random.random) -> None:
        if not (initial >= 0 and cap >= 0 and 0 <= jitter < 1):
            raise ValueError(f"bad backoff: initial {initial!r}, cap {cap!r}, jitter {jitter!r}")
        self.initial, self.cap, self.jitter = initial, max(cap, initial), jitter
        self.attempts = 0
        self._random = rng

    def delay(self, attempt: int) -> float:
        """The wait before retry number ``attempt`` (1 = the first retry; 0
        or less: no wait)."""
        if attempt <= 0 or self.initial == 0:
            return 0.0
        base = self.cap if attempt > 60 else min(self.initial * (1 << (attempt - 1)), self.cap)
        spread = 1.0 + self.jitter * (2.0 * self._random() - 1.0)
        return min(base * spread, self.cap)

    def next(self) -> float:
        """The delay of the next attempt (and count it)."""
        self.attempts += 1
        return self.delay(self.attempts)

    def reset(self) -> None:
        """Success: the next failure starts again at ``initial``."""
        self.attempts = 0
