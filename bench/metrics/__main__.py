"""Metrics on vs off (issue 14): the same produce workload against a broker
without and with ``--metrics-port``, alternated rounds, medians.

    python -m bench.metrics                 # 5 rounds each, ~1 minute
    python -m bench.metrics --rounds 3 --records 50000

Each round starts a fresh ``logbroker serve`` (``--port 0``, a temporary data
dir on the checkout's disk, default flush "fsync") with metrics off or on
(off first, then alternating), and in this process:

- **throughput**: ``--records`` records of 100 B (16-byte keys) through one
  ``logbroker.Producer`` (acks="all", linger_ms=0: many small requests, so
  the per-request cost of the counters shows), timed until every record is
  acknowledged;
- **round trip**: ``--sends`` single-record ``send(...).result()``, the median
  of each timed.

With metrics on, a thread scrapes ``/metrics`` every ``--scrape-s`` seconds
(1 s: 15 times Prometheus' default rate) during both phases, so the
scrape's own cost is in the figures. The broker's CPU seconds (utime +
stime from ``/proc/<pid>/stat``) per phase are reported too. Each broker is
stopped by PID (SIGTERM, then SIGKILL) and its data dir removed.
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

from bench.common.procfs import cpu_seconds
from bench.common.procs import BrokerProcess
from logbroker import Producer


class Broker:
    """A fresh broker in a temporary dir under ``base``, metrics on or off;
    ``stop`` stops it by PID and removes the dir."""

    def __init__(self, metrics: bool, base: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="metrics-ab-", dir=base)
        self.server = BrokerProcess(os.path.join(self.dir, "data"), "--log-level", "warning",
                                    *(["--metrics-port", "0"] if metrics else []),
                                    die_with_parent=True, raise_on_hang=False)
        try:
            self.server.start()
            # the metrics line follows the ready line, maybe already buffered: readline
            self.url = self.server.proc.stdout.readline().rsplit(" ", 1)[1].strip() if metrics else None
        except BaseException:
            self.stop()
            raise
        self.bootstrap = self.server.bootstrap

    def cpu_seconds(self) -> float:
        return cpu_seconds(self.server.pid)

    def stop(self) -> None:
        self.server.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class Scraper(threading.Thread):
    """Scrapes ``url`` every ``period`` s until ``stop()``; counts scrapes."""

    def __init__(self, url: str, period: float) -> None:
        super().__init__(daemon=True)
        self.url, self.period, self.scrapes = url, period, 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.period):
            with urllib.request.urlopen(self.url, timeout=10) as resp:
                resp.read()
            self.scrapes += 1

    def stop(self) -> None:
        self._stop_event.set()
        self.join(15)


def one_round(metrics: bool, args) -> dict:
    broker = Broker(metrics, args.dir)
    scraper = Scraper(broker.url, args.scrape_s) if metrics else None
    try:
        if scraper:
            scraper.start()
        value = b"v" * 100
        with Producer(broker.bootstrap, linger_ms=0) as producer:
            producer.send("ab", value, key=b"k" * 16).result(30)  # topic made, connection up
            cpu0, t0 = broker.cpu_seconds(), time.perf_counter()
            for i in range(args.records):
                producer.send("ab", value, key=b"%016d" % (i % 1024))
            producer.flush(300)
            took, cpu = time.perf_counter() - t0, broker.cpu_seconds() - cpu0
            rtts = []
            for _ in range(args.sends):
                s = time.perf_counter()
                producer.send("ab-rtt", value).result(30)
                rtts.append(time.perf_counter() - s)
        return {"records_s": args.records / took, "broker_cpu_s": cpu,
                "rtt_ms": statistics.median(rtts[len(rtts) // 10:]) * 1000,
                "scrapes": scraper.scrapes if scraper else 0}
    finally:
        if scraper:
            scraper.stop()
        broker.stop()


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.metrics", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="rounds of each (default 5)")
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--sends", type=int, default=2_000)
    ap.add_argument("--scrape-s", type=float, default=1.0)
    ap.add_argument("--dir", default=os.getcwd(), help="where the data dirs go")
    args = ap.parse_args(argv)
    results: dict[bool, list[dict]] = {False: [], True: []}
    for i in range(args.rounds * 2):
        metrics = bool(i % 2)
        r = one_round(metrics, args)
        results[metrics].append(r)
        print(f"round {i // 2 + 1} metrics {'on ' if metrics else 'off'}: "
              f"{r['records_s']:,.0f} records/s, broker CPU {r['broker_cpu_s']:.2f} s, "
              f"round trip {r['rtt_ms']:.3f} ms, scrapes {r['scrapes']}", flush=True)
    print(f"\nmedians over {args.rounds} rounds each ({args.records:,} x 100 B, acks=all, "
          f"linger_ms=0; {args.sends:,} round trips; scrape every {args.scrape_s} s when on)")
    med = {on: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for on, rs in results.items()}
    for key, label in (("records_s", "records/s"), ("broker_cpu_s", "broker CPU s"),
                       ("rtt_ms", "round trip ms")):
        off, on = med[False][key], med[True][key]
        spread = lambda on_: f"{min(r[key] for r in results[on_]):,.3g}-{max(r[key] for r in results[on_]):,.3g}"  # noqa: E731
        print(f"  {label:14} off {off:,.3f} ({spread(False)})  on {on:,.3f} ({spread(True)})  "
              f"on/off {on / off if off else float('nan'):.3f}")


if __name__ == "__main__":
    main()
