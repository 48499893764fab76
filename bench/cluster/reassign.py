"""Partition reassignment (issue 30): what a move costs, and what one large
request costs the loop.

    python -m bench.cluster.reassign                      # 20 MB, unthrottled then 5 MB/s
    python -m bench.cluster.reassign --mb 50 --throttle 0 --throttle 10000000

**Move**: etcd + 3 brokers, per ``--throttle`` (``reassignment_throttle_bytes_per_s``)
a fresh cluster: a 1-partition topic (replication factor 1) filled with
``--mb`` MB of 1 KB records, then moved to another broker while one thread
sends acks=all 200-byte records, one at a time, to a partition led by the
same broker; prints the move's seconds and that producer's p50 / p99
before and during the move.

**Parts**: one single node; one AlterReassignments of 10,000 partitions of
an unknown topic (every part refused) while another connection sends
Metadata requests back to back: the request's time and the longest
Metadata round trip meanwhile (the loop held).

Every process started is stopped by PID; the work dir is removed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time

from bench.common.procs import BrokerProcess, EtcdProcess, wait_until
from logbroker import Admin, Producer
from logbroker.protocol import messages as m
from tests.support.fixtures import RawConn


def _pct(xs: list, f: float) -> float:
    return sorted(xs)[min(len(xs) - 1, int(len(xs) * f))] * 1000 if xs else float("nan")


def _replicas(admin: Admin, topic: str, p: int) -> tuple:
    return next(x.replicas for x in admin.describe_cluster([topic]).partitions if x.partition == p)


def move(work: str, mb: int, throttle: int) -> str:
    os.makedirs(work)
    with EtcdProcess(f"{work}/etcd") as etcd:
        brokers = [BrokerProcess(f"{work}/b{i}", "--broker-id", str(i), "--etcd", etcd.url,
                                 config={"reassignment_throttle_bytes_per_s": throttle})
                   for i in (1, 2, 3)]
        try:
            for b in brokers:
                b.launch()
            for b in brokers:
                b.wait_ready()
            bootstrap = ",".join(b.bootstrap for b in brokers)
            with Admin(bootstrap) as admin:
                wait_until(lambda: len(admin.describe_cluster().brokers) == 3, 15, "3 brokers")
                admin.create_topics([("big", 1, {}, 1), ("live", 3, {}, 1)])
                wait_until(lambda: len(admin.describe_cluster(["big", "live"]).partitions) == 4,
                           10, "the topics")
                (a,) = _replicas(admin, "big", 0)
                lp = next(p for p in range(3) if _replicas(admin, "live", p) == (a,))
                with Producer(bootstrap, acks="all", linger_ms=5) as producer:
                    for _ in range(mb * 1000):
                        producer.send("big", b"x" * 1000, partition=0)
                    producer.flush()
                lat, stop = [], threading.Event()

                def load() -> None:
                    with Producer(bootstrap, acks="all", linger_ms=0) as p:
                        while not stop.is_set():
                            t = time.perf_counter()
                            p.send("live", b"y" * 200, partition=lp).result(timeout=10)
                            lat.append(time.perf_counter() - t)
                            time.sleep(0.005)

                th = threading.Thread(target=load)
                th.start()
                time.sleep(1.5)
                before, lat[:] = list(lat), []
                target = 1 + a % 3
                t0 = time.monotonic()
                admin.reassign_partitions({("big", 0): [target]})
                wait_until(lambda: _replicas(admin, "big", 0) == (target,), 300, "the move")
                took = time.monotonic() - t0
                stop.set()
                th.join(30)
            return (f"throttle {throttle or 'unlimited'}: {mb} MB moved in {took:.1f} s; acks=all "
                    f"sends to the same leader p50 {_pct(before, .5):.1f} -> {_pct(lat, .5):.1f} ms, "
                    f"p99 {_pct(before, .99):.1f} -> {_pct(lat, .99):.1f} ms ({len(lat)} sends "
                    "during the move)")
        finally:
            for b in brokers:
                b.kill()


def parts(work: str) -> str:
    b = BrokerProcess(f"{work}/single").start()
    big, ping = RawConn(b.port), RawConn(b.port)
    try:
        req = m.AlterReassignments(parts=tuple(("nope", p, (0,)) for p in range(10_000)))
        worst, stop = [0.0], threading.Event()

        def pinger() -> None:
            while not stop.is_set():
                t = time.perf_counter()
                ping.call(m.Metadata(topics=()), 10)
                worst[0] = max(worst[0], time.perf_counter() - t)

        th = threading.Thread(target=pinger)
        th.start()
        time.sleep(0.3)
        worst[0] = 0.0
        t = time.perf_counter()
        resp = big.call(req, 30)
        took = time.perf_counter() - t
        stop.set()
        th.join(10)
        return (f"AlterReassignments of {len(resp.parts)} refused partitions: "
                f"{took * 1000:.0f} ms; the longest Metadata round trip meanwhile "
                f"{worst[0] * 1000:.1f} ms")
    finally:
        big.close()
        ping.close()
        b.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--throttle", type=int, action="append")
    args = ap.parse_args()
    work = tempfile.mkdtemp(prefix="bench-reassign-")
    try:
        for i, throttle in enumerate(args.throttle or [0, 5_000_000]):
            print(move(f"{work}/m{i}", args.mb, throttle), flush=True)
        print(parts(work), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
