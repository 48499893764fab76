"""A/B of the single-node broker bench: this tree against an older one.

    git worktree add /tmp/wt-base 881c8e7
    python -m bench.cluster.ab --base /tmp/wt-base/src            # 3 pairs, ~5 minutes here
    python -m bench.cluster.ab --base /tmp/wt-base/src --quick    # one pair of --quick runs

Runs ``python -m bench.broker --json`` (this checkout's bench code, always)
alternately against this tree's ``src/`` (A, "new") and against ``--base``
(B, "base": the same command with ``PYTHONPATH=<base>``, which comes before
the editable install on ``sys.path``; the broker the bench starts is the
venv's ``logbroker`` console script, a Python process that inherits the
variable, so broker and clients both run the base code). Pairs alternate
their order (new-base, base-new, ...) so drift on a shared machine hits
both sides. Before the runs, each side's ``logbroker.__file__`` is checked
from a fresh process and from the console script's interpreter.

Reported per phase: the median over all durable (fsync) broker runs of each
side, new/base of those medians, and the median of the per-pair ratios
(each pair: the median of its new invocation / of its base invocation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from rich.console import Console

from bench import ROOT
from bench.common import harness
from bench.common.procs import LOGBROKER
from bench.common.stats import summary

# (phase, metric, label, higher is better)
METRICS = (("W1.produce", "records_per_s", "W1 produce rec/s", True),
           ("W1.consume", "records_per_s", "W1 consume rec/s", True),
           ("W2.produce", "records_per_s", "W2 produce rec/s", True),
           ("W2.consume", "records_per_s", "W2 consume rec/s", True),
           ("roundtrip", "p50_ms", "round trip p50 ms", False),
           ("roundtrip", "p99_ms", "round trip p99 ms", False),
           ("roundtrip.raw", "p50_ms", "raw-socket round trip p50 ms", False),
           ("fetch.raw", "gb_per_s", "fetch of sealed data, raw reader GB/s", True),
           ("fetch.consumer", "gb_per_s", "fetch of sealed data, Consumer GB/s", True))


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("cluster.ab", __doc__, "one pair of 'bench.broker --quick' runs (smoke test)")
    ap.add_argument("--base", required=True, help="the older tree's src/ dir (put first on PYTHONPATH)")
    ap.add_argument("--pairs", type=int, default=3, help="new/base pairs, alternating order (default 3)")
    ap.add_argument("--repeats", type=int, default=3, help="durable runs per bench.broker invocation (default 3)")
    ap.add_argument("--lazy-repeats", type=int, default=0, help="--flush lazy runs per invocation (default 0)")
    args = harness.parse(ap, argv)
    if args.pairs < 1 or args.repeats < 1 or args.lazy_repeats < 0:
        ap.error("--pairs and --repeats must be >= 1, --lazy-repeats >= 0")
    if not os.path.isdir(os.path.join(args.base, "logbroker")):
        ap.error(f"--base {args.base}: no logbroker package there")
    return args


def side_env(base: "str | None") -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if base:
        env["PYTHONPATH"] = os.path.abspath(base)
    return env


def where(env: dict) -> dict:
    """Which logbroker each side runs: a plain interpreter's import and the
    console script's interpreter (the broker bench starts brokers with it)."""
    probe = "import logbroker; print(logbroker.__file__)"
    with open(LOGBROKER) as fh:
        shebang = fh.readline()[2:].strip()
    out = {}
    for name, exe in (("python", sys.executable), ("logbroker script", shebang)):
        out[name] = subprocess.run([exe, "-c", probe], env=env, capture_output=True, text=True, timeout=60,
                                   cwd=str(ROOT)).stdout.strip()
    return out


def git_of(src: str) -> str:
    r = subprocess.run(["git", "-C", src, "log", "-1", "--format=%h %s"], capture_output=True, text=True, timeout=10)
    dirty = subprocess.run(["git", "-C", src, "status", "--porcelain", "."], capture_output=True, text=True,
                           timeout=10).stdout.strip()
    return r.stdout.strip()[:90] + (" + uncommitted changes" if dirty else "")


