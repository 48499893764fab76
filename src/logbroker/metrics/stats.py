"""The broker's hot-path metric counters: plain Python, bumped in place.

These are what the request path touches while metrics are on (metrics.py
exposes them at scrape time through ``metrics_collect.py``). They are not
``prometheus_client`` objects on purpose: a labelled prometheus Histogram's
``observe`` costs ~1 us (a lock and value objects per bucket) where a list
increment after a ``bisect`` costs ~0.2 us, and the request path runs
tens of thousands of times a second on one thread.

Contract: ``Histogram``, ``RequestStats`` and ``TrafficStats`` are bumped
on the broker's event loop only (no lock); a scrape reads them from its
own thread and may see a request half counted (a bucket bumped, its sum
not yet): Prometheus tolerates that, the next scrape is whole again.
``LockedHistogram`` may be observed from any thread (the fsync workers).
Counters are bumped once per request, per produced part or per fetched
part, never per record.
"""

from __future__ import annotations

import threading
from bisect import bisect_left

# request latency buckets, seconds (a produce waiting for its fsync is ~1-5 ms here)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FSYNC_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                 0.5, 1.0, 2.5)
# waiters (produce parts) released by one fsync
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Histogram:
    """Counts of observations per bucket (``value <= bound``) and their sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self.sum = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value

    def snapshot(self) -> "tuple[list[tuple[str, int]], float, int]":
        """(cumulative ``(le, count)`` buckets ending with ``+Inf``, sum, count)."""
        counts, total, out = list(self.counts), self.sum, []
        running = 0
        for bound, n in zip((*self.bounds, float("inf")), counts):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out, total, running


class LockedHistogram(Histogram):
    """A ``Histogram`` observed from several threads."""

    __slots__ = ("lock",)

    def __init__(self, bounds: tuple) -> None:
        super().__init__(bounds)
        self.lock = threading.Lock()

    def observe(self, value: float) -> None:
        with self.lock:
            self.counts[bisect_left(self.bounds, value)] += 1
            self.sum += value

    def snapshot(self):
        with self.lock:
            return super().snapshot()


class RequestStats:
    """Per request kind (the message class): a latency histogram (its count
    is the number of requests) and the requests answered with an error at
    the top level (a refused request, or a bug; per-partition errors inside
    a good answer are not counted here)."""

    __slots__ = ("latency", "errors")

    def __init__(self) -> None:
        self.latency: dict[type, Histogram] = {}
        self.errors: dict[type, int] = {}

    def observe(self, kind: type, seconds: float) -> None:
        h = self.latency.get(kind)
        if h is None:
            h = self.latency[kind] = Histogram(LATENCY_BUCKETS)
        h.observe(seconds)

    def error(self, kind: type) -> None:
        self.errors[kind] = self.errors.get(kind, 0) + 1


class TrafficStats:
    """Per topic-partition: bytes and records appended by produce requests,
    bytes sent by fetch answers, and records read by clients
    (``[bytes_in, records_in, bytes_out, records_out]``; ``ReadPositions``
    counts the last)."""

    __slots__ = ("parts",)

    def __init__(self) -> None:
        self.parts: dict[tuple[str, int], list[int]] = {}

    def produced(self, topic: str, partition: int, nbytes: int, records: int) -> None:
        c = self.parts.get((topic, partition))
        if c is None:
            c = self.parts[(topic, partition)] = [0, 0, 0, 0]
        c[0] += nbytes
        c[1] += records

    def fetched(self, topic: str, partition: int, nbytes: int) -> None:
        c = self.parts.get((topic, partition))
        if c is None:
            c = self.parts[(topic, partition)] = [0, 0, 0, 0]
        c[2] += nbytes


class ReadPositions:
    """One connection's fetch positions, counting the records its client
    read: a Fetch of a partition at an offset past the one its previous
    Fetch on this connection asked for means the client got the records
    between them (a consumer moves on only past what it received), so
    they count as ``records_out``. Nothing is decoded and nothing is
    counted per record; the count is exact for clients that read on, and
    it misses each partition's last answer before the client stops
    fetching it on this connection (a close, a rebalance). Offsets that
    compaction removed count too (they are passed over), and so would a
    seek forward.

    Memory: only partitions the TrafficStats already knows (real ones,
    that had data) get an entry, so a peer naming made-up partitions
    grows nothing."""

    __slots__ = ("traffic", "last")

    def __init__(self, traffic: TrafficStats) -> None:
        self.traffic = traffic
        self.last: dict[tuple[str, int], int] = {}

    def fetch(self, parts) -> None:
        """A Fetch request's ``parts`` ((topic, partition, offset, max_bytes), ...) was read."""
        known, last = self.traffic.parts, self.last
        for topic, partition, offset, _ in parts:
            key = (topic, partition)
            c = known.get(key)
            if c is None or offset < 0:
                continue
            before = last.get(key)
            if before is not None and offset > before:
                c[3] += offset - before
            last[key] = offset

    def resolved(self, rows) -> None:
        """A Fetch answer's ``resolved`` rows ((topic, partition, offset):
        parts asked at EARLIEST / LATEST, read from ``offset``): the
        client's next Fetch moves on from there."""
        known, last = self.traffic.parts, self.last
        for topic, partition, offset in rows:
            if (topic, partition) in known:
                last[(topic, partition)] = offset


class CommitStats:
    """GroupCommit's: the time of each fsync (any thread) and how many
    waiting produce parts each one released (on the loop)."""

    __slots__ = ("fsync", "batch")

    def __init__(self) -> None:
        self.fsync = LockedHistogram(FSYNC_BUCKETS)
        self.batch = Histogram(BATCH_BUCKETS)
