"""python -m bench.peers [--quick] [--repeats N] [--systems a,b] [--no-install] [--out DIR]

One command for the peer benchmark (``make bench``): installs what it needs
(apt-get: redis-server nats-server rabbitmq-server; pip: redis[hiredis]
nats-py rstream) unless ``--no-install``, then per run measures the
machine's limits (bench/peers/limits.py) and every system (bench/peers/run.py:
each started fresh on 127.0.0.1 in its own temp dir under build/, never
./data, and stopped by PID), interleaving the systems. Then it writes the
markdown section and PNG charts: into docs/benchmarks.md and docs/img/ for a
full run, into ``--out`` (and not docs/) with ``--quick`` unless ``--docs``.

Workloads (``--quick``: 1 % of the counts, one run):
  W1     200,000 records x 1 KiB values, 16-byte keys (1,024 distinct)
  W2     1,000,000 records x 100 B values, same keys
         each: one producer (timed until every record is acknowledged),
         then one consumer reading from the start (timed until it has all)
  W1/W2 window  the same records to a fresh topic in windows of 1,000
         (not scaled by --quick): send 1,000, wait until every one is
         acknowledged, send the next; rec/s and window time p50/p99
  RT     10,000 awaited single-record sends (100 B): ack p50/p99
  RT1k   10,000 awaited single-record sends (1,024 B): ack p50/p99
  scale  1,000 topics x 100 records of 100 B, round-robin, then one consumer

Every client is a fresh subprocess bounded by a count and a deadline.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import ROOT
from bench.common import harness
from bench.peers.clients import client_main

FULL = {"W1": (200_000, 1024), "W2": (1_000_000, 100), "RT": 10_000, "RT1k": 10_000, "scale": (1000, 100),
        "window": 1000}
PIP = ["redis[hiredis]", "nats-py", "rstream", "matplotlib"]
BEGIN, END = "<!-- peers:begin -->", "<!-- peers:end -->"
SECTION = "## Peers: logbroker beside Redis Streams, NATS JetStream and RabbitMQ Streams (issue 5)"


def install(err) -> None:
    """The Debian servers (bench/peers/install-servers.sh) and the Python
    clients (the ``bench`` extra) when missing."""
    print("checking the peer servers (bench/peers/install-servers.sh)", file=err, flush=True)
    subprocess.run(["bash", str(Path(__file__).with_name("install-servers.sh"))], check=True, timeout=1800,
                   env={**os.environ, "LOGBROKER_PEERS_REQUIRED": "1"})
    try:
        import hiredis  # noqa: F401
        import matplotlib  # noqa: F401
        import nats  # noqa: F401
        import redis  # noqa: F401
        import rstream  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", *PIP], check=True, timeout=600)


def versions() -> dict:
    def out(args):
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=30, check=False).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001
            return "?"
    from importlib.metadata import version
    redis_v = out(["redis-server", "--version"])
    v = {"redis-server": redis_v.split("v=", 1)[1].split()[0] if "v=" in redis_v else redis_v,
         "nats-server": out(["nats-server", "--version"]).split()[-1]}
    v["rabbitmq-server"] = out(["dpkg-query", "-W", "-f", "${Version}", "rabbitmq-server"])
    for pkg in ("logbroker", "redis", "hiredis", "nats-py", "rstream"):
        try:
            v[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            v[pkg] = "?"
    v["python"] = platform.python_version()
    return v


def sizes_for(quick: bool) -> dict:
    f = 0.01 if quick else 1.0
    return {"W1": (int(FULL["W1"][0] * f), 1024), "W2": (int(FULL["W2"][0] * f), 100),
            "RT": int(FULL["RT"] * f), "RT1k": int(FULL["RT1k"] * f),
            "scale": (int(FULL["scale"][0] * f), FULL["scale"][1]), "window": FULL["window"]}


def write_docs(section: str, path: Path) -> None:
    """Replace the peers section of docs/benchmarks.md (between the markers,
    or the old ``## Peers`` section), or append one."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    block = f"{BEGIN}\n{section}{END}"
    if BEGIN in text and END in text:
        a, b = text.index(BEGIN), text.index(END) + len(END)
        text = text[:a] + block + text[b:]
    else:
        at = text.find("\n## Peers")
        if at >= 0:
            nxt = text.find("\n## ", at + 1)
            text = text[:at] + text[nxt:] if nxt >= 0 else text[:at] + "\n"
        text = text.rstrip("\n") + f"\n\n{SECTION}\n\n{block}\n"
    path.write_text(text)


def run_all(args, sizes: dict, work: str, log) -> dict:
    from bench.common.environment import environment
    from bench.peers import limits
    from bench.peers.run import run_system

    deadline = 30.0 if args.quick else 300.0
    systems = args.systems.split(",")
    results = {"quick": args.quick, "sizes": sizes, "systems": systems, "runs": [], "limits": [],
               "command": " ".join(["python -m bench.peers", *args.argv]),
               "environment": environment(work)}
    t0 = time.perf_counter()
    for rep in range(args.repeats):
        log(f"run {rep + 1}/{args.repeats}: machine limits")
        lim_dir = tempfile.mkdtemp(prefix="limits-", dir=work)
        try:
            results["limits"].append(limits.measure(lim_dir, args.quick, log))
        except Exception as exc:  # noqa: BLE001 - a failed limit is a row, not a lost run
            log(f"limits failed: {exc}")
            results["limits"].append({"error": f"{type(exc).__name__}: {exc}"})
        finally:
            shutil.rmtree(lim_dir, ignore_errors=True)
        run: dict = {}
        for name in systems:
            log(f"run {rep + 1}/{args.repeats}: {name}")
            run_dir = tempfile.mkdtemp(prefix=f"{name}-", dir=work)
            try:
                run[name] = run_system(name, run_dir, sizes, deadline, log)
            finally:
                shutil.rmtree(run_dir, ignore_errors=True)
        results["runs"].append(run)
    results["elapsed_s"] = time.perf_counter() - t0
    results["versions"] = versions()
    return results


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = harness.parser("peers", __doc__.split("\n\n", 1)[1], "1 %% of the work, one run (a smoke test)",
                        workdir=False, report=False)
    ap.add_argument("--repeats", type=int, help="runs of everything (default 3; --quick 1)")
    ap.add_argument("--no-install", action="store_true", help="do not apt-get / pip install anything")
    ap.add_argument("--systems", default="logbroker,logbroker-lazy,redis-always,redis-everysec,nats,rabbitmq")
    ap.add_argument("--out", help="dir for the markdown and charts (default docs/ for a full run)")
    ap.add_argument("--docs", action="store_true", help="with --quick: write docs/ anyway")
    ap.add_argument("--json", help="also write the raw results (every run) to this file")
    ap.add_argument("--client", help=argparse.SUPPRESS)
    args = harness.parse(ap, argv)
    if args.client:
        return client_main(json.loads(args.client))
    args.argv = argv
    args.repeats = (1 if args.quick else 3) if args.repeats is None else args.repeats
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    from bench.peers.run import SYSTEMS
    unknown = [s for s in args.systems.split(",") if s not in SYSTEMS]
    if unknown:
        ap.error(f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    err = sys.stderr
    log = harness.progress_log(err)
    if not args.no_install:
        install(err)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so every finally stops its server
    (ROOT / "build").mkdir(exist_ok=True)
    work = tempfile.mkdtemp(prefix="peers-", dir=str(ROOT / "build"))
    try:
        results = run_all(args, sizes_for(args.quick), work, log)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    from bench.peers import charts, report

    to_docs = not args.quick or args.docs
    out = Path(args.out or (ROOT / "docs" if to_docs else ROOT / "build" / "peers-quick"))
    img = out / "img" if to_docs and not args.out else out
    names = charts.draw(report.figures(results), results["systems"], str(img))
    rel = [os.path.relpath(img / n, out) for n in names]
    section = report.markdown(results, rel)
    if to_docs and not args.out:
        write_docs(section, out / "benchmarks.md")
    else:
        out.mkdir(parents=True, exist_ok=True)
        (out / "peers.md").write_text(section)
    print(section)
    log(f"wrote {out}: {', '.join(rel)} and the markdown")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
