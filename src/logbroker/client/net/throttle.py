"""Broker throttles a client honours (quotas: docs/security.md, "Quotas and limits").

A Produce or Fetch answer may carry ``throttle_ms``: its principal is over
a byte-rate quota, and the broker reads nothing more from that connection
for that long. As Kafka clients do (KIP-219), the client then sends
nothing on that connection until the time has passed, so its requests do
not sit unread in a muted socket (where their timeouts would run).
``Throttles`` keeps, per broker, until when, and the numbers of
``Producer.metrics()`` / ``Consumer.metrics()``: the mean and the largest
throttle over the answers seen. A throttle is neither an error nor a
retry: the records of a throttled produce were written.
"""

from __future__ import annotations


class Throttles:
    """Per-broker throttle deadlines (``time.monotonic()`` seconds) and
    their stats; used under its owner's lock or on its loop."""

    __slots__ = ("until", "answers", "total_ms", "max_ms")

    def __init__(self) -> None:
        self.until: dict[int, float] = {}  # broker id -> no request to it before then
        self.answers = 0  # answers seen (throttled or not): the mean's denominator
        self.total_ms = 0
        self.max_ms = 0

    def seen(self, broker: int, throttle_ms: int, now: float) -> None:
        """An answer from ``broker`` carried ``throttle_ms`` (0: none)."""
        self.answers += 1
        if throttle_ms > 0:
            self.total_ms += throttle_ms
            self.max_ms = max(self.max_ms, throttle_ms)
            self.until[broker] = max(self.until.get(broker, 0.0), now + throttle_ms / 1000)

    def left(self, broker: int, now: float) -> float:
        """Seconds to wait before the next request to ``broker`` (0: none)."""
        until = self.until.get(broker)
        if until is None:
            return 0.0
        if until <= now:
            del self.until[broker]
            return 0.0
        return until - now

    def metrics(self, kind: str) -> dict:
        """``{KIND_throttle_time_ms_avg, KIND_throttle_time_ms_max}`` (as
        Kafka's produce-throttle-time-avg/max and fetch-throttle-time-avg/max,
        over every answer since the client started)."""
        return {f"{kind}_throttle_time_ms_avg": self.total_ms / self.answers if self.answers else 0.0,
                f"{kind}_throttle_time_ms_max": self.max_ms}
