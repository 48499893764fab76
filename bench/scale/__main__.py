"""What a broker's partitions cost (issue 32): one fresh broker per case,
one topic of P partitions, ``records`` records of 100 B spread evenly over
them by our sync ``Producer`` (acks=all, linger 5 ms), then one ``Consumer``
assigned every partition reading them all back.

    python -m bench.scale                          # 1, 100, 1,000, 10,000 partitions; fsync and lazy
    python -m bench.scale --partitions 1,1000 --rounds 3 --json
    python -m bench.scale --quick                  # 1 and 100 partitions, 5,000 records: a smoke test

Per case: the topic's creation (one CreateTopics) and the longest Metadata
round trip another client saw meanwhile; produce and consume records/s; the
CPU each side spent per record (µs: this process while producing or
consuming, the broker meanwhile), so the profile of where a record's time
goes starts here; the broker's RSS and open files once idle; its clean stop
(SIGTERM to exit) and its restart to serving on the same data. ``fsync``
is the default durability (fdatasync before every acknowledgement),
``lazy`` is ``logbroker serve --flush lazy``. Brokers are ``logbroker
serve`` on 127.0.0.1 in the work dir, stopped by PID; progress on stderr;
medians over rounds (min-max).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import statistics
import sys
import time

from bench.common import harness
from bench.common.environment import environment
from bench.common.procfs import cpu_seconds, status_kib
from bench.common.procs import BrokerProcess
from tests.support.bombs import Pinger
from tests.support.fixtures import RawConn

VALUE = b"v" * 100
FLUSHES = ("fsync", "lazy")
DEFAULT_PARTITIONS = (1, 100, 1000, 10_000)


@dataclasses.dataclass(frozen=True)
class Params:
    partitions: tuple = DEFAULT_PARTITIONS
    flushes: tuple = FLUSHES
    records: int = 100_000
    rounds: int = 1
    case_seconds: float = 300.0  # a phase stops early past this (bounded)


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("scale", __doc__, "1 and 100 partitions, 5,000 records, one round")
    ap.add_argument("--partitions", help="comma-separated partition counts "
                                         "(default 1,100,1000,10000)")
    ap.add_argument("--flush", help="comma-separated among fsync,lazy (default both)")
    ap.add_argument("--records", type=int, help="records per case (default 100,000)")
    ap.add_argument("--rounds", type=int, help="rounds (default 1)")
    args = harness.parse(ap, argv)
    try:
        if args.partitions:
            args.partitions = tuple(int(x) for x in args.partitions.split(","))
    except ValueError:
        ap.error("--partitions: comma-separated integers")
    if args.partitions and not all(1 <= p <= 100_000 for p in args.partitions):
        ap.error("--partitions: each in 1..100000")
    if args.flush:
        args.flush = tuple(x.strip() for x in args.flush.split(","))
        if set(args.flush) - set(FLUSHES):
            ap.error("--flush: among fsync,lazy")
    for name in ("records", "rounds"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name} must be >= 1")
    return args


def params_of(args: argparse.Namespace) -> Params:
    p = Params(partitions=(1, 100), records=5000) if args.quick else Params()
    given = {"partitions": args.partitions, "flushes": args.flush, "records": args.records,
             "rounds": args.rounds}
    return dataclasses.replace(p, **{k: v for k, v in given.items() if v})


def _own_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _timed(fn, pid: int) -> "tuple[float, float, float]":
    """``fn()``'s wall seconds, this process's CPU seconds and the broker's."""
    c0, b0, t0 = _own_cpu(), cpu_seconds(pid), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _own_cpu() - c0, cpu_seconds(pid) - b0


