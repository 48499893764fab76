#!/usr/bin/env python
"""Storage engine benchmarks (issue 2): append, read, decode, reopen.

    python bench/bench_storage.py            # full run, ~2.5 minutes
    python bench/bench_storage.py --quick    # smoke test, a few seconds
    python bench/bench_storage.py --json     # JSON on stdout, tables on stderr

Sections (``--only`` picks some):

- ``encode``: BatchBuilder rate (producer side; excluded from append timings).
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
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import hashlib
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "src") not in sys.path:  # run from a checkout without installing
    sys.path.insert(0, str(ROOT / "src"))

from rich.console import Console  # noqa: E402
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,  # noqa: E402
                           TimeElapsedColumn)
from rich.table import Table  # noqa: E402

from logbroker.config import LogConfig, StorageConfig  # noqa: E402
from logbroker.records import BatchBuilder, decode_batch, scan_batches  # noqa: E402
from logbroker.storage import checkpoints as ck  # noqa: E402
from logbroker.storage import segment as segment_mod  # noqa: E402
from logbroker.storage.store import Store  # noqa: E402

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30
SECTIONS = ("encode", "append", "read", "decode", "reopen")
SHAPES = [(1024, 1), (1024, 10), (1024, 100), (1024, 1000), (100, 1), (100, 10), (100, 100),
          (100, 1000)]  # (record bytes, records per batch); 1024 x 1000 is the ~1 MiB batch
TOPIC = "bench"


@dataclass(frozen=True)
class Params:
    repeats: int = 3
    append_repeats: int = 5
    append_seconds: float = 1.5  # per case, repeat and target (raw, fsync; lazy gets half)
    append_slices: int = 10  # raw and fsync alternate in this many slices per repeat
    append_max_calls: int = 20_000
    append_max_bytes: int = 768 * MiB
    encode_seconds: float = 0.4
    encode_max_records: int = 400_000
    read_log_bytes: int = 256 * MiB  # per read log
    read_segment_bytes: int = 64 * MiB
    read_seconds: float = 1.0
    read_max_passes: int = 100
    decode_seconds: float = 2.0
    records_seconds: float = 1.0
    records_max_batches: int = 200
    reopen_bytes: int = 2 * GiB
    reopen_segment_bytes: int = 256 * MiB
    crash_tails: tuple = (32 * MiB, 128 * MiB)


QUICK = Params(repeats=3, append_repeats=3, append_seconds=0.08, append_slices=4, append_max_calls=40, append_max_bytes=2 * MiB,
               encode_seconds=0.02, encode_max_records=5_000, read_log_bytes=4 * MiB,
               read_segment_bytes=1 * MiB, read_seconds=0.05, read_max_passes=5, decode_seconds=0.1,
               records_seconds=0.05, records_max_batches=2, reopen_bytes=8 * MiB,
               reopen_segment_bytes=2 * MiB, crash_tails=(1 * MiB, 2 * MiB))


# -- helpers -------------------------------------------------------------------------------
def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "n": len(values)}


def bounded(step: Callable[[int], int], max_calls: int, max_seconds: float) -> tuple[int, int, float]:
    """Call ``step(i)`` (returns bytes handled) until ``max_calls`` or ``max_seconds``.
    Returns (calls, bytes, elapsed seconds)."""
    calls = nbytes = 0
    start = time.perf_counter()
    deadline = start + max_seconds
    while calls < max_calls:
        nbytes += step(calls)
        calls += 1
        if time.perf_counter() >= deadline:
            break
    return calls, nbytes, time.perf_counter() - start


def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


def make_values(size: int, count: int, seed: int) -> list[bytes]:
    block = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    return [(i.to_bytes(4, "big") + block)[:size] for i in range(count)]


def make_batch(size: int, records: int, seed: int = 0) -> bytes:
    builder = BatchBuilder()
    for value in make_values(size, records, seed):
        builder.append(value)
    return builder.build()


def batch_pool(size: int, records: int) -> list[bytes]:
    """A few distinct prebuilt batches (built before any timing), cycled by the loops."""
    count = max(2, min(16, (16 * MiB) // max(1, size * records)))
    return [make_batch(size, records, seed) for seed in range(count)]


def open_store(path: str, flush: str = "fsync", segment_bytes: "int | None" = None) -> Store:
    store = Store.open(path, StorageConfig(log=LogConfig(flush=flush)))
    if store.topics.get(TOPIC) is None:
        store.create_topic(TOPIC, **({"segment_bytes": segment_bytes} if segment_bytes else {}))
    return store


def crash(store: Store) -> None:
    """Drop a store without closing it (as the tests simulate a crash): no flush,
    no checkpoint, no clean marker; descriptors released so the dir can reopen."""
    store.files.close_all()
    store.meta.close()
    os.close(store._lock_fd)


def fill(lg, pool: list[bytes], target_bytes: int) -> int:
    """Append batches from ``pool`` until the log holds ``target_bytes``; returns bytes added."""
    added, i = 0, 0
    while lg.size_in_bytes() < target_bytes:
        lg.append([pool[i % len(pool)]])
        added += len(pool[i % len(pool)])
        i += 1
    return added


@contextmanager
def count_segment_reads():
    """Count bytes read through ``Segment.read`` (instrumentation, this process only)."""
    counter = {"bytes": 0, "calls": 0}
    original = segment_mod.Segment.read

    def counting(self, position: int, size: int) -> bytes:
        out = original(self, position, size)
        counter["bytes"] += len(out)
        counter["calls"] += 1
        return out

    segment_mod.Segment.read = counting
    try:
        yield counter
    finally:
        segment_mod.Segment.read = original


# -- sections ------------------------------------------------------------------------------
def bench_encode(p: Params, tick) -> list[dict]:
    rows = []
    for size, n in SHAPES:
        values = make_values(size, n, 1)
        rates, mbps = [], []
        for _ in range(p.repeats):
            def step(_i: int) -> int:
                builder = BatchBuilder()
                for v in values:
                    builder.append(v)
                return len(builder.build())
            calls, nbytes, dt = bounded(step, max(1, p.encode_max_records // n), p.encode_seconds)
            rates.append(calls * n / dt)
            mbps.append(calls * n * size / dt / 1e6)
            tick()
        rows.append({"record_bytes": size, "records_per_batch": n, "records_per_s": summary(rates),
                     "value_mb_per_s": summary(mbps)})
    return rows


class _Appender:
    """One append target: "raw" (a plain file, os.write + os.fdatasync per write)
    or a logbroker log with flush policy "fsync" or "lazy". Totals accumulate
    over the slices the target is given."""

    def __init__(self, kind: str, pool: list[bytes], path: str) -> None:
        self.kind, self.pool, self.path = kind, pool, path
        self.calls = self.bytes = self.fsyncs = 0
        self.seconds = 0.0
        if kind == "raw":
            self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
            self.step = self._raw_step
        else:
            self.store = open_store(path, flush=kind)
            self.log = self.store.get_log(TOPIC, 0)
            self.step = lambda i: self.log.append([pool[i % len(pool)]]).size

    def _raw_step(self, i: int) -> int:
        view = memoryview(self.pool[i % len(self.pool)])
        while view:
            view = view[os.write(self.fd, view):]
        os.fdatasync(self.fd)
        self.fsyncs += 1
        return len(self.pool[i % len(self.pool)])

    def slice(self, max_calls: int, max_seconds: float) -> None:
        before = self.log.fsyncs if self.kind != "raw" else 0
        calls, nbytes, dt = bounded(lambda i: self.step(self.calls + i), max_calls, max_seconds)
        self.calls, self.bytes, self.seconds = self.calls + calls, self.bytes + nbytes, self.seconds + dt
        if self.kind != "raw":
            self.fsyncs += self.log.fsyncs - before

    def close(self) -> dict:
        if self.kind == "raw":
            os.close(self.fd)
        else:
            self.store.close()  # lazy: flushes here, outside the timed slices
        remove(self.path)
        return {"calls": self.calls, "bytes": self.bytes, "seconds": self.seconds, "fsyncs": self.fsyncs}


def _append_repeat(pool: list[bytes], workdir: str, p: Params) -> dict[str, dict]:
    """One repeat: raw and fsync alternate in short slices (so machine noise hits
    both alike), then lazy on its own (its background writeback would disturb
    the others)."""
    max_calls = max(1, min(p.append_max_calls, p.append_max_bytes // len(pool[0])))
    per_slice = max(1, max_calls // p.append_slices)
    seconds = p.append_seconds / p.append_slices
    out = {}
    targets = [_Appender(k, pool, os.path.join(workdir, f"append-{k}")) for k in ("raw", "fsync")]
    try:
        for i in range(p.append_slices):
            for t in (targets if i % 2 == 0 else targets[::-1]):
                t.slice(per_slice, seconds)
    finally:
        for t in targets:
            out[t.kind] = t.close()
    lazy = _Appender("lazy", pool, os.path.join(workdir, "append-lazy"))
    try:
        lazy.slice(max_calls, p.append_seconds / 2)
    finally:
        out["lazy"] = lazy.close()
    return out


def bench_append(p: Params, workdir: str, tick) -> list[dict]:
    rows = []
    for size, n in SHAPES:
        pool = batch_pool(size, n)
        runs: dict[str, list[dict]] = {"raw": [], "fsync": [], "lazy": []}
        for _ in range(p.append_repeats):
            for kind, sample in _append_repeat(pool, workdir, p).items():
                runs[kind].append(sample)
            tick()
        row = {"record_bytes": size, "records_per_batch": n, "batch_bytes": len(pool[0])}
        for kind, samples in runs.items():
            row[kind] = {
                "mb_per_s": summary([s["bytes"] / s["seconds"] / 1e6 for s in samples]),
                "records_per_s": summary([s["calls"] * n / s["seconds"] for s in samples]),
                "appends_per_s": summary([s["calls"] / s["seconds"] for s in samples]),
                "calls": [s["calls"] for s in samples],
                "fsyncs_per_append": summary([s["fsyncs"] / s["calls"] for s in samples]),
            }
        row["ratio_fsync_vs_raw"] = summary([f["bytes"] / f["seconds"] / (r_["bytes"] / r_["seconds"])
                                             for f, r_ in zip(runs["fsync"], runs["raw"])])
        row["overhead_us_per_append"] = summary([(f["seconds"] / f["calls"] - r_["seconds"] / r_["calls"]) * 1e6
                                                 for f, r_ in zip(runs["fsync"], runs["raw"])])
        rows.append(row)
    return rows


def build_read_log(path: str, size: int, n: int, p: Params) -> Store:
    store = open_store(path, flush="lazy", segment_bytes=p.read_segment_bytes)
    lg = store.get_log(TOPIC, 0)
    fill(lg, batch_pool(size, n), p.read_log_bytes)
    lg.roll()  # seal the last segment: every byte read below is in a sealed segment
    return store


def read_pass(lg, max_seconds: float, keep: "list | None" = None) -> tuple[int, float]:
    """Read the whole log with Log.read(offset, 1 MiB); returns (bytes, seconds)."""
    offset, end, nbytes = lg.log_start_offset, lg.log_end_offset, 0
    start = time.perf_counter()
    deadline = start + max_seconds
    while offset < end:
        buf = lg.read(offset, MiB)
        last = None
        for pos, header in scan_batches(buf, verify=False):
            last = header
            if keep is not None:
                keep.append(buf[pos:pos + header.size])
        offset = last.next_offset
        nbytes += len(buf)
        if time.perf_counter() >= deadline:
            break
    return nbytes, time.perf_counter() - start


def bench_read(p: Params, workdir: str, tick) -> tuple[list[dict], list[bytes]]:
    rows, kept = [], []
    for size, n in [(1024, 100), (1024, 1000)]:
        path = os.path.join(workdir, f"read-{n}")
        store = build_read_log(path, size, n, p)
        try:
            lg = store.get_log(TOPIC, 0)
            keep = kept if n == 1000 else None
            read_pass(lg, 600.0, keep)  # warm the page cache (and collect batches for decode)
            rates = []
            for _ in range(p.repeats):  # each repeat: whole passes until read_seconds
                nbytes = passes = 0
                elapsed = 0.0
                while elapsed < p.read_seconds and passes < p.read_max_passes:
                    b, dt = read_pass(lg, p.read_seconds)
                    nbytes, elapsed, passes = nbytes + b, elapsed + dt, passes + 1
                rates.append(nbytes / elapsed / 1e6)
                tick()
            rows.append({"record_bytes": size, "records_per_batch": n, "log_bytes": lg.size_in_bytes(),
                         "sealed_segments": sum(1 for s in lg.segments if s.size), "max_bytes": MiB,
                         "mb_per_s": summary(rates)})
        finally:
            store.close()
            shutil.rmtree(path, ignore_errors=True)
    return rows, kept


def bench_decode(p: Params, batches: list[bytes], tick) -> list[dict]:
    from logbroker.records.arrow import to_arrow

    sets = {"1024": batches or [make_batch(1024, 1000, s) for s in range(8)],
            "100": [make_batch(100, 1000, s) for s in range(64)]}
    rows = []
    for label, data in sets.items():
        value_bytes = [len(decode_batch(b).values.data) for b in data]
        records = [decode_batch(b, verify=False).header.record_count for b in data]
        for mode in ("arrow", "arrow_noverify", "records"):
            if mode == "records" and label != "1024":
                continue
            verify = mode != "arrow_noverify"
            if mode == "records":
                fn = lambda i: len(decode_batch(data[i % len(data)]).records())  # noqa: E731
                max_calls, seconds = p.records_max_batches, p.records_seconds
            else:
                fn = lambda i: to_arrow(decode_batch(data[i % len(data)], verify=verify)).num_rows  # noqa: E731
                max_calls, seconds = 10 * len(data), p.decode_seconds
            gbps, rps = [], []
            for _ in range(p.repeats):
                calls, _, dt = bounded(fn, max_calls, seconds)
                vb = sum(value_bytes[i % len(data)] for i in range(calls))
                rc = sum(records[i % len(data)] for i in range(calls))
                gbps.append(vb / dt / 1e9)
                rps.append(rc / dt)
                tick()
            rows.append({"record_bytes": int(label), "records_per_batch": 1000, "mode": mode,
                         "batches": len(data), "value_gb_per_s": summary(gbps),
                         "records_per_s": summary(rps)})
    return rows


def _tail_bytes(store: Store, lg) -> int:
    """Segment bytes past the persisted recovery point (what a crash recovery must scan)."""
    c = ck.load_checkpoint(store.meta, lg.pid)
    total = 0
    for seg in lg.segments:
        if seg.base_offset > c.rp_segment:
            total += seg.size
        elif seg.base_offset == c.rp_segment:
            total += seg.size - c.rp_position
    return total


def _timed_open(path: str) -> tuple[Store, float, dict]:
    with count_segment_reads() as counter:
        start = time.perf_counter()
        store = Store.open(path)
        dt = time.perf_counter() - start
    return store, dt, dict(counter)


def _clean_reopens(path: str, p: Params, tick) -> dict:
    opens, closes, total, read = [], [], [], []
    for _ in range(p.repeats):
        store, dt_open, counter = _timed_open(path)
        assert store.was_clean, "expected a clean reopen"
        start = time.perf_counter()
        store.close()
        dt_close = time.perf_counter() - start
        opens.append(dt_open * 1e3)
        closes.append(dt_close * 1e3)
        total.append((dt_open + dt_close) * 1e3)
        read.append(counter["bytes"])
        tick()
    return {"open_ms": summary(opens), "close_ms": summary(closes), "open_close_ms": summary(total),
            "segment_bytes_read": summary(read)}


def _crash_reopens(path: str, tail: int, pool: list[bytes], p: Params, tick) -> dict:
    times, scanned, tails = [], [], []
    for _ in range(p.repeats):
        store = Store.open(path)  # default policy: every tail append is fsynced (acked)
        lg = store.get_log(TOPIC, 0)
        target = lg.size_in_bytes() + tail
        fill(lg, pool, target)
        expected_end = lg.log_end_offset
        tails.append(_tail_bytes(store, lg))
        crash(store)
        store, dt, counter = _timed_open(path)
        lg = store.get_log(TOPIC, 0)
        assert not store.was_clean and lg.offline is None and lg.log_end_offset == expected_end
        store.close()
        times.append(dt * 1e3)
        scanned.append(counter["bytes"])
        tick()
    return {"tail_target_bytes": tail, "unflushed_tail_bytes": summary(tails),
            "segment_bytes_read": summary(scanned), "open_ms": summary(times),
            "scan_mb_per_s": summary([b / t * 1e3 / 1e6 for b, t in zip(scanned, times) if t > 0])}


def bench_reopen(p: Params, workdir: str, tick) -> dict:
    path = os.path.join(workdir, "reopen")
    pool = batch_pool(1024, 1000)
    out = {"segment_bytes": p.reopen_segment_bytes, "batch_bytes": len(pool[0]), "sizes": []}
    try:
        for fraction in (0.25, 1.0):
            store = open_store(path, flush="lazy", segment_bytes=p.reopen_segment_bytes)
            lg = store.get_log(TOPIC, 0)
            start = time.perf_counter()
            added = fill(lg, pool, int(p.reopen_bytes * fraction))
            row = {"fraction": fraction, "data_bytes": lg.size_in_bytes(), "segments": len(lg.segments)}
            store.close()  # flushes; the close is part of the fill time
            row["fill_mb_per_s"] = added / (time.perf_counter() - start) / 1e6 if added else None
            row["clean"] = _clean_reopens(path, p, tick)
            row["crash"] = [_crash_reopens(path, t, pool, p, tick) for t in p.crash_tails]
            out["sizes"].append(row)
    finally:
        shutil.rmtree(path, ignore_errors=True)
    return out


# -- environment ---------------------------------------------------------------------------
def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def environment(workdir: str) -> dict:
    import crc32c
    from importlib.metadata import PackageNotFoundError, version

    def ver(dist: str) -> str:
        try:
            return version(dist)
        except PackageNotFoundError:
            return "-"

    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                if line.startswith("MemTotal")), "0") if Path("/proc/meminfo").exists() else "0"
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor()) if Path("/proc/cpuinfo").exists() \
        else platform.processor()
    digest = hashlib.sha256()
    for f in sorted((ROOT / "src" / "logbroker").rglob("*.py")):
        digest.update(f.read_bytes())
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "nproc": os.cpu_count(), "cpu": cpu, "ram_gib": round(int(mem) / MiB, 1),
        "disk": " ".join(_run(["df", "-hT", workdir]).splitlines()[-1:]),
        "kernel": platform.release(), "python": platform.python_version(),
        "versions": {**{d: ver(d) for d in ("logbroker", "pyarrow", "lmdb", "crc32c", "msgpack", "rich")},
                     "crc32c_hardware": bool(getattr(crc32c, "hardware_based", False))},
        "git_commit": _run(["git", "rev-parse", "--short", "HEAD"]),
        "src_sha256": digest.hexdigest()[:16],
        "src_dirty": bool(_run(["git", "status", "--porcelain", "src"])),
        "workdir": workdir,
    }


# -- output --------------------------------------------------------------------------------
def fmt_s(s: dict, digits: int = 1) -> str:
    return f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f}–{s['max']:,.{digits}f})"


def _table(title: str, columns: tuple, rows: list[tuple], justify: str = "right") -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify=justify)
    for row in rows:
        t.add_row(*row)
    return t


def encode_table(rows: list[dict]) -> Table:
    return _table("BatchBuilder encode (producer side) — median (min–max)",
                  ("record", "recs/batch", "records/s", "value MB/s"),
                  [(f"{r['record_bytes']} B", str(r["records_per_batch"]), fmt_s(r["records_per_s"], 0),
                    fmt_s(r["value_mb_per_s"])) for r in rows])


def append_table(rows: list[dict]) -> Table:
    return _table("Append, one batch per call — MB/s median (min–max)",
                  ("record", "recs/batch", "batch B", "raw write+fdatasync", "logbroker fsync",
                   "fsync records/s", "ratio fsync/raw", "extra µs/append", "logbroker lazy",
                   "lazy records/s"),
                  [(f"{r['record_bytes']} B", str(r["records_per_batch"]), f"{r['batch_bytes']:,}",
                    fmt_s(r["raw"]["mb_per_s"]), fmt_s(r["fsync"]["mb_per_s"]),
                    fmt_s(r["fsync"]["records_per_s"], 0), fmt_s(r["ratio_fsync_vs_raw"], 2),
                    fmt_s(r["overhead_us_per_append"]), fmt_s(r["lazy"]["mb_per_s"]),
                    fmt_s(r["lazy"]["records_per_s"], 0)) for r in rows])


def read_table(rows: list[dict]) -> Table:
    return _table("Log.read(offset, max_bytes=1 MiB), sealed segments, page cache warm",
                  ("batch", "log MiB", "segments", "MB/s"),
                  [(f"{r['records_per_batch']} x {r['record_bytes']} B", f"{r['log_bytes'] / MiB:,.0f}",
                    str(r["sealed_segments"]), fmt_s(r["mb_per_s"])) for r in rows])


DECODE_NAMES = {"arrow": "decode_batch + to_arrow", "arrow_noverify": "decode_batch(verify=False) + to_arrow",
                "records": "decode_batch(...).records()"}


def decode_table(rows: list[dict]) -> Table:
    return _table("Decode 1000-record batches", ("record", "path", "value GB/s", "records/s"),
                  [(f"{r['record_bytes']} B", DECODE_NAMES[r["mode"]], fmt_s(r["value_gb_per_s"], 3),
                    fmt_s(r["records_per_s"], 0)) for r in rows])


def reopen_table(rep: dict) -> Table:
    rows = []
    for s in rep["sizes"]:
        size, segs, c = f"{s['data_bytes'] / MiB:,.0f} MiB", str(s["segments"]), s["clean"]
        rows.append((size, segs, "clean", fmt_s(c["open_ms"]), fmt_s(c["close_ms"]),
                     f"{c['segment_bytes_read']['median']:,.0f}", "-"))
        rows += [(size, segs, f"crash, {cr['tail_target_bytes'] / MiB:,.0f} MiB tail", fmt_s(cr["open_ms"]),
                  "-", f"{cr['segment_bytes_read']['median'] / MiB:,.1f} MiB",
                  f"{cr['unflushed_tail_bytes']['median'] / MiB:,.1f} MiB") for cr in s["crash"]]
    return _table(f"Store.open (+close) — segments of {rep['segment_bytes'] / MiB:,.0f} MiB; "
                  "ms median (min–max)",
                  ("data", "segments", "case", "open ms", "close ms", "segment bytes read", "tail past RP"),
                  rows)


def tables(results: dict) -> list[Table]:
    makers = [("encode", encode_table), ("append", append_table), ("read", read_table),
              ("decode", decode_table), ("reopen", reopen_table)]
    out = [make(results[key]) for key, make in makers if key in results]
    if results.get("targets"):
        out.append(_table("Targets", ("target", "measured", "met"),
                          [(r["target"], r["measured"], "yes" if r["met"] else "NO")
                           for r in results["targets"]], justify="left"))
    return out


def markdown(results: dict) -> str:
    """The same tables as GitHub markdown (for docs/benchmarks.md)."""
    parts = []
    for table in tables(results):
        cols = table.columns
        parts.append(f"**{table.title}**\n")
        parts.append("| " + " | ".join(str(c.header) for c in cols) + " |")
        parts.append("|" + "|".join("---:" if c.justify == "right" else "---" for c in cols) + "|")
        for i in range(table.row_count):
            parts.append("| " + " | ".join(str(c._cells[i]) for c in cols) + " |")
        parts.append("")
    return "\n".join(parts)


def targets(results: dict) -> list[dict]:
    out = []
    big = next((r for r in results.get("append", []) if r["record_bytes"] == 1024
                and r["records_per_batch"] == 1000), None)
    if big:
        ratio = big["ratio_fsync_vs_raw"]["median"]
        out.append({"target": "durable append of ~1 MiB batches >= 80% of raw write+fdatasync",
                    "measured": f"{ratio:.0%} (median of paired ratios)", "value": ratio, "met": ratio >= 0.8})
    arrow = next((r for r in results.get("decode", []) if r["record_bytes"] == 1024 and r["mode"] == "arrow"),
                 None)
    if arrow:
        g = arrow["value_gb_per_s"]["median"]
        out.append({"target": "Arrow decode of 1000 x 1 KiB batches >= 1 GB/s of values",
                    "measured": f"{g:.2f} GB/s", "value": g, "met": g >= 1.0})
    if "reopen" in results:
        s = results["reopen"]["sizes"][-1]
        ms = s["clean"]["open_close_ms"]["median"]
        out.append({"target": "clean reopen (open+close) of a 10 GB dir < 1 s",
                    "measured": f"{ms:.1f} ms at {s['data_bytes'] / GiB:.2f} GiB ({s['segments']} segments)",
                    "value": ms, "met": ms < 1000})
    return out


# -- main ----------------------------------------------------------------------------------
def parse_args(argv: "list[str] | None") -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke test (seconds)")
    ap.add_argument("--json", action="store_true", help="JSON on stdout (tables go to stderr)")
    ap.add_argument("--dir", help="parent directory of the temporary work dir (default: the checkout, "
                                  "so the same disk)")
    ap.add_argument("--repeats", type=int, help="repeats per case (>= 3; default 3)")
    ap.add_argument("--reopen-gb", type=float, help="size of the reopen data dir in GiB (default 2)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the tables as markdown to FILE")
    ap.add_argument("--render", metavar="JSON", help="print markdown tables of a saved --json run; runs nothing")
    ap.add_argument("--only", help=f"comma-separated sections among {','.join(SECTIONS)}")
    args = ap.parse_args(argv)
    if args.repeats is not None and args.repeats < 3:
        ap.error("--repeats must be >= 3")
    args.sections = SECTIONS if not args.only else tuple(s.strip() for s in args.only.split(","))
    if set(args.sections) - set(SECTIONS):
        ap.error(f"--only takes {','.join(SECTIONS)}")
    return args


def make_params(args: argparse.Namespace) -> Params:
    p = QUICK if args.quick else Params()
    if args.repeats:
        p = dataclasses.replace(p, repeats=args.repeats, append_repeats=max(args.repeats, p.append_repeats))
    if args.reopen_gb:
        p = dataclasses.replace(p, reopen_bytes=int(args.reopen_gb * GiB))
    return p


def steps(p: Params, sections) -> dict[str, int]:
    return {"encode": len(SHAPES) * p.repeats, "append": len(SHAPES) * p.append_repeats,
            "read": 2 * p.repeats, "decode": 5 * p.repeats,
            "reopen": 2 * p.repeats * (1 + len(p.crash_tails))}


def run(args: argparse.Namespace, workdir: str, err: Console) -> dict:
    p = make_params(args)
    results: dict = {"environment": environment(workdir), "params": dataclasses.asdict(p),
                     "quick": args.quick}
    counts = steps(p, args.sections)
    progress = Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=err, transient=True)
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
    args = parse_args(argv)
    if args.render:
        print(markdown(json.loads(Path(args.render).read_text())))
        return 0
    err = Console(stderr=True)
    if not err.is_terminal:
        err.width = max(err.width, 200)
    parent = os.path.abspath(args.dir or ROOT)
    os.makedirs(parent, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=".bench-storage-", dir=parent)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below cleans up
    started = time.perf_counter()
    try:
        results = run(args, workdir, err)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    out = err if args.json else Console()
    if not out.is_terminal:
        out.width = max(out.width, 200)
    env = results["environment"]
    out.print(f"[bold]logbroker storage bench[/] {env['date']}  {env['nproc']} cpu, {env['ram_gib']} GiB RAM, "
              f"disk: {env['disk']}  python {env['python']}  elapsed {results['elapsed_s']} s")
    for table in tables(results):
        out.print(table)
    if args.markdown:
        Path(args.markdown).write_text(markdown(results))
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
