"""What making a group commit durable costs the disk, by the partitions it
touches (issue 32, deliverable 2): no broker, only the system calls. In the
work dir, P files, one a partition; each round appends one batch's worth of
bytes (``records`` records of 100 B) to every file through the page cache,
then makes them durable one of three ways:

- ``syncfs``: one ``syncfs(2)`` of the filesystem (decision 103, what the
  broker does for 8 or more logs a turn; storage/shared_sync.py);
- ``fdatasync``: one ``fdatasync`` a file (what it does for fewer), up to
  1,000 files;
- ``journal``: the same bytes appended once more to one preallocated file
  and one ``fdatasync`` of it (a shared write-ahead journal, BookKeeper's
  and RabbitMQ's design; the files themselves written back later).

    python -m bench.scale.barrier                            # 1, 1,000 and 10,000 files
    python -m bench.scale.barrier --partitions 1000 --rounds 9 --json

Figures, medians of the rounds: ``ms`` a barrier's wall time, ``us/file``
that divided by P, ``CPU us/file`` the machine's busy CPU meanwhile
divided by P (the kernel's write-back threads do most of a barrier's
work; /proc/stat counts 10 ms ticks, so small P shows noise). The files'
own write-back, which the journal defers, is not in its column.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.common import harness
from bench.common.procfs import system_cpu
from bench.scale.common import VALUE, parse_counts, per_count

JOURNAL_BYTES = 1 << 30  # preallocated: the journal's appends never extend the file
IOV_MAX = os.sysconf("SC_IOV_MAX")
FDATASYNC_MAX = 1_000  # files past which fsyncing each is not measured (seconds a round)


def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    return parse_counts(argv, "scale.barrier", __doc__, ("1,100", 10, 3),
                        partitions="1,1000,10000",
                        records=(10, "records of 100 B per file per round (default 10)"),
                        rounds=(7, "barriers of each kind (default 7)"), min_rounds=1)


def _timed(fn) -> tuple:
    """(wall seconds, the machine's busy CPU seconds meanwhile: the kernel's
    write-back threads do most of a barrier's work, not its caller)."""
    c0, t0 = system_cpu()["busy_s"], time.perf_counter()
    fn()
    return time.perf_counter() - t0, system_cpu()["busy_s"] - c0


def run_case(workdir: str, partitions: int, args, log) -> dict:
    from logbroker.storage.shared_sync import load_syncfs

    syncfs = load_syncfs()
    if syncfs is None:
        raise SystemExit("syncfs(2) is not available here (Linux only)")
    where = os.path.join(workdir, f"p{partitions}")
    os.makedirs(where)
    fds = [os.open(os.path.join(where, f"{i}.log"), os.O_RDWR | os.O_CREAT, 0o644)
           for i in range(partitions)]
    journal = os.open(os.path.join(where, "journal"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        os.posix_fallocate(journal, 0, JOURNAL_BYTES)
        os.fsync(journal)
        data = VALUE * args.records + bytes(61)  # a batch's bytes: its records and header
        pos, jpos, out = 0, 0, {"syncfs": [], "fdatasync": [], "journal": []}

        def append() -> None:
            for fd in fds:
                os.pwrite(fd, data, pos)

        def journal_append() -> None:
            at = jpos
            for i in range(0, partitions, IOV_MAX):  # one pwritev takes IOV_MAX buffers at most
                at += os.pwritev(journal, [data] * min(IOV_MAX, partitions - i), at)
            os.fdatasync(journal)

        syncfs(journal)  # the files' creation is not a barrier's to pay
        for _ in range(args.rounds):
            for kind in out:
                if kind == "fdatasync" and partitions > FDATASYNC_MAX:
                    continue
                append()
                pos += len(data)
                if kind == "syncfs":
                    out[kind].append(_timed(lambda: syncfs(journal)))
                elif kind == "fdatasync":
                    out[kind].append(_timed(lambda: [os.fdatasync(fd) for fd in fds]))
                else:
                    out[kind].append(_timed(journal_append))
                    jpos += len(data) * partitions
                    syncfs(journal)  # the files written back before the next kind's round
    finally:
        for fd in fds + [journal]:
            os.close(fd)
    row = {"partitions": partitions}
    for kind, rounds in out.items():
        if rounds:
            wall = statistics.median(w for w, _ in rounds)
            cpu = statistics.median(c for _, c in rounds)
            row[kind] = {"ms": wall * 1000, "us_per_file": wall / partitions * 1e6,
                         "cpu_us_per_file": cpu / partitions * 1e6}
    log(f"{partitions} files: " + ", ".join(f"{k} {row[k]['ms']:.1f} ms" for k in out if k in row))
    return row


def run(args: argparse.Namespace, workdir: str, err) -> dict:
    return per_count(args, workdir, run_case)


def tables(results: dict) -> list:
    p = results["params"]

    def cell(c: dict, kind: str, key: str, fmt: str) -> str:
        return format(c[kind][key], fmt) if kind in c else "-"

    rows = [(f"{c['partitions']:,}", *(cell(c, k, f, fmt) for k in ("syncfs", "fdatasync", "journal")
                                        for f, fmt in (("ms", ".2f"), ("us_per_file", ".1f"))),
             cell(c, "syncfs", "cpu_us_per_file", ".1f"), cell(c, "journal", "cpu_us_per_file", ".1f"))
            for c in results["cases"]]
    return [harness.table(
        f"Making one round of appends durable ({p['records']} records of 100 B a file): one "
        f"syncfs, an fdatasync a file, or one journal append + fdatasync; medians of "
        f"{p['rounds']} rounds",
        ("files", "syncfs ms", "us/file", "fdatasync ms", "us/file", "journal ms", "us/file",
         "syncfs CPU us/file", "journal CPU us/file"), rows)]


def main(argv: "list[str] | None" = None) -> int:
    return harness.main(parse_args(argv), "scale-barrier", run, tables)


if __name__ == "__main__":
    raise SystemExit(main())
