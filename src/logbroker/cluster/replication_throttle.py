"""The replication throttle of reassignments (Kafka's
follower.replication.throttled.rate): the bytes per second this broker
fetches for the replicas a reassignment is adding here.

One ``Throttle`` per broker, shared by its fetchers (cluster/follower.py):
a throttled partition is fetched only while the budget is not overdrawn
(``ready``), at most ``cap`` bytes a fetch, and what came back is charged
(``spend``). The budget refills continuously at ``rate`` bytes per second
up to one second's worth, so a move of a large partition runs at about
``rate`` and the in-sync replicas' fetches (never throttled) and producers
keep their share. ``rate`` 0 means unlimited (Kafka's default). Pure: the
clock is passed in.
"""

from __future__ import annotations


class Throttle:
    def __init__(self, rate: int) -> None:
        self.rate = rate  # bytes per second; 0: unlimited
        self._budget = float(rate)
        self._at = 0.0
        self.throttled_bytes = 0  # bytes fetched for throttled partitions (metrics, tests)

    @property
    def unlimited(self) -> bool:
        return self.rate <= 0

    def _refill(self, now: float) -> None:
        if self._at:
            self._budget = min(float(self.rate), self._budget + (now - self._at) * self.rate)
        self._at = now

    def ready(self, now: float) -> bool:
        """Whether a throttled partition may be fetched now."""
        if self.unlimited:
            return True
        self._refill(now)
        return self._budget > 0

    def wait(self, now: float) -> float:
        """Seconds until the budget is positive again (0 when it is)."""
        if self.unlimited:
            return 0.0
        self._refill(now)
        return 0.0 if self._budget > 0 else (1 - self._budget) / self.rate

    def cap(self, max_bytes: int) -> int:
        """A throttled partition's fetch size: at most one second's rate."""
        return max_bytes if self.unlimited else max(1, min(max_bytes, self.rate))

    def spend(self, nbytes: int, now: float) -> None:
        self.throttled_bytes += nbytes
        if not self.unlimited:
            self._refill(now)
            self._budget -= nbytes
