"""What a broker's partitions cost (issue 32): one fresh broker per case,
one topic of P partitions, ``records`` records of 100 B spread evenly over
them by our sync ``Producer`` (acks=all, linger 5 ms), then one ``Consumer``
assigned every partition reading them all back.

    python -m bench.scale                          # 1, 100, 1,000, 10,000, 50,000 partitions; fsync and lazy
    python -m bench.scale --partitions 1,1000 --rounds 3 --json
    python -m bench.scale --quick                  # 1 and 100 partitions, 5,000 records: a smoke test
    python -m bench.scale --no-redis --rf3 0       # our single broker only

Per case: the topic's creation (one CreateTopics; past 10,000 partitions,
one per topic of 10,000) and the longest Metadata round trip another client
saw meanwhile; produce and consume records/s; the
CPU each side spent per record (µs: this process while producing or
consuming, in brackets its calling thread's, where ``send()`` and
``poll()`` run, the rest its client's I/O thread's; the broker
meanwhile), so the profile of where a record's time goes starts here;
the broker's RSS and open files once idle, and the CPU
it spends alone for 10 s after (housekeeping, timers: "idle costs
nothing"); then the CPU a consumer following every partition costs itself
and the broker while nothing new arrives (% of a core over 5 s: fetch
sessions); its clean stop
(SIGTERM to exit) and its restart to serving on the same data. ``fsync``
is the default durability (fdatasync before every acknowledgement),
``lazy`` is ``logbroker serve --flush lazy``. Brokers are ``logbroker
serve`` on 127.0.0.1 in the work dir, stopped by PID; progress on stderr;
medians over rounds (min-max).

Beside them, per partition count, the same records on Redis Streams with
``appendfsync always``, one stream per partition (``--no-redis`` skips it;
redis_case.py: XADD pipelines of 1,000 commands per round trip, read back
by XREAD over as many streams at a time as make ~1,000 entries a reply);
and once per round a topic of ``--rf3`` partitions (default 1,000; 0 skips)
with replication factor 3 on etcd + 3 brokers, fsync, produced with
acks=all and consumed the same way (cluster_case.py). Each on a fresh
server or cluster.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

from bench.common import harness
from bench.common.environment import environment
from bench.common.procfs import cpu_seconds, status_kib
from bench.common.procs import BrokerProcess
from bench.scale import cluster_case, redis_case
from bench.scale.common import consume, follow, spread, timed_calls, timed_produce, topics_of
from bench.scale.ratios import ratio_table
from tests.support.bombs import Pinger
from tests.support.fixtures import RawConn

FLUSHES = ("fsync", "lazy")
DEFAULT_PARTITIONS = (1, 100, 1000, 10_000, 50_000)


@dataclasses.dataclass(frozen=True)
class Params:
    partitions: tuple = DEFAULT_PARTITIONS
    flushes: tuple = FLUSHES
    records: int = 100_000
    rounds: int = 1
    case_seconds: float = 300.0  # a phase stops early past this (bounded)
    redis: bool = True  # the Redis column: appendfsync always, one stream per partition
    rf3: int = 1000  # partitions of the RF=3 row on etcd + 3 brokers (0: none)
    journal: bool = True  # False: many logs' group commit by one syncfs (decision 103)
    idle_s: float = 10.0  # the idle broker's CPU is measured this long (two housekeeping passes)
    follow_s: float = 5.0  # a consumer following every partition, nothing new: CPU over this long


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("scale", __doc__, "1 and 100 partitions, 5,000 records, one round")
    ap.add_argument("--partitions", help="comma-separated partition counts (default "
                                         "1,100,1000,10000,50000; past 10,000: topics of 10,000)")
    ap.add_argument("--flush", help="comma-separated among fsync,lazy (default both)")
    ap.add_argument("--records", type=int, help="records per case (default 100,000)")
    ap.add_argument("--rounds", type=int, help="rounds (default 1)")
    ap.add_argument("--redis", action=argparse.BooleanOptionalAction, default=True,
                    help="the Redis (appendfsync always) column, one stream per partition "
                         "(default on)")
    ap.add_argument("--journal", action=argparse.BooleanOptionalAction, default=True,
                    help="the brokers' write-ahead journal (default on; off: one syncfs "
                         "per many-log group commit, for an A/B)")
    ap.add_argument("--rf3", type=int, metavar="PARTITIONS",
                    help="partitions of the RF=3 row on etcd + 3 brokers (default 1000, "
                         "--quick 12; 0 skips it)")
    args = harness.parse(ap, argv)
    if args.rf3 is not None and not 0 <= args.rf3 <= 100_000:
        ap.error("--rf3: 0..100000")
    if not args.render:  # say what is missing before anything runs
        rf3 = args.rf3 if args.rf3 is not None else 1
        for why in (args.redis and redis_case.redis_missing(),
                    rf3 and cluster_case.etcd_missing()):
            if why:
                ap.error(why)
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
    p = Params(partitions=(1, 100), records=5000, rf3=12, idle_s=1.0, follow_s=1.0) if args.quick \
        else Params()
    given = {"partitions": args.partitions, "flushes": args.flush, "records": args.records,
             "rounds": args.rounds}
    p = dataclasses.replace(p, redis=args.redis, journal=args.journal,
                            **{k: v for k, v in given.items() if v})
    return p if args.rf3 is None else dataclasses.replace(p, rf3=args.rf3)


def run_case(workdir: str, partitions: int, flush: str, p: Params, log) -> dict:
    """One fresh broker: create, produce, consume, idle figures, stop, restart."""
    from logbroker import Admin
    from logbroker.protocol import messages as m

    os.makedirs(workdir, exist_ok=True)
    data = os.path.join(workdir, f"p{partitions}-{flush}")
    extra = ("--flush", "lazy") if flush == "lazy" else ()
    # past the default 50,000 partitions per broker (docs/security.md) the case raises it
    config = {"max_partitions_per_broker": partitions} if partitions > 50_000 else {}
    if not p.journal:
        config["storage"] = {"journal": False}
    broker = BrokerProcess(data, "--log-level", "warning", *extra, config=config or None,
                           die_with_parent=True, raise_on_hang=False).start()
    out: dict = {"case": "broker", "partitions": partitions, "flush": flush, "journal": p.journal}
    try:
        b, pid = broker.bootstrap, broker.pid
        conn = RawConn(broker.port)  # another client's Metadata round trips meanwhile
        try:
            with Pinger(lambda: conn.call(m.Metadata(topics=()), 60)) as ping, \
                    Admin(b, request_timeout_ms=600_000) as admin:
                t0 = time.perf_counter()
                for topic, count in topics_of(partitions):
                    admin.create_topic(topic, count)
                out["create_s"] = time.perf_counter() - t0
        finally:
            conn.close()
        out["create_worst_rtt_ms"] = max(ping.rtts, default=0.0) * 1000
        n, deadline = p.records, time.monotonic() + p.case_seconds
        wall, own, caller, brk = timed_produce(b, partitions, n, deadline, p.case_seconds, [pid])
        out.update(produce_rec_s=n / wall, produce_client_us=own / n * 1e6,
                   produce_caller_us=caller / n * 1e6, produce_broker_us=brk / n * 1e6)
        log(f"{partitions} partitions {flush}: create {out['create_s']:.2f} s, "
            f"produce {out['produce_rec_s']:,.0f} rec/s")
        wall, own, caller, brk, _ = timed_calls(lambda: consume(b, partitions, n, deadline), [pid])
        out.update(consume_rec_s=n / wall, consume_client_us=own / n * 1e6,
                   consume_caller_us=caller / n * 1e6, consume_broker_us=brk / n * 1e6)
        out["rss_mb"] = status_kib(pid, "VmRSS") / 1024
        out["open_files"] = len(os.listdir(f"/proc/{pid}/fd"))
        c0, t0 = cpu_seconds(pid), time.perf_counter()
        time.sleep(p.idle_s)  # nobody connected: what the broker does alone
        out["idle_cpu_pct"] = (cpu_seconds(pid) - c0) / (time.perf_counter() - t0) * 100
        # after the idle window (its periodic checkpoint of every partition just written)
        out["follow_client_pct"], out["follow_broker_pct"] = follow(b, partitions, p.follow_s,
                                                                    [pid])
        t0 = time.perf_counter()
        broker.stop(120)
        out["stop_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        broker.start(300)
        out["restart_s"] = time.perf_counter() - t0
        log(f"{partitions} partitions {flush}: consume {out['consume_rec_s']:,.0f} rec/s, "
            f"RSS {out['rss_mb']:.0f} MB, {out['open_files']} files, idle CPU "
            f"{out['idle_cpu_pct']:.1f}%, stop {out['stop_s']:.2f} s, "
            f"restart {out['restart_s']:.2f} s")
    finally:
        broker.stop(120)
    return out


FIGURES = ("create_s", "create_worst_rtt_ms", "produce_rec_s", "produce_client_us",
           "produce_caller_us", "produce_broker_us", "consume_rec_s", "consume_client_us",
           "consume_caller_us", "consume_broker_us",
           "follow_client_pct", "follow_broker_pct", "rss_mb", "open_files", "idle_cpu_pct",
           "stop_s", "restart_s")


CASE_FIGURES = {"broker": FIGURES, "redis": redis_case.FIGURES, "rf3": cluster_case.FIGURES}


def summarize(rounds: list) -> list:
    """Per case (our broker, Redis, RF=3; partitions; flush), in the order
    every round ran them: each figure's median (min-max) over rounds."""
    out = []
    for i, first in enumerate(rounds[0]):
        cases, kind = [r[i] for r in rounds], first.get("case", "broker")
        row = {"case": kind, "partitions": first["partitions"], "flush": first["flush"]}
        row.update({f: spread([c[f] for c in cases]) for f in CASE_FIGURES[kind]})
        out.append(row)
    return out


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    p = params_of(args)
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "loadavg_before": os.getloadavg()}
    rounds = []
    for r in range(p.rounds):
        done, rdir = [], os.path.join(workdir, f"r{r}")
        for partitions in p.partitions:
            for flush in p.flushes:
                done.append(run_case(rdir, partitions, flush, p, log))
            if p.redis:
                done.append(redis_case.run_redis_case(rdir, partitions, p.records, p.case_seconds,
                                                      log))
        if p.rf3:
            done.append(cluster_case.run_rf3_case(rdir, p.rf3, p.records, p.case_seconds, log))
        rounds.append(done)
    results["rounds"] = rounds
    results["summary"] = summarize(rounds)
    results["loadavg_after"] = os.getloadavg()
    return results


