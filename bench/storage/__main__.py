"""Storage engine benchmarks (issue 2): append, read, decode, reopen.

    python -m bench.storage            # full run, ~2.5 minutes
    python -m bench.storage --quick    # smoke test, a few seconds
    python -m bench.storage --json     # JSON on stdout, tables on stderr

Sections (``--only`` picks some):

- ``encode``: ``encode_batch`` rate, the producer's encoder (excluded from
  append timings).
- ``append``: ``Log.append([batch])`` per call, default "fsync" policy (each
  call waits for its fdatasync), beside a raw baseline in the same run on the
  same disk (``os.write`` + ``os.fdatasync`` per write of the same bytes to a
  plain file) and the "lazy" policy for reference. Within each repeat raw and
  fsync alternate in short slices so drift on a shared machine hits both
  alike; the ratio is the median of the per-repeat ratios logbroker/raw.
  Lazy runs on its own after them (its writeback would disturb them).
- ``read``: ``Log.read(offset, 1 MiB)`` from offset 0 to the end of sealed
  segments, page cache warm.
- ``decode``: ``decode_batch`` + ``to_arrow`` over 1000-record batches (GB/s of
  value bytes), and ``decode_batch(...).records()`` for contrast.
- ``reopen``: clean ``Store.open`` + ``close`` of a data dir at two sizes, and
  reopen after a simulated crash with unflushed tails of two sizes; bytes read
  from segments during the open are counted by wrapping ``Segment.read`` in
  this process (instrumentation only).

Every loop stops at a count or a time limit, whichever comes first. Figures are
medians of ``--repeats`` runs with min-max. Work happens in a fresh temporary
directory (by default inside the checkout, so on the same disk; ``--dir`` puts
it elsewhere) that is removed at the end, also on error or Ctrl-C.

Modules (in ``bench/storage/``): ``common`` (parameters, data and store
helpers), ``codec`` (encode, decode), ``append``, ``read``, ``reopen`` and
``report`` (targets, tables); ``bench.common.harness`` runs it.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from rich.console import Console

from bench.common import harness
from bench.common.environment import environment
from bench.common.stats import GiB
from bench.storage.append import bench_append
from bench.storage.codec import DECODE_MODES, bench_decode, bench_encode
from bench.storage.common import QUICK, SECTIONS, SHAPES, Params
from bench.storage.read import bench_read
from bench.storage.reopen import bench_reopen
from bench.storage.report import tables, targets


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = harness.parser("storage", __doc__, "tiny sizes, for a smoke test (seconds)", sections=SECTIONS)
    ap.add_argument("--repeats", type=int, help="repeats per case (>= 3; default 3)")
    ap.add_argument("--reopen-gb", type=float, help="size of the reopen data dir in GiB (default 2)")
    args = harness.parse(ap, argv)
    if args.repeats is not None and args.repeats < 3:
        ap.error("--repeats must be >= 3")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    if args.repeats:
        p = dataclasses.replace(p, repeats=args.repeats, append_repeats=max(args.repeats, p.append_repeats))
    if args.reopen_gb:
        p = dataclasses.replace(p, reopen_bytes=int(args.reopen_gb * GiB))
    return p


def steps(p: Params) -> dict[str, int]:
    """Progress-bar ticks per section."""
    return {"encode": len(SHAPES) * p.repeats, "append": len(SHAPES) * p.append_repeats,
            "read": 2 * p.repeats, "decode": (2 * len(DECODE_MODES) - 1) * p.repeats,
            "reopen": 2 * p.repeats * (1 + len(p.crash_tails))}


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    p = make_params(args)
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick}
    counts = steps(p)
    progress = harness.progress_bar(err, 8)
    with progress:
        tasks = {s: progress.add_task(s, total=counts[s]) for s in SECTIONS if s in args.sections}
        tick = {s: (lambda s=s: progress.advance(tasks[s])) for s in tasks}
        if "encode" in tasks:
            results["encode"] = bench_encode(p, tick["encode"])
        if "append" in tasks:
            results["append"] = bench_append(p, workdir, tick["append"])
        batches: list[bytes] = []
        if "read" in tasks or "decode" in tasks:
            read_rows, batches = bench_read(p, workdir, tick.get("read", lambda: None))
            if "read" in tasks:
                results["read"] = read_rows
        if "decode" in tasks:
            results["decode"] = bench_decode(p, batches, tick["decode"])
            del batches
        if "reopen" in tasks:
            results["reopen"] = bench_reopen(p, workdir, tick["reopen"])
    results["targets"] = targets(results)
    return results


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "storage", run, tables)


if __name__ == "__main__":
    sys.exit(main())
