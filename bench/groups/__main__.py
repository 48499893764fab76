"""Consumer groups bench (issue 11): rebalance time after a member crash and
after a clean leave, and the consume throughput of a group beside a single
consumer; real brokers on 127.0.0.1, every member a process of its own.

    python -m bench.groups              # single node: 3 throughput rounds, 7 crash and
                                        # 7 leave trials; etcd + 3 brokers: 5 crash trials
    python -m bench.groups --quick      # smoke test: tiny counts, one trial each, no cluster
    python -m bench.groups --only crash,leave --trials 9 --session-ms 3000
    python -m bench.groups --json       # JSON on stdout, tables on stderr

Sections (bench/groups/trials.py says exactly what is timed):

- **throughput**: ``--records`` records of ``--value-bytes`` (8-byte keys)
  over a 6-partition topic, read by one consumer and by a group of 3 (each a
  member process of a group of its own, alternating order over
  ``--rounds`` rounds), from the moment the settled group is told ``go``
  until every record is read: records/s and MB/s, medians and the ratio;
- **crash**: a group of 3 over 6 partitions with a producer writing a
  record to every partition every 5 ms; SIGKILL to one member's PID; the
  time until each of its partitions has had a record read by another
  member (median of ``--trials``), against ``session_timeout_ms`` + 1 s;
- **leave**: the same with a clean ``close()`` instead (target 1 s);
- **cluster**: the crash trials on etcd + 3 brokers (needs ``etcd``).

Members run with ``session_timeout_ms`` ``--session-ms`` (default 2000) and
``heartbeat_interval_ms`` ``--heartbeat-ms`` (200), cooperative-sticky (the
default), auto-commit every 500 ms; brokers with default settings. Every
wait is bounded, every process started is stopped by its PID, the work dir
is removed at the end (also on SIGTERM). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys

from rich.console import Console

from bench.cluster.procs import Setup
from bench.common import harness
from bench.common.environment import environment
from bench.common.stats import summary
from bench.groups.trials import QUICK, Params, fill, hand_over_trials, throughput_run

SECTIONS = ("throughput", "crash", "leave", "cluster")


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("groups", __doc__, "tiny counts, one trial each, no cluster (smoke test)",
                        sections=SECTIONS)
    for name, what in (("trials", "crash and leave trials on the single node (default 7)"),
                       ("cluster-trials", "crash trials on etcd + 3 brokers (default 5)"),
                       ("rounds", "throughput rounds (default 3)"),
                       ("records", "throughput records (default 2,000,000)"),
                       ("value-bytes", "throughput value size (default 100)"),
                       ("session-ms", "members' session_timeout_ms (default 2000)"),
                       ("heartbeat-ms", "members' heartbeat_interval_ms (default 200)")):
        ap.add_argument(f"--{name}", type=int, help=what)
    args = harness.parse(ap, argv)
    for name in ("trials", "cluster_trials", "rounds", "records", "value_bytes", "session_ms",
                 "heartbeat_ms"):
        value = getattr(args, name)
        if value is not None and value < 1:
            ap.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.quick and not args.only:
        args.sections = ("throughput", "crash", "leave")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    changes = {name: getattr(args, name) for name in ("trials", "cluster_trials", "rounds",
                                                      "records", "value_bytes", "session_ms",
                                                      "heartbeat_ms")}
    return dataclasses.replace(p, **{k: v for k, v in changes.items() if v is not None})


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    p = make_params(args)
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "sections": list(args.sections),
                     "loadavg_before": os.getloadavg()}
    single = {"throughput", "crash", "leave"} & set(args.sections)
    if single:
        results.update(on_setup("single", workdir, p, args.sections, log))
    if "cluster" in args.sections:
        if shutil.which("etcd") is None:
            raise SystemExit("etcd not found on PATH: run 'sudo tools/install-etcd.sh' "
                             "(make etcd-server), or leave out the cluster section")
        results["cluster"] = on_setup("cluster3", workdir, p, ("crash",), log)["crash"]
    results["loadavg_after"] = os.getloadavg()
    results["summary"] = summarize(results)
    results["targets"] = targets(results["summary"], p)
    return results


def on_setup(kind: str, workdir: str, p: Params, sections, log) -> dict:
    """The ``sections`` on a fresh ``kind`` setup (stopped by PID at the end)."""
    from logbroker import Admin

    log(f"starting {kind}")
    setup = Setup(kind, workdir).start()
    out: dict = {}
    try:
        with Admin(setup.bootstrap, request_timeout_ms=10_000) as admin:
            if "throughput" in sections:
                out["throughput"] = throughput(admin, setup.bootstrap, p, workdir, log)
            trials = p.trials if kind == "single" else p.cluster_trials
            for section in ("crash", "leave"):
                if section in sections:
                    log(f"{kind}: {trials} {section} trial(s), session_timeout_ms {p.session_ms}")
                    out[section] = hand_over_trials(section, admin, setup.bootstrap, p, trials,
                                                    os.path.join(setup.dir), log)
    finally:
        setup.stop()
    return out


def throughput(admin, bootstrap: str, p: Params, workdir: str, log) -> list[dict]:
    log(f"filling a {p.partitions}-partition topic with {p.records:,} x {p.value_bytes} B")
    fill(bootstrap, admin, "tput", p)
    runs = []
    for r in range(p.rounds):
        for k in ((1, p.members) if r % 2 == 0 else (p.members, 1)):
            runs.append({"round": r, **throughput_run(k, admin, bootstrap, "tput", p, workdir)})
            log(f"throughput round {r + 1}/{p.rounds}, {k} member(s): "
                f"{runs[-1]['records_per_s']:,.0f} records/s, {runs[-1]['mb_per_s']:.1f} MB/s "
                f"(per member {runs[-1]['per_member']})")
    return runs


# -- report -------------------------------------------------------------------------------------
def summarize(results: dict) -> dict:
    out: dict = {}
    for name, trials in (("crash", results.get("crash")), ("leave", results.get("leave")),
                         ("cluster_crash", results.get("cluster"))):
        if trials:
            out[name] = {"first_s": summary([t["first_s"] for t in trials]),
                         "assigned_s": summary([t["assigned_s"] for t in trials])}
    runs = results.get("throughput") or []
    for k in sorted({r["members"] for r in runs}):
        mine = [r for r in runs if r["members"] == k]
        out[f"throughput_{k}"] = {"records_per_s": summary([r["records_per_s"] for r in mine]),
                                  "mb_per_s": summary([r["mb_per_s"] for r in mine])}
    ks = sorted({r["members"] for r in runs})
    if len(ks) == 2:  # paired within a round
        ratios = [next(r for r in runs if r["round"] == i and r["members"] == ks[1])["records_per_s"]
                  / next(r for r in runs if r["round"] == i and r["members"] == ks[0])["records_per_s"]
                  for i in sorted({r["round"] for r in runs})]
        out["throughput_ratio"] = summary(ratios)
    return out


def targets(s: dict, p: Params) -> list[dict]:
    out = []
    limit = p.session_ms / 1000 + 1
    for name, what, bound in (("crash", "single node", limit), ("cluster_crash", "etcd + 3 brokers",
                                                                   limit)):
        if name in s:
            med = s[name]["first_s"]["median"]
            out.append({"target": f"rebalance after a crash, {what}: <= session_timeout_ms + 1 s "
                                  f"= {bound:g} s (median)", "measured": f"{med:.2f} s",
                        "met": med <= bound, "ratio": med / bound})
    if "leave" in s:
        med = s["leave"]["first_s"]["median"]
        out.append({"target": "rebalance after a clean leave: <= 1 s (median)",
                    "measured": f"{med:.2f} s", "met": med <= 1.0, "ratio": med})
    return out


def tables(results: dict) -> list:
    s, p = results["summary"], results["params"]
    made = []
    rows = [(label, str(s[name]["first_s"]["n"]), harness.fmt_s(s[name]["first_s"], 2),
             harness.fmt_s(s[name]["assigned_s"], 2))
            for name, label in (("crash", "crash (kill -9), single node"),
                                ("leave", "clean leave (close()), single node"),
                                ("cluster_crash", "crash (kill -9), etcd + 3 brokers"))
            if name in s]
    if rows:
        made.append(harness.table(
            f"Rebalance: 3 members, 6 partitions, session_timeout_ms {p['session_ms']}, "
            f"heartbeat_interval_ms {p['heartbeat_ms']}; seconds, median (min-max)",
            ("member taken away", "trials", "each of its partitions read by another member",
             "each of them assigned to another member"), rows))
    tput = [(f"{k} {'member' if k == 1 else 'members'}", harness.fmt_s(s[f"throughput_{k}"]
                                                                        ["records_per_s"], 0),
             harness.fmt_s(s[f"throughput_{k}"]["mb_per_s"], 1))
            for k in (1, p["members"]) if f"throughput_{k}" in s]
    if tput:
        ratio = s.get("throughput_ratio")
        title = (f"Consume throughput, {p['records']:,} x {p['value_bytes']} B over "
                 f"{p['partitions']} partitions, single node; median (min-max) of {p['rounds']}"
                 + (f"; group / single {harness.fmt_s(ratio, 2)}" if ratio else ""))
        made.append(harness.table(title, ("consumers", "records/s", "MB/s"), tput))
    if results["targets"]:
        made.append(harness.targets_table(results["targets"]))
    return made


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "groups", run, tables)


if __name__ == "__main__":
    sys.exit(main())