def run_case(workdir: str, partitions: int, flush: str, p: Params, log) -> dict:
    """One fresh broker: create, produce, consume, idle figures, stop, restart."""
    from logbroker import Admin, Consumer, Producer
    from logbroker.protocol import messages as m

    os.makedirs(workdir, exist_ok=True)
    data = os.path.join(workdir, f"p{partitions}-{flush}")
    extra = ("--flush", "lazy") if flush == "lazy" else ()
    broker = BrokerProcess(data, "--log-level", "warning", *extra, die_with_parent=True,
                           raise_on_hang=False).start()
    out: dict = {"partitions": partitions, "flush": flush}
    try:
        b, pid = broker.bootstrap, broker.pid
        conn = RawConn(broker.port)  # another client's Metadata round trips meanwhile
        try:
            with Pinger(lambda: conn.call(m.Metadata(topics=()), 60)) as ping, \
                    Admin(b, request_timeout_ms=600_000) as admin:
                t0 = time.perf_counter()
                admin.create_topic("scale", partitions)
                out["create_s"] = time.perf_counter() - t0
        finally:
            conn.close()
        out["create_worst_rtt_ms"] = max(ping.rtts, default=0.0) * 1000
        n, deadline = p.records, time.monotonic() + p.case_seconds

        def produce() -> None:
            with Producer(b, acks="all", linger_ms=5, request_timeout_ms=120_000) as producer:
                for i in range(n):
                    producer.send("scale", VALUE, partition=i % partitions)
                    if i % 10_000 == 0 and time.monotonic() > deadline:
                        raise TimeoutError("producing took longer than the case's bound")
                producer.flush(p.case_seconds)

        wall, own, brk = _timed(produce, pid)
        out.update(produce_rec_s=n / wall, produce_client_us=own / n * 1e6,
                   produce_broker_us=brk / n * 1e6)
        log(f"{partitions} partitions {flush}: create {out['create_s']:.2f} s, "
            f"produce {out['produce_rec_s']:,.0f} rec/s")

        def consume() -> None:
            with Consumer(b, fetch_max_wait_ms=100) as consumer:
                consumer.assign([("scale", q) for q in range(partitions)])
                consumer.seek_to_beginning()
                got = 0
                while got < n:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"consumed {got} of {n} within the case's bound")
                    got += len(consumer.poll(0.5))

        wall, own, brk = _timed(consume, pid)
        out.update(consume_rec_s=n / wall, consume_client_us=own / n * 1e6,
                   consume_broker_us=brk / n * 1e6)
        out["rss_mb"] = status_kib(pid, "VmRSS") / 1024
        out["open_files"] = len(os.listdir(f"/proc/{pid}/fd"))
        t0 = time.perf_counter()
        broker.stop(120)
        out["stop_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        broker.start(300)
        out["restart_s"] = time.perf_counter() - t0
        log(f"{partitions} partitions {flush}: consume {out['consume_rec_s']:,.0f} rec/s, "
            f"RSS {out['rss_mb']:.0f} MB, {out['open_files']} files, stop {out['stop_s']:.2f} s, "
            f"restart {out['restart_s']:.2f} s")
    finally:
        broker.stop(120)
    return out


FIGURES = ("create_s", "create_worst_rtt_ms", "produce_rec_s", "produce_client_us",
           "produce_broker_us", "consume_rec_s", "consume_client_us", "consume_broker_us",
           "rss_mb", "open_files", "stop_s", "restart_s")


def summarize(rounds: list) -> list:
    """Per (partitions, flush): each figure's median (min-max) over rounds."""
    out = []
    for i, first in enumerate(rounds[0]):
        cases = [r[i] for r in rounds]
        row = {"partitions": first["partitions"], "flush": first["flush"]}
        for f in FIGURES:
            vals = [c[f] for c in cases]
            row[f] = {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}
        out.append(row)
    return out


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    p = params_of(args)
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "loadavg_before": os.getloadavg()}
    rounds = []
    for r in range(p.rounds):
        done = []
        for partitions in p.partitions:
            for flush in p.flushes:
                done.append(run_case(os.path.join(workdir, f"r{r}"), partitions, flush, p, log))
        rounds.append(done)
    results["rounds"] = rounds
    results["summary"] = summarize(rounds)
    results["loadavg_after"] = os.getloadavg()
    return results


def tables(results: dict) -> list:
    rows = []
    for row in results["summary"]:
        med = {f: row[f]["median"] for f in FIGURES}
        rows.append((f"{row['partitions']:,}", row["flush"], f"{med['create_s']:.2f}",
                     f"{med['create_worst_rtt_ms']:.0f}", f"{med['produce_rec_s']:,.0f}",
                     f"{med['produce_client_us']:.1f} / {med['produce_broker_us']:.1f}",
                     f"{med['consume_rec_s']:,.0f}",
                     f"{med['consume_client_us']:.1f} / {med['consume_broker_us']:.1f}",
                     f"{med['rss_mb']:.0f}", f"{med['open_files']:,.0f}", f"{med['stop_s']:.2f}",
                     f"{med['restart_s']:.2f}"))
    return [harness.table(
        f"One broker, {results['params']['records']:,} records of 100 B, medians of "
        f"{results['params']['rounds']}",
        ("partitions", "flush", "create s", "worst RTT ms", "produce rec/s",
         "produce CPU us/rec client / broker", "consume rec/s",
         "consume CPU us/rec client / broker", "RSS MB", "open files", "stop s", "restart s"),
        rows)]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale", run, tables)


if __name__ == "__main__":
    sys.exit(main())