def _medians(row: dict) -> dict:
    return {f: v["median"] for f, v in row.items() if isinstance(v, dict) and "median" in v}


def cell(f: str, fmt: str, med: dict) -> str:
    return format(med[f], fmt) if f in med else "-"


def tables(results: dict) -> list:
    rows, summary, params = [], results["summary"], results["params"]
    for row in summary:
        kind, med = row.get("case", "broker"), _medians(row)
        if kind == "redis":
            continue
        flush = "fsync, RF=3" if kind == "rf3" else row["flush"]
        restart = f"{med['restart_s']:.2f}" if "restart_s" in med else "-"
        idle = f"{med['idle_cpu_pct']:.1f}" if "idle_cpu_pct" in med else "-"
        follows = f"{med['follow_client_pct']:.1f} / {med['follow_broker_pct']:.1f}" \
            if "follow_client_pct" in med else "-"
        rows.append((f"{row['partitions']:,}", flush, f"{med['create_s']:.2f}",
                     f"{med['create_worst_rtt_ms']:.0f}", f"{med['produce_rec_s']:,.0f}",
                     _cpu(med, "produce"), f"{med['consume_rec_s']:,.0f}", _cpu(med, "consume"),
                     follows, f"{med['rss_mb']:.0f}", f"{med['open_files']:,.0f}", idle,
                     f"{med['stop_s']:.2f}", restart))
    rf3 = " (RF=3: etcd + 3 brokers; broker CPU of the three, RSS and files of the one " \
          "leading most partitions)" if any(r.get("case") == "rf3" for r in summary) else ""
    made = [harness.table(
        f"One broker, {params['records']:,} records of 100 B, medians of {params['rounds']}{rf3}",
        ("partitions", "flush", "create s", "worst RTT ms", "produce rec/s",
         "produce CPU us/rec client (caller) / broker", "consume rec/s",
         "consume CPU us/rec client (caller) / broker", "follow CPU % client / broker", "RSS MB",
         "open files", "idle CPU %", "stop s", "restart s"),
        rows)]
    against_one = ratio_table(results)
    if against_one is not None:
        made.append(against_one)
    redis = [r for r in summary if r.get("case") == "redis"]
    if redis:
        made.append(redis_table(summary, redis, params))
    return made


