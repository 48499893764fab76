"""Where a durable round trip's time goes (issue 12): one record (1,024 B
value + 16 B key, acks=all) sent and waited for, stage by stage, from the
machine's floors up to the client library, with the broker's CPU, context
switches and syscalls per send.

    python -m bench.latency               # 3 rounds, 3,000 timed sends per stage per round
    python -m bench.latency --quick       # 1 round, 300 sends: a smoke test
    python -m bench.latency --rounds 5 --sends 5000 --json

Each round runs every stage once (the order rotates from round to round),
each after 200 warm-up sends; figures are the median over rounds of each
stage's p50 (and p99), with min-max. Stages (bench/latency/stages.py):

1. floors: loopback TCP 100 B ping-pong (blocking sockets, an echo
   process); 1 KiB ``pwrite`` + ``fdatasync`` on a growing file, and on a
   file zero-filled to its final size and fsynced first (no size change,
   so no inode journal commit per fdatasync);
2. the broker without the client library: a blocking socket re-sending one
   prebuilt Produce (``bench.broker.worker``'s ``roundtrip_raw``) to a lazy
   and to an fsync broker; the broker's user and system CPU per send
   (``/proc/<pid>/stat``) and its context switches per send (all threads);
3. the client: the sync ``Producer.send(...).result()`` against a lazy and
   an fsync broker, the asyncio producer (``await (await send(...))``)
   against an fsync broker; this process's CPU per send;
4. the sync client split, fsync broker: this bench's producer instance has
   its response callback stamped, so each send splits into the ``send()``
   call, send() return -> response callback (network, broker, fsync, the
   I/O thread waking, decoding), the callback, and callback end ->
   ``result()`` returning (hand-off to the caller thread);
5. syscalls per durable send in the broker: ``strace -c -f`` attached to a
   fresh fsync broker for 300 raw sends (not timed; skipped without strace).

Every broker is a fresh ``logbroker serve`` on 127.0.0.1 in the work dir
(in the checkout by default, so its disk), stopped by its PID; clients run
in this process. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from rich.console import Console

from bench.common import harness
from bench.common.environment import environment
from bench.latency.report import STAGES, summarize, tables
from bench.latency.stages import Params, broker_stage, pingpong, pwrite_fdatasync, syscalls

QUICK = Params(rounds=1, sends=300)
BROKER_STAGES = {"raw_lazy": ("lazy", "raw"), "raw_fsync": ("fsync", "raw"),
                 "sync_lazy": ("lazy", "sync"), "sync_fsync": ("fsync", "sync"),
                 "aio_fsync": ("fsync", "aio"), "split_fsync": ("fsync", "split")}


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("latency", __doc__, "1 round, 300 sends per stage (smoke test)")
    ap.add_argument("--rounds", type=int, help="rounds (default 3)")
    ap.add_argument("--sends", type=int, help="timed sends per stage per round (default 3,000)")
    ap.add_argument("--warmup", type=int, help="warm-up sends per stage (default 200)")
    args = harness.parse(ap, argv)
    for name in ("rounds", "sends", "warmup"):
        value = getattr(args, name)
        if value is not None and value < (0 if name == "warmup" else 1):
            ap.error(f"--{name} must be >= {0 if name == 'warmup' else 1}")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    changes = {name: getattr(args, name) for name in ("rounds", "sends", "warmup")}
    return dataclasses.replace(p, **{k: v for k, v in changes.items() if v is not None})


def stage(name: str, workdir: str, p: Params) -> dict:
    if name == "pingpong":
        return pingpong(p)
    if name in ("fdatasync", "fdatasync_prealloc"):
        return pwrite_fdatasync(os.path.join(workdir, name), p, preallocate=name != "fdatasync")
    flush, client = BROKER_STAGES[name]
    return broker_stage(workdir, name, flush, client, p)


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    p = make_params(args)
    log = harness.progress_log()
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick, "loadavg_before": os.getloadavg(), "rounds": []}
    names = list(STAGES)
    for r in range(p.rounds):
        shift = r % len(names)
        done: dict = {}
        for name in names[shift:] + names[:shift]:
            done[name] = stage(name, workdir, p)
            log(f"round {r + 1}/{p.rounds} {name}: p50 {done[name]['p50_ms']:.3f} ms, "
                f"p99 {done[name]['p99_ms']:.3f} ms ({done[name]['n']} sends)")
        results["rounds"].append({name: done[name] for name in names})
    log(f"syscalls: strace -c on a fresh fsync broker, {p.strace_sends} raw sends")
    results["syscalls"] = syscalls(workdir, p)
    log(f"syscalls: {results['syscalls'].get('skipped') or 'done'}")
    results["loadavg_after"] = os.getloadavg()
    results.update(summarize(results))
    return results


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "latency", run, tables)


if __name__ == "__main__":
    sys.exit(main())
