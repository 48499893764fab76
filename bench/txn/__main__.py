"""What a transaction costs a producer (issue 31): records per second with
1, 10 and 100 records per transaction against the same records without
transactions, and the commit latency, on one broker and on a 3-broker
cluster (RF=3), beside the machine's floors.

    python -m bench.txn                    # 3 rounds, 3,000 records per case per round
    python -m bench.txn --quick            # 1 round, 300 records, single broker only: a smoke test
    python -m bench.txn --rounds 5 --records 6000 --json
    python -m bench.txn --only single      # or cluster

Each case sends ``records`` records (``plain free`` and ``txn 100ms``:
100,000) of 1,024 B (16 B keys) to one
partition with our sync ``Producer`` (acks=all, idempotent, linger 5 ms),
in groups of ``k`` records (k = 1, 10, 100):

- ``txn k``: a transactional producer; per group ``begin_transaction``,
  ``k`` sends, ``commit_transaction`` (its time is the commit latency);
- ``plain k``: the same groups without transactions: ``k`` sends, then
  ``flush()`` (the same points where the producer waits);
- ``plain free``: every record sent, one ``flush()`` at the end (the
  producer's best case);
- ``txn 100ms``: records sent freely, a commit every 100 ms (the way
  Kafka's KIP-98 measured transactions, and Kafka Streams' exactly-once
  default ``commit.interval.ms``), against ``plain free``.

The order of the cases rotates from round to round; figures are medians
over rounds (min-max). The floors: loopback TCP 100 B round trip and a 1 KiB
``pwrite`` + ``fdatasync`` (bench.latency's), so the commit latency can be
read against "3 fsyncs + 2 round trips" (the issue's target for a commit's
p50 on one broker). Every broker is a fresh ``logbroker serve`` on
127.0.0.1 in the work dir (the checkout's disk by default), stopped by PID;
progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

from bench.cluster.procs import Setup
from bench.common import harness
from bench.common.environment import environment
from bench.common.stats import percentile_ms
from bench.latency.stages import Params as FloorParams, pingpong, pwrite_fdatasync

SIZES = (1, 10, 100)
VALUE = b"v" * 1024
SECTIONS = ("single", "cluster")


@dataclasses.dataclass(frozen=True)
class Params:
    rounds: int = 3
    records: int = 3000
    free_records: int = 100_000  # ``plain free`` and ``txn 100ms``: enough for several commits
    case_seconds: float = 120.0  # a case stops early past this (bounded)


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("txn", __doc__, "1 round, 300 records per case, single broker only",
                        sections=SECTIONS)
    ap.add_argument("--rounds", type=int, help="rounds (default 3)")
    ap.add_argument("--records", type=int, help="records per case per round (default 3,000)")
    args = harness.parse(ap, argv)
    for name in ("rounds", "records"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name} must be >= 1")
    if args.quick and not getattr(args, "only", None):
        args.sections = ("single",)
    return args


INTERVAL_S = 0.1  # ``txn 100ms``: a commit this often


def cases() -> list[str]:
    return [f"{kind} {k}" for k in SIZES for kind in ("txn", "plain")] + ["plain free",
                                                                          "txn 100ms"]


def run_case(bootstrap: str, topic: str, case: str, p: Params, tag: str) -> dict:
    """One case: records/s and, for ``txn k``, each commit's latency."""
    from logbroker import Producer

    kind, size = case.split()
    total = p.free_records if size in ("free", "100ms") else p.records
    k = total if size in ("free", "100ms") else int(size)
    settings = dict(acks="all", linger_ms=5, request_timeout_ms=30_000)
    if kind == "txn":
        settings["transactional_id"] = f"bench-{tag}"
    commits: list[int] = []
    with Producer(bootstrap, **settings) as producer:
        if kind == "txn":
            producer.init_transactions()
        deadline = time.monotonic() + p.case_seconds
        started = time.perf_counter()
        sent = 0
        while sent < total and time.monotonic() < deadline:
            n = min(k, total - sent)
            if kind == "txn":
                producer.begin_transaction()
            due = time.perf_counter() + INTERVAL_S
            for i in range(n):
                producer.send(topic, VALUE, key=b"%016d" % (sent + i), partition=0)
                if size == "100ms" and time.perf_counter() >= due:
                    n = i + 1
                    break
            if kind == "txn":
                t0 = time.perf_counter_ns()
                producer.commit_transaction()
                commits.append(time.perf_counter_ns() - t0)
            else:
                producer.flush()
            sent += n
        elapsed = time.perf_counter() - started
    out = {"records": sent, "seconds": elapsed, "records_per_s": sent / elapsed}
    if commits:
        ordered = sorted(commits)
        out.update(commit_p50_ms=percentile_ms(ordered, 0.5), commit_p99_ms=percentile_ms(ordered, 0.99),
                   commits=len(ordered))
    return out


