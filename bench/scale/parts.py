"""What a broker spends per partition a request touches (issue 32): one
fresh broker per partition count, one topic of P partitions, then, over
one raw connection (no client library in the timing: the request is
encoded before the clock starts), ``rounds`` Produce requests of P parts
(one batch of ``records`` records of 100 B each, an idempotent producer,
acks=all: appended, one barrier, answered), then ``rounds`` first Fetches
of P parts at EARLIEST (a fetch session's opening), each part's
``max_bytes`` one such batch: one batch of every partition in one answer.

    python -m bench.scale.parts                             # 1, 1,000 and 10,000 partitions
    python -m bench.scale.parts --partitions 1,1000 --json

Figures, medians of the rounds (the first produce, when every partition
is written for the first time, apart): ``ms`` from the request sent to
its answer read whole; ``us/part`` that divided by P (what a partition
adds to a request's time); ``broker CPU us/part`` the broker process's
CPU meanwhile (every thread: the barrier's worker included; the kernel's
10 ms ticks make it coarse at small P). The produce's first round is
also shown: a partition's first append opens its file and loads its
idempotent state. Brokers are ``logbroker serve`` on 127.0.0.1 in the
work dir, stopped by PID.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.common import harness
from bench.common.procfs import cpu_seconds
from bench.common.procs import BrokerProcess
from bench.scale.common import VALUE, parse_counts, per_count
from tests.support.fixtures import RawConn

TOPIC = "parts"


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    return parse_counts(argv, "scale.parts", __doc__, ("1,100", 10, 3), partitions="1,1000,10000",
                        records=(10, "records per batch (default 10)"),
                        rounds=(7, "requests of each kind (default 7)"), min_rounds=2)


def _timed(conn: RawConn, request, pid: int) -> tuple:
    """(seconds to the whole answer, broker CPU seconds meanwhile, the answer)."""
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    answer = conn.call(request, 600)
    return time.perf_counter() - t0, cpu_seconds(pid) - c0, answer


def produce_rounds(conn: RawConn, partitions: int, args, pid: int) -> list:
    from logbroker.protocol import messages as m
    from logbroker.records import build_batch

    producer = conn.call(m.InitProducerId()).producer_id
    out = []
    for r in range(args.rounds):
        batches = [build_batch([VALUE] * args.records, producer_id=producer, producer_epoch=0,
                               base_sequence=r * args.records) for _ in range(partitions)]
        request = m.Produce(acks=-1, producer_id=producer, producer_epoch=0, payload=tuple(batches),
                            parts=tuple((TOPIC, q, len(b)) for q, b in enumerate(batches)))
        wall, cpu, answer = _timed(conn, request, pid)
        failed = [p for p in answer.parts if p[2]]
        if failed:
            raise RuntimeError(f"{len(failed)} parts refused, first {failed[0]}")
        out.append((wall, cpu))
    return out, len(batches[0])


def fetch_rounds(port: int, partitions: int, batch_bytes: int, args, pid: int) -> list:
    from logbroker.protocol import messages as m

    out = []
    for _ in range(args.rounds):
        conn = RawConn(port)  # a new connection: a new session, answered in full
        try:
            request = m.Fetch(max_wait_ms=0, max_bytes=1 << 30, session_epoch=0,
                              parts=tuple((TOPIC, q, -2, batch_bytes) for q in range(partitions)))
            wall, cpu, answer = _timed(conn, request, pid)
        finally:
            conn.close()
        if len(answer.parts) != partitions or any(p.error or not p.nbytes for p in answer.parts):
            raise RuntimeError("a fetch answer is missing a partition's records")
        out.append((wall, cpu))
    return out


def _figures(rounds: list, partitions: int) -> dict:
    wall = statistics.median(w for w, _ in rounds)
    cpu = statistics.median(c for _, c in rounds)
    return {"ms": wall * 1000, "us_per_part": wall / partitions * 1e6,
            "cpu_us_per_part": cpu / partitions * 1e6}


def run_case(workdir: str, partitions: int, args, log) -> dict:
    from logbroker import Admin

    broker = BrokerProcess(os.path.join(workdir, f"p{partitions}"), "--log-level", "warning",
                           die_with_parent=True).start()
    pid = broker.pid
    try:
        with Admin(broker.bootstrap, request_timeout_ms=600_000) as admin:
            admin.create_topic(TOPIC, partitions)
        conn = RawConn(broker.port)
        try:
            produced, batch_bytes = produce_rounds(conn, partitions, args, pid)
        finally:
            conn.close()
        fetched = fetch_rounds(broker.port, partitions, batch_bytes, args, pid)
    finally:
        broker.stop()
    row = {"partitions": partitions, "pid": pid, "first_produce": _figures(produced[:1], partitions),
           "produce": _figures(produced[1:], partitions), "fetch": _figures(fetched, partitions)}
    log(f"{partitions} partitions: produce {row['produce']['ms']:.1f} ms "
        f"(first {row['first_produce']['ms']:.1f}), first fetch {row['fetch']['ms']:.1f} ms")
    return row


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    return per_count(args, workdir, run_case)


def tables(results: dict) -> list:
    p = results["params"]
    rows = [(f"{c['partitions']:,}", f"{c['produce']['ms']:.1f}",
             f"{c['produce']['us_per_part']:.1f}", f"{c['produce']['cpu_us_per_part']:.0f}",
             f"{c['first_produce']['us_per_part']:.1f}", f"{c['fetch']['ms']:.1f}",
             f"{c['fetch']['us_per_part']:.1f}", f"{c['fetch']['cpu_us_per_part']:.0f}")
            for c in results["cases"]]
    return [harness.table(
        f"A broker's cost per partition of one request: Produce of P parts (one batch of "
        f"{p['records']} records of 100 B each, acks=all), a session's first Fetch of P parts; "
        f"medians of {p['rounds']} rounds (\"1st\": the first produce, files opened)",
        ("partitions", "produce ms", "us/part", "CPU us/part", "1st us/part", "fetch ms",
         "us/part", "CPU us/part"), rows)]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale-parts", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
