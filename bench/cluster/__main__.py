"""Cluster benchmark (issue 10): etcd + logbroker brokers on 127.0.0.1, the
Python clients in separate processes.

    python -m bench.cluster            # full run, ~5 minutes on 2 cores
    python -m bench.cluster --quick    # smoke test: tiny counts, one round, one failover trial
    python -m bench.cluster --json     # JSON on stdout, tables on stderr
    python -m bench.cluster --only failover --trials 9

Each **round** starts, one after another, a single node without etcd
(``single``), etcd + 1 broker (``cluster1``) and etcd + 3 brokers
(``cluster3``), fresh data dirs, default settings (flush fsync, etcd with
its default raft ticks, session_timeout_ms 2000), and in each runs, per
topic replication factor (cluster3: RF=1 and RF=3, alternating order):

- **W1** 100,000 records of 1 KiB, one partition, and **W2** 500,000
  records of 100 B over 3 partitions (16-byte keys): one producer process
  (``logbroker.Producer``, acks="all", linger_ms=5, batch_size=1 MiB) until
  every record is acknowledged, then one consumer process reading it all
  back from offset 0;
- the **round trip**: 2,000 single-record ``send(...).result()``, timed each.

The client processes are the broker bench's (bench/broker/worker.py).
Around each timed section the CPU time of every process (each broker and
etcd, from ``/proc``; the client's own) is taken, with each broker's role
for the topic (leader, follower), and the machine's busy time (the CPU
used meanwhile by other sessions on record). Setups and configs alternate
their order every round; figures are medians over rounds, and the RF=3 /
RF=1 ratios are paired within a round (same cluster, same minute).

**Failover** (bench/cluster/failover.py): on a fresh etcd + 3 brokers, a
producer sends a 100 B record every 2 ms (acks=all) to a 1-partition RF=3
topic; the bench kill -9s the partition's leader and times, from the kill,
the first ack of a record sent after it, while polling the metadata for the
lease expiry and the election; then restarts the broker and restores the
preferred leader. Repeated ``--trials`` times (default 7).

Every loop stops at a count or a time limit; every process started is
stopped by PID; the work dir is removed at the end, also on error or
SIGTERM. Modules: ``procs`` (etcd, brokers, /proc), ``phases`` (parameters,
rounds), ``failover``, ``worker`` (the steady producer), ``report``
(medians, ratios, targets, tables), and ``ab`` (``python -m
bench.cluster.ab``: the single-node broker bench, this tree against an
older one).
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys

from rich.console import Console

from bench.cluster import failover
from bench.cluster.phases import QUICK, SECTIONS, Params, phase_count, run_round
from bench.cluster.report import summarize, tables, targets
from bench.common import harness
from bench.common.environment import environment


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("cluster", __doc__, "tiny counts, one round, one failover trial (smoke test)",
                        sections=SECTIONS)
    ap.add_argument("--rounds", type=int, help="rounds of every setup (default 5)")
    ap.add_argument("--trials", type=int, help="failover trials (default 7)")
    ap.add_argument("--setups", help="comma-separated among single,cluster1,cluster3 (default all)")
    ap.add_argument("--w1-records", type=int, help="W1 records (default 100,000)")
    ap.add_argument("--w2-records", type=int, help="W2 records (default 500,000)")
    ap.add_argument("--rtt-sends", type=int, help="round-trip sends (default 2,000)")
    ap.add_argument("--prefetch-mib", type=int, help="the consumers' prefetch_bytes in MiB (default 256; "
                                                     "0: the Consumer's default, 32 MiB)")
    args = harness.parse(ap, argv)
    if args.prefetch_mib is not None and args.prefetch_mib < 0:
        ap.error("--prefetch-mib must be >= 0")
    for name in ("rounds", "trials", "w1_records", "w2_records", "rtt_sends"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.setups and set(args.setups.split(",")) - {"single", "cluster1", "cluster3"}:
        ap.error("--setups takes single,cluster1,cluster3")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    changes = {"rounds": args.rounds, "failover_trials": args.trials, "w1_records": args.w1_records,
               "w2_records": args.w2_records, "rtt_sends": args.rtt_sends,
               "consumer_prefetch_bytes": None if args.prefetch_mib is None else args.prefetch_mib << 20,
               "setups": tuple(args.setups.split(",")) if args.setups else None}
    return dataclasses.replace(p, **{k: v for k, v in changes.items() if v is not None})


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    if shutil.which("etcd") is None:
        raise SystemExit("etcd not found on PATH: run 'sudo tools/install-etcd.sh' (make etcd-server)")
    p = make_params(args)
    sections = args.sections
    env = environment(workdir)
    env["etcd"] = etcd_version()
    results: dict = {"environment": env, "params": dataclasses.asdict(p), "quick": args.quick,
                     "sections": list(sections)}
    log = harness.progress_log()
    rounds = []
    total = phase_count(p, sections) if {"throughput", "roundtrip"} & set(sections) else 0
    if total:
        done = [0]

        def tick() -> None:
            done[0] += 1

        for r in range(p.rounds):
            log(f"round {r + 1}/{p.rounds}: {', '.join(p.setups)} ({done[0]}/{total} phases done)")
            rounds.append(run_round(p, workdir, r, sections, tick, log))
            shutil.rmtree(f"{workdir}/round-{r}", ignore_errors=True)
        log(f"rounds done ({done[0]}/{total} phases)")
    results["rounds"] = rounds
    if "failover" in sections:
        trial = [0]

        def tick_trial() -> None:
            trial[0] += 1
            log(f"failover trial {trial[0]}/{p.failover_trials} done")

        log(f"failover: {p.failover_trials} trial(s) on etcd + 3 brokers")
        results["failover"] = failover.run(p, workdir, tick_trial)
    results["summary"] = summarize(results)
    results["targets"] = targets(results["summary"])
    return results


def etcd_version() -> "str | None":
    import subprocess

    try:
        out = subprocess.run(["etcd", "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].split(":", 1)[1].strip() if out else None


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "cluster", run, tables)


if __name__ == "__main__":
    sys.exit(main())