def run_setup(kind: str, workdir: str, p: Params, log) -> dict:
    """Every case ``p.rounds`` times on one fresh setup (single: one broker;
    cluster: three, RF=3), the order rotating; medians per case."""
    from logbroker import Admin

    setup = Setup("single" if kind == "single" else "cluster3", workdir).start()
    rounds: list[dict] = []
    try:
        rtt = broker_rtt(next(iter(setup.brokers.values())).port)
        log(f"{kind}: a Metadata round trip to the broker p50 {rtt['p50_ms']:.3f} ms")
        names = cases()
        with Admin(setup.bootstrap) as admin:
            for r in range(p.rounds):
                shift = r % len(names)
                done = {}
                for case in names[shift:] + names[:shift]:
                    topic = f"t-{r}-{case.replace(' ', '-')}"
                    admin.create_topic(topic, 1,
                                       replication_factor=3 if kind == "cluster" else None)
                    done[case] = run_case(setup.bootstrap, topic, case, p, f"{r}-{case}")
                    log(f"{kind} round {r + 1}/{p.rounds} {case}: "
                        f"{done[case]['records_per_s']:,.0f} rec/s"
                        + (f", commit p50 {done[case]['commit_p50_ms']:.2f} ms"
                           if "commit_p50_ms" in done[case] else ""))
                rounds.append(done)
    finally:
        setup.stop()
    return {"rounds": rounds, "summary": summarize(rounds), "broker_rtt": rtt}


def broker_rtt(port: int, n: int = 2000) -> dict:
    """Our stack's floor for one request: ``n`` Metadata (no topics) round
    trips from a plain socket to the broker, one at a time."""
    from logbroker.protocol import messages as m
    from tests.support.fixtures import RawConn

    conn = RawConn(port)
    try:
        lat = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            conn.call(m.Metadata(topics=()), 10)
            lat.append(time.perf_counter_ns() - t0)
    finally:
        conn.close()
    lat.sort()
    return {"p50_ms": percentile_ms(lat, 0.5), "p99_ms": percentile_ms(lat, 0.99)}


def _med(values: list) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def summarize(rounds: list[dict]) -> dict:
    out = {}
    for case in rounds[0]:
        row = {"records_per_s": _med([r[case]["records_per_s"] for r in rounds])}
        if "commit_p50_ms" in rounds[0][case]:
            row["commit_p50_ms"] = _med([r[case]["commit_p50_ms"] for r in rounds])
            row["commit_p99_ms"] = _med([r[case]["commit_p99_ms"] for r in rounds])
        out[case] = row
    free = out["plain free"]["records_per_s"]["median"]
    for k in SIZES:
        txn, plain = out[f"txn {k}"]["records_per_s"], out[f"plain {k}"]["records_per_s"]
        out[f"txn {k}"]["vs_plain"] = txn["median"] / plain["median"]
        out[f"txn {k}"]["vs_free"] = txn["median"] / free
    if "txn 100ms" in out:
        out["txn 100ms"]["vs_free"] = out["txn 100ms"]["records_per_s"]["median"] / free
    return out


def floors(workdir: str, log) -> dict:
    fp = FloorParams(rounds=1, sends=2000)
    rtt = pingpong(fp)
    sync = pwrite_fdatasync(os.path.join(workdir, "fdatasync"), fp, preallocate=False)
    log(f"floors: rtt p50 {rtt['p50_ms']:.3f} ms, fdatasync p50 {sync['p50_ms']:.3f} ms")
    return {"rtt": rtt, "fdatasync": sync,
            "three_fsyncs_two_rtts_ms": 3 * sync["p50_ms"] + 2 * rtt["p50_ms"]}


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    p = Params(rounds=1, records=300, free_records=3000) if args.quick else Params()
    p = dataclasses.replace(p, **{n: getattr(args, n) for n in ("rounds", "records")
                                  if getattr(args, n) is not None})
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "loadavg_before": os.getloadavg()}
    results["floors"] = floors(workdir, log)
    for kind in args.sections:
        results[kind] = run_setup(kind, os.path.join(workdir, kind), p, log)
    results["loadavg_after"] = os.getloadavg()
    return results


def _range(s: dict, fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}-{fmt.format(s['max'])})"


def tables(results: dict) -> list:
    made = []
    f = results["floors"]
    made.append(harness.table("Floors (p50)", ("loopback RTT ms", "fdatasync 1 KiB ms",
                                               "3 fsyncs + 2 RTT ms"),
                              [(f"{f['rtt']['p50_ms']:.3f}", f"{f['fdatasync']['p50_ms']:.3f}",
                                f"{f['three_fsyncs_two_rtts_ms']:.3f}")]))
    for kind in SECTIONS:
        if kind not in results:
            continue
        s = results[kind]["summary"]
        rtt = results[kind]["broker_rtt"]["p50_ms"]
        made.append(harness.table(
            f"{'One broker' if kind == 'single' else 'Three brokers'}: our stack's floor (p50)",
            ("Metadata round trip ms", "3 fsyncs + 2 such round trips ms"),
            [(f"{rtt:.3f}", f"{3 * f['fdatasync']['p50_ms'] + 2 * rtt:.3f}")]))
        rows = []
        for case in cases():
            row = s[case]
            rows.append((case, _range(row["records_per_s"]),
                         f"{row['vs_plain']:.2f}x" if "vs_plain" in row else "",
                         f"{row['vs_free']:.2f}x" if "vs_free" in row else "",
                         _range(row["commit_p50_ms"], "{:.2f}") if "commit_p50_ms" in row else "",
                         _range(row["commit_p99_ms"], "{:.2f}") if "commit_p99_ms" in row else ""))
        made.append(harness.table(
            f"{'One broker' if kind == 'single' else 'Three brokers, RF=3'}: 1 KiB records, "
            f"acks=all", ("case", "records/s", "vs plain k", "vs plain free", "commit p50 ms",
                          "commit p99 ms"), rows))
    return made


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "txn", run, tables)


if __name__ == "__main__":
    sys.exit(main())
