"""Time buckets that fit a data set's span, for the charts of the tools/ jobs.

Pure: no Spark, no matplotlib. Times are seconds since the epoch (floats, so
sub-second spans keep their precision); buckets are aligned to the epoch, so
a bucket of a day runs from midnight to midnight UTC.

``choose_bucket(first, last)`` picks the smallest bucket of ``LADDER`` (1 s up
to 1 day) that cuts ``[first, last]`` into at most ``MAX_BUCKETS`` buckets.
Since neighbouring rungs differ by a factor of at most 6, a span of more than
about five minutes gets at least ``MAX_BUCKETS / 6`` (50) buckets; a shorter
span gets 1 s buckets, fewer than 30 of them (one for data within a second),
as a second is the smallest bucket. A span of more than 300 days gets buckets
of a whole number of days.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_BUCKETS = 300


@dataclass(frozen=True)
class Bucket:
    """A bucket of ``seconds``; ``name`` reads after "per": "second", "5 minutes"."""

    seconds: int
    name: str

    def start(self, t: float) -> int:
        """The start (epoch seconds) of the bucket holding time ``t``."""
        return math.floor(t / self.seconds) * self.seconds

    def count(self, first: float, last: float) -> int:
        """How many buckets ``[first, last]`` touches (1 when first == last)."""
        return (self.start(last) - self.start(first)) // self.seconds + 1

    def bounds(self, first: float, last: float) -> tuple[int, int]:
        """The start of the first bucket and the end of the last one."""
        return self.start(first), self.start(last) + self.seconds


LADDER = (
    Bucket(1, "second"), Bucket(5, "5 seconds"), Bucket(15, "15 seconds"),
    Bucket(60, "minute"), Bucket(300, "5 minutes"), Bucket(900, "15 minutes"),
    Bucket(3600, "hour"), Bucket(6 * 3600, "6 hours"), Bucket(86400, "day"),
)
DAY = 86400


def choose_bucket(first: float, last: float, max_buckets: int = MAX_BUCKETS) -> Bucket:
    """The smallest bucket of ``LADDER`` giving at most ``max_buckets`` buckets
    over ``[first, last]`` (epoch seconds, ``first <= last``); past the ladder,
    a bucket of the fewest whole days that does."""
    if last < first:
        raise ValueError(f"last {last} is before first {first}")
    for bucket in LADDER:
        if bucket.count(first, last) <= max_buckets:
            return bucket
    days = max(2, math.ceil((last - first) / DAY / max_buckets))
    while Bucket(days * DAY, "").count(first, last) > max_buckets:
        days += 1
    return Bucket(days * DAY, f"{days} days")


_UNITS = (("d", DAY), ("h", 3600), ("min", 60))


def format_span(seconds: float) -> str:
    """A span for people: "0.95 s", "42 s", "10 min", "2 h 5 min", "3 d 4 h"
    (the two largest units, rounded down; seconds to 2 decimals below a minute)."""
    if seconds < 60:
        return f"{seconds:.2f} s" if seconds < 10 else f"{seconds:.0f} s"
    whole = int(seconds)
    parts = []
    for unit, size in _UNITS:
        if whole >= size or parts:
            parts.append((whole // size, unit))
            whole %= size
    parts.append((whole, "s"))
    shown = [f"{n} {unit}" for n, unit in parts[:2] if n]
    return " ".join(shown)
