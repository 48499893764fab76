"""Log compaction throughput (issue 11): MB/s of sealed segments compacted.

    python -m bench.compaction             # 64 MiB per run, 5 runs per key count
    python -m bench.compaction --quick     # 4 MiB, 3 runs: a smoke test
    python -m bench.compaction --mib 256 --runs 7 --keys 1000,100000

For each key cardinality, every run fills a fresh compacted log (lazy flush,
records of a 16-byte key drawn uniformly from the key set and a 100-byte
value, 100 records per batch, 64 MiB segments... capped by ``--segment-mib``),
seals it, and times ``Store.tick`` until the compactor has nothing left to
do (one full pass: key map, rewrite, swap, fsyncs). The rate is the sealed
bytes before compaction divided by that time; figures are the median of the
runs with min-max. The work dir (in the checkout by default: same disk as
the data of the other benches; ``--dir`` elsewhere) is removed at the end.
Progress goes to stderr, the table to stdout.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time

from logbroker.records.encoder import encode_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

VALUE = 100
PER_BATCH = 100


def fill(path: str, mib: int, keys: int, segment_mib: int, seed: int) -> tuple[Store, int]:
    """A store at ``path`` with a compacted topic holding ``mib`` MiB, sealed."""
    cfg = LogConfig(cleanup_policy="compact", segment_bytes=segment_mib << 20, flush="lazy",
                    min_cleanable_dirty_percent=0)
    store = Store.open(path, StorageConfig(log=cfg, compaction_bytes_per_tick=1 << 40,
                                           compaction_map_bytes=256 << 20))
    store.create_topic("t")
    lg = store.get_log("t", 0)
    rnd = random.Random(seed)
    value = b"v" * VALUE
    while lg.size_in_bytes() < mib << 20:
        ks = [b"key-%011d" % rnd.randrange(keys) for _ in range(PER_BATCH)]
        lg.append([encode_batch([0] * PER_BATCH, ks, [value] * PER_BATCH, {})])
    lg.roll()
    lg.flush()
    return store, sum(s.size for s in lg.segments[:-1])


def one_run(work: str, mib: int, keys: int, segment_mib: int, seed: int) -> tuple[float, int, int]:
    """(seconds, sealed bytes before, bytes after) of compacting one filled log."""
    path = os.path.join(work, f"run-{keys}-{seed}")
    store, before = fill(path, mib, keys, segment_mib, seed)
    try:
        start = time.perf_counter()
        while store.tick(10**13)["compacted_bytes"]:
            pass
        elapsed = time.perf_counter() - start
        after = store.get_log("t", 0).size_in_bytes()
    finally:
        store.close()
        shutil.rmtree(path, ignore_errors=True)
    return elapsed, before, after


def main(argv: "list[str] | None" = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.compaction", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="4 MiB, 3 runs (smoke test)")
    ap.add_argument("--mib", type=int, default=64, help="MiB of sealed segments per run")
    ap.add_argument("--runs", type=int, default=5, help="runs per key count (>= 5 for figures)")
    ap.add_argument("--keys", default="100,10000,1000000", help="key cardinalities, comma-separated")
    ap.add_argument("--segment-mib", type=int, default=16, help="segment size in MiB")
    ap.add_argument("--dir", default=None, help="work directory (default: in the checkout)")
    args = ap.parse_args(argv)
    mib, runs = (4, 3) if args.quick else (args.mib, args.runs)
    segment_mib = 1 if args.quick else args.segment_mib
    work = tempfile.mkdtemp(prefix="bench-compaction-", dir=args.dir or os.getcwd())
    rows = []
    try:
        for keys in [int(k) for k in args.keys.split(",")]:
            rates, kept = [], 0.0
            for run in range(runs):
                secs, before, after = one_run(work, mib, keys, segment_mib, seed=run)
                rates.append(before / secs / 1e6)
                kept = after / before
                print(f"keys={keys} run {run + 1}/{runs}: {before / 1e6:.1f} MB in {secs:.2f} s "
                      f"= {rates[-1]:.1f} MB/s, {100 * kept:.1f}% kept", file=sys.stderr, flush=True)
            rows.append((keys, statistics.median(rates), min(rates), max(rates), kept))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"| keys | MB/s compacted (median of {runs}) | min-max | size after / before |")
    print("|---:|---:|---:|---:|")
    for keys, med, lo, hi, kept in rows:
        print(f"| {keys:,} | {med:.1f} | {lo:.1f}-{hi:.1f} | {100 * kept:.1f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
