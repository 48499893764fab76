"""What another client feels while a broker is attacked (issue 29;
docs/security.md, "Threat model"): ``python -m bench.attacks``.

    python -m bench.attacks                      # 20,000 partitions, 3 rounds, ~6 minutes
    python -m bench.attacks --partitions 5000 --rounds 1 --seconds 5
    python -m bench.attacks --quick              # 1,000 partitions, 1 round, 3 s each

For each scenario, on a fresh ``logbroker serve --kafka-port 0
--metrics-port 0`` over a copy of a data dir holding ``--partitions``
empty partitions (made once by the storage layer; ``max_partitions_per_broker``
raised to fit the creation): **idle** (nothing), **bombs** (zstd
compression bombs on the Kafka listener), **create** (one CreateTopics of
``--create`` partitions), **scrapers** (8 threads scraping ``/metrics``),
**all** (the three at once), each for ``--seconds`` (create: until done).
Meanwhile another client sends a Handshake every 5 ms on our listener:
reported are its round trips' p50, p99 and max (medians over rounds), the
broker's peak memory growth, and what the attack got (bombs refused,
creation seconds, scrapes). Scenarios alternate within each round. Every
broker is stopped by PID; the work dir is removed.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys

from bench.attacks.mix import attack
from bench.common import harness
from bench.common.environment import environment
from bench.common.procs import BrokerProcess
from bench.metrics.scrapers import make_partitions
from tests.support.kafka_raw import kafka_and_metrics

SCENARIOS = {"idle": {}, "bombs": {"bombs": True}, "create": {"create": True},
             "scrapers": {"scrapers": 8}, "all": {"bombs": True, "create": True, "scrapers": 8}}


def run(args, workdir: str, err) -> dict:
    source = os.path.join(workdir, "made")
    err.print(f"making {args.partitions:,} partitions ...")
    make_partitions(source, args.partitions)
    rows = {name: [] for name in args.sections}
    for rnd in range(args.rounds):
        for name in args.sections:
            data = os.path.join(workdir, f"{name}-{rnd}")
            shutil.copytree(source, data)
            b = BrokerProcess(data, "--kafka-port", "0", "--metrics-port", "0",
                              config={"max_partitions_per_broker":
                                      args.partitions + args.create + 100})
            try:
                b.start(timeout=300)
                kafka_and_metrics(b)
                how = dict(SCENARIOS[name])
                how["create"] = args.create if how.get("create") else 0
                got = attack(b, seconds=args.seconds, **how)
            finally:
                b.kill()
                shutil.rmtree(data, ignore_errors=True)
            got["bombs"] = len(got["bombs"])
            rows[name].append(got)
            err.print(f"round {rnd + 1} {name}: p99 {got['p99_ms']:.1f} ms, max "
                      f"{got['max_ms']:.0f} ms, rss +{max(0, got['rss_grown']) >> 20} MiB")
    med = statistics.median
    summary = {name: {key: med(r[key] for r in runs) for key in
                      ("round_trips", "p50_ms", "p99_ms", "max_ms", "rss_grown", "bombs",
                       "scrapes")} | {"create_s": med(r["created"].get("seconds", 0)
                                                      for r in runs)}
               for name, runs in rows.items()}
    return {"environment": environment(workdir), "partitions": args.partitions,
            "create": args.create, "seconds": args.seconds, "rounds": args.rounds,
            "runs": rows, "summary": summary}


def tables(results: dict) -> list:
    rows = [(name, f"{s['round_trips']:,.0f}", f"{s['p50_ms']:.1f}", f"{s['p99_ms']:.1f}",
             f"{s['max_ms']:.0f}", f"{max(0, s['rss_grown']) / (1 << 20):,.0f}",
             f"{s['bombs']:.0f}" if s["bombs"] else "-",
             f"{s['create_s']:.1f}" if s["create_s"] else "-",
             f"{s['scrapes']:,.0f}" if s["scrapes"] else "-")
            for name, s in results["summary"].items()]
    return [harness.table(
        f"Another client's Handshake round trip (ms) under attack, {results['partitions']:,} "
        f"partitions, medians of {results['rounds']}",
        ("scenario", "round trips", "p50", "p99", "max", "RSS + MiB", "bombs refused",
         "create s", "scrapes"), rows)]


def main(argv=None) -> int:
    ap = harness.parser("attacks", __doc__, "1,000 partitions, 1 round, 3 s each",
                        sections=tuple(SCENARIOS))
    ap.add_argument("--partitions", type=int, default=20_000)
    ap.add_argument("--create", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    args = harness.parse(ap, argv)
    if args.quick:
        args.partitions, args.create, args.seconds, args.rounds = 1000, 1000, 3.0, 1
    return harness.main(args, "attacks", run, tables)


if __name__ == "__main__":
    sys.exit(main())