def invoke(args, env: dict, workdir: str, label: str, i: int) -> dict:
    cmd = [sys.executable, "-m", "bench.broker", "--json", "--dir", workdir]
    cmd += ["--quick"] if args.quick else ["--repeats", str(args.repeats), "--lazy-repeats", str(args.lazy_repeats)]
    log_path = os.path.join(workdir, f"{i:02d}-{label}.stderr")
    with open(log_path, "w") as err:
        proc = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=err, text=True, cwd=str(ROOT),
                              timeout=1800)
    if proc.returncode != 0:
        with open(log_path) as fh:
            raise RuntimeError(f"{' '.join(cmd)} ({label}) failed:\n{fh.read()[-3000:]}")
    return json.loads(proc.stdout)


def values(out: dict, phase: str, metric: str) -> list[float]:
    return [r["phases"][phase][metric] for r in out["runs"] if r["flush"] == "fsync"
            and phase in r["phases"] and metric in r["phases"][phase]]


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    from bench.common.environment import environment

    log = harness.progress_log()
    machine = environment(workdir)
    sides = {"new": side_env(None), "base": side_env(args.base)}
    trees = {"new": {"src": str(ROOT / "src"), "git": git_of(str(ROOT / "src"))},
             "base": {"src": os.path.abspath(args.base), "git": git_of(args.base)}}
    for name, env in sides.items():
        trees[name]["imports"] = where(env)
        for what, path in trees[name]["imports"].items():
            if not path.startswith(trees[name]["src"]):
                raise SystemExit(f"{name}: {what} imports logbroker from {path!r}, not {trees[name]['src']}")
    log(f"new: {trees['new']['git']}; base: {trees['base']['git']}")
    pairs = 1 if args.quick else args.pairs
    invocations = []
    for i in range(pairs):
        order = ("new", "base") if i % 2 == 0 else ("base", "new")
        pair = {}
        for name in order:
            log(f"pair {i + 1}/{pairs}: bench.broker on {name} ...")
            t0 = time.perf_counter()
            pair[name] = invoke(args, sides[name], workdir, name, len(invocations))
            invocations.append({"pair": i, "side": name, "seconds": time.perf_counter() - t0,
                                "calibration_ms": pair[name].get("calibration_ms"),
                                "values": {f"{ph}.{m}": values(pair[name], ph, m) for ph, m, _, _ in METRICS}})
            log(f"pair {i + 1}/{pairs}: {name} done in {invocations[-1]['seconds']:.0f} s")
    rows = {}
    for phase, metric, label, _ in METRICS:
        key = f"{phase}.{metric}"
        per = {s: [v for inv in invocations if inv["side"] == s for v in inv["values"][key]] for s in sides}
        if not per["new"] or not per["base"]:
            continue
        paired = []
        for i in range(pairs):
            a, b = (next(inv["values"][key] for inv in invocations if inv["pair"] == i and inv["side"] == s)
                    for s in ("new", "base"))
            if a and b:
                paired.append(summary(a)["median"] / summary(b)["median"])
        new, base = summary(per["new"]), summary(per["base"])
        rows[key] = {"label": label, "new": new, "base": base, "ratio": new["median"] / base["median"],
                     "paired": summary(paired)}
    return {"environment": machine, "trees": trees, "pairs": pairs, "quick": args.quick,
            "repeats": args.repeats, "lazy_repeats": args.lazy_repeats, "invocations": invocations, "rows": rows}


def tables(results: dict) -> list:
    rows = []
    for key, r in results["rows"].items():
        digits = 3 if key.endswith(("_ms", "gb_per_s")) else 0
        rows.append((r["label"], harness.fmt_s(r["base"], digits), harness.fmt_s(r["new"], digits),
                     f"{r['ratio']:.2f}", harness.fmt_s(r["paired"], 2)))
    t = results["trees"]
    return [harness.table(f"Single-node broker bench (bench.broker, durable runs): new = {t['new']['git']}; "
                          f"base = {t['base']['git']} — median (min–max) of every durable run per side",
                          ("phase", "base", "new", "new ÷ base (medians)", "new ÷ base per pair, median (min–max)"),
                          rows)]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "cluster-ab", run, tables)


if __name__ == "__main__":
    sys.exit(main())
