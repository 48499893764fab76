"""Single-node broker benchmark (issue 3): a real ``logbroker serve`` and the
Python clients in separate processes, over 127.0.0.1.

    python -m bench.broker            # full run, ~1-1.5 minutes on 2 cores
    python -m bench.broker --quick    # smoke test (1% of the work, one run)
    python -m bench.broker --json     # JSON on stdout, tables on stderr
    python -m bench.broker --profile /tmp/prof   # one profiled run (py-spy)

Each run starts a fresh broker (``--port 0``, a temporary data dir on the
checkout's disk, default flush policy "fsync" = fsync before every ack) and,
one client process at a time (bench/broker/worker.py):

- **W1** 200,000 records of 1 KiB and **W2** 1,000,000 records of 100 B, 16-byte
  keys (1,024 distinct): one producer process (``logbroker.Producer``,
  acks="all", linger_ms=5, batch_size=1 MiB) until every record is
  acknowledged, then one consumer process from offset 0 (``assign`` +
  ``seek_to_beginning``, ``poll`` until it has every record);
- **round trip**: 10,000 single-record ``send(...).result()``, each timed;
- **fetch probe** (fsync runs): 320 MiB of 1 KiB records in a topic with
  64 MiB segments, then its sealed segments read from offset 0 by a raw
  protocol reader (one Fetch at a time, no decoding) for >= 1 s of whole
  passes, and once by ``logbroker.Consumer``.

Runs with ``--flush lazy`` (no fsync) are interleaved for comparison. For each
phase: records/s, MB/s (key + value bytes), the client's CPU time, the
broker's CPU seconds (utime + stime, ``/proc/<pid>/stat``) and peak RSS
(``VmHWM``, reset before the phase) during the timed section. Figures are
medians over runs with min-max. Every loop stops at a count or a time limit;
every process started is stopped by PID (SIGTERM, then SIGKILL); the work dir
is removed at the end, also on error, Ctrl-C or SIGTERM.

Modules (in ``bench/broker/``): ``phases`` (parameters, runs, phases),
``worker`` (the client processes), ``server`` (processes and ``/proc``),
``profiling`` (``--profile``), ``report`` (medians, targets, tables);
``bench.common.harness`` runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from rich.console import Console

from bench.broker.phases import QUICK, SECTIONS, Params, Run, phase_names
from bench.broker.profiling import Profiler
from bench.broker.profiling import summarize as summarize_profiles
from bench.broker.report import calibration, summarize, tables, targets
from bench.common import harness
from bench.common.environment import environment


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("broker", __doc__, "1%% of the work, one run (smoke test)", sections=SECTIONS)
    ap.add_argument("--repeats", type=int, help="durable (fsync) runs, >= 3 (default 5)")
    ap.add_argument("--lazy-repeats", type=int, help="--flush lazy runs, >= 0 (default 3)")
    ap.add_argument("--linger-ms", type=float, help="producer linger_ms (default 5)")
    ap.add_argument("--batch-size", type=int, help="producer batch_size in bytes (default 1 MiB)")
    ap.add_argument("--partitions", type=int, help="partitions of the W1/W2 topics (default 1)")
    ap.add_argument("--profile", metavar="DIR", help="profiled runs (default: one durable run); profiles "
                                                     "and summary.txt go to DIR (figures not representative)")
    ap.add_argument("--profile-tool", choices=("py-spy", "cprofile"), default="py-spy",
                    help="client profiler: py-spy (all threads; default) or cprofile (main thread); "
                         "the broker is always sampled by py-spy")
    args = harness.parse(ap, argv)
    if args.repeats is not None and args.repeats < (1 if args.quick or args.profile else 3):
        ap.error("--repeats must be >= 3 (>= 1 with --quick or --profile)")
    if args.lazy_repeats is not None and args.lazy_repeats < 0:
        ap.error("--lazy-repeats must be >= 0")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    changes = {"repeats": args.repeats, "lazy_repeats": args.lazy_repeats, "linger_ms": args.linger_ms,
               "batch_size": args.batch_size, "partitions": args.partitions}
    p = dataclasses.replace(p, **{k: v for k, v in changes.items() if v is not None})
    if args.profile:  # one durable run unless told otherwise; profiles add up over runs
        p = dataclasses.replace(p, repeats=args.repeats or 1, lazy_repeats=args.lazy_repeats or 0)
    return p


def schedule(p: Params) -> list[str]:
    """Durable and lazy runs interleaved, so drift on a shared machine hits both."""
    out = []
    for i in range(max(p.repeats, p.lazy_repeats)):
        out += ["fsync"] * (i < p.repeats) + ["lazy"] * (i < p.lazy_repeats)
    return out


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    p = make_params(args)
    profiler = Profiler(args.profile, args.profile_tool) if args.profile else None
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "profiled": bool(profiler), "sections": list(args.sections)}
    plan = schedule(p)
    total = sum(len(phase_names(p, args.sections, flush)) for flush in plan)
    progress = harness.progress_bar(err, 22)
    runs = []
    with progress:
        task = progress.add_task("runs", total=total)
        for i, flush in enumerate(plan):
            progress.update(task, description=f"run {i + 1}/{len(plan)} ({flush})")
            if profiler:
                profiler.run = i
            one = Run(p, flush, workdir, lambda: progress.advance(task), profiler).run(args.sections)
            one["run"] = i
            runs.append(one)
    results["runs"] = runs
    results["summary"] = summarize(runs)
    results["calibration_ms"] = calibration(runs)
    results["targets"] = targets(results["summary"])
    if profiler:
        results["profiles"] = summarize_profiles(args.profile)
    return results


def title(results: dict) -> str:
    return (harness.headline("broker", results)
            + f"  CPU gauge {harness.fmt_s(results['calibration_ms'], 1)} ms"
            + ("  [bold red]PROFILED: figures not representative[/]" if results["profiled"] else ""))


def main(argv: "list[str] | None" = None) -> int:
    args = parse_args(argv)
    code = harness.main(args, "broker", run, tables, title)
    if args.profile:
        print(f"profiles: {args.profile}/summary.txt", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
