"""Scrapes against many partitions (issue 29): ``python -m bench.metrics.scrapers``.

    python -m bench.metrics.scrapers --partitions 1000 10000 20000

For each partition count: a data dir made once (``--cache DIR/N``, topics of
at most 5,000 partitions written by the storage layer directly, before the
broker starts), then a ``logbroker serve --metrics-port 0`` on it, and:

- **scrape latency**: one scrape at a time, ``--scrapes`` of them (``--gap``
  s apart: more than ``metrics_refresh_s`` to see each gather a snapshot),
  the first (nothing cached), median and max;
- **round trip under scrapers**: ``--scrapers`` threads scraping in a loop
  for ``--seconds`` while this process sends Handshake requests one at a
  time on a raw connection: their round trip's p50, p99 and max (the loop's
  stall shows here), and the scrapes done.

With ``--loop``, instead: the loop time of reading the state once, in this
process on the same data (the store opened, no broker): ``Snapshot.take``
(what every scrape ran on the broker's loop before issue 29) against
``Gathered.gather`` (what one refresh of the shared snapshot runs now: its
total, its slices and the longest one), medians of ``--scrapes`` (and
the longest slice of all).

The broker is stopped by PID; the data dirs are kept in the cache.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
import urllib.request

from bench.common.procs import BrokerProcess
from logbroker.protocol import messages as m
from logbroker.storage.config import StorageConfig
from logbroker.storage.store import Store
from tests.support.fixtures import RawConn

PER_TOPIC = 5000


def make_dir(cache: str, partitions: int) -> str:
    """A data dir with ``partitions`` empty partitions (made once, kept)."""
    path = os.path.join(cache, str(partitions))
    if os.path.exists(os.path.join(path, ".made")):
        return path
    shutil.rmtree(path, ignore_errors=True)
    make_partitions(path, partitions)
    open(os.path.join(path, ".made"), "w").close()
    return path


def make_partitions(path: str, partitions: int) -> None:
    """A new data dir at ``path`` with topics many-0, many-1, ... of at most
    ``PER_TOPIC`` partitions, ``partitions`` in all (written by the storage
    layer; no broker runs on it)."""
    with Store.open(path, StorageConfig()) as store:
        left, i = partitions, 0
        while left:
            n = min(left, PER_TOPIC)
            store.create_topic(f"many-{i}", n)
            left, i = left - n, i + 1


def scrape(url: str) -> int:
    with urllib.request.urlopen(url, timeout=120) as resp:
        return len(resp.read())


def quantile(xs: list, q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(data: str, args) -> dict:
    work = tempfile.mkdtemp(prefix="lb-scrapers-")
    copy = os.path.join(work, "data")
    shutil.copytree(data, copy)
    os.remove(os.path.join(copy, ".made"))
    b = BrokerProcess(copy, "--metrics-port", "0", *args.extra)
    try:
        b.start(timeout=300)
        url = b.proc.stdout.readline().split(" on ", 1)[1].strip()
        lat, size = [], 0
        for _ in range(args.scrapes):
            t = time.perf_counter()
            size = scrape(url)
            lat.append(time.perf_counter() - t)
            time.sleep(args.gap)
        stop, done = threading.Event(), [0]

        def scraper() -> None:
            while not stop.is_set():
                scrape(url)
                done[0] += 1

        threads = [threading.Thread(target=scraper, daemon=True) for _ in range(args.scrapers)]
        conn = RawConn(b.port)
        for t in threads:
            t.start()
        rtt, end = [], time.monotonic() + args.seconds
        while time.monotonic() < end:
            t = time.perf_counter()
            assert conn.call(m.Handshake(), timeout=120).error == 0
            rtt.append(time.perf_counter() - t)
            time.sleep(0.005)
        stop.set()
        for t in threads:
            t.join(180)
        conn.close()
        return {"bytes": size, "scrape_first_ms": 1000 * lat[0],
                "scrape_med_ms": 1000 * statistics.median(lat),
                "scrape_max_ms": 1000 * max(lat), "rtt_p50_ms": 1000 * quantile(rtt, 0.5),
                "rtt_p99_ms": 1000 * quantile(rtt, 0.99), "rtt_max_ms": 1000 * max(rtt),
                "round_trips": len(rtt), "scrapes": done[0]}
    finally:
        b.kill()
        shutil.rmtree(work, ignore_errors=True)


def loop_cost(data: str, rounds: int) -> dict:
    import asyncio
    from types import SimpleNamespace

    from logbroker.metrics.snapshot import Gathered, Snapshot

    with Store.open(data, StorageConfig()) as store:
        broker = SimpleNamespace(store=store, connections=set(),
                                 coordinator=SimpleNamespace(groups=list),
                                 meta=SimpleNamespace(cluster_numbers=lambda: None))
        takes, gathers = [], []
        for _ in range(rounds):
            takes.append(Snapshot.take(broker).loop_s)
            gathers.append(asyncio.run(Gathered.gather(broker)))
    med = statistics.median
    return {"take_ms": 1000 * med(takes), "gather_ms": 1000 * med(g.loop_s for g in gathers),
            "gather_slices": med(g.slices for g in gathers),
            "longest_slice_med_ms": 1000 * med(g.longest_s for g in gathers),
            "longest_slice_max_ms": 1000 * max(g.longest_s for g in gathers)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--partitions", type=int, nargs="+", default=[1000, 10000, 20000])
    p.add_argument("--cache", default="/tmp/lb-scrapers-cache")
    p.add_argument("--scrapes", type=int, default=3)
    p.add_argument("--gap", type=float, default=0.0)
    p.add_argument("--scrapers", type=int, default=8)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--loop", action="store_true", help="the loop time of a snapshot only")
    p.add_argument("--extra", nargs="*", default=[], help="more `logbroker serve` flags")
    args = p.parse_args()
    for n in args.partitions:
        data = make_dir(args.cache, n)
        out = loop_cost(data, args.scrapes) if args.loop else run(data, args)
        print(n, "partitions:", {k: round(v, 2) if isinstance(v, float) else v
                                  for k, v in out.items()}, flush=True)


if __name__ == "__main__":
    main()