def _cpu(med: dict, phase: str) -> str:
    """A phase's CPU per record: the client's (its calling thread's in
    brackets: the rest is its I/O thread's; runs before it have none) / the
    broker's."""
    caller = med.get(f"{phase}_caller_us")
    client = f"{med[f'{phase}_client_us']:.1f}" + ("" if caller is None else f" ({caller:.1f})")
    return f"{client} / {med[f'{phase}_broker_us']:.1f}"


def redis_table(summary: list, redis: list, params: dict):
    """Per partition count: our broker (fsync if it ran) beside Redis."""
    ours = {}
    for row in summary:
        if row.get("case", "broker") == "broker" and (row["partitions"] not in ours
                                                      or row["flush"] == "fsync"):
            ours[row["partitions"]] = row
    flush = next(iter(ours.values()))["flush"] if ours else "fsync"
    rows = []
    for row in redis:
        red, our = _medians(row), _medians(ours.get(row["partitions"], {}))
        rows.append((f"{row['partitions']:,}", cell("produce_rec_s", ",.0f", our),
                     cell("produce_rec_s", ",.0f", red), cell("consume_rec_s", ",.0f", our),
                     cell("consume_rec_s", ",.0f", red), cell("rss_mb", ".0f", our),
                     cell("rss_mb", ".0f", red)))
    return harness.table(
        f"Beside Redis Streams (appendfsync always), one stream per partition, "
        f"{params['records']:,} records of 100 B: XADD pipelines of {redis_case.BATCH:,}, "
        f"XREAD ~{redis_case.BATCH:,} entries a reply; medians of {params['rounds']}",
        ("partitions", f"logbroker {flush} produce rec/s", "Redis produce rec/s",
         f"logbroker {flush} consume rec/s", "Redis consume rec/s", "logbroker RSS MB",
         "Redis RSS MB"), rows)


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale", run, tables)


if __name__ == "__main__":
    sys.exit(main())
