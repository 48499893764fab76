"""``read`` section of the storage benchmark: ``Log.read(offset, 1 MiB)`` from
offset 0 to the end of sealed segments, page cache warm. The 1000 x 1 KiB
batches read here are handed to the ``decode`` section."""

from __future__ import annotations

import os
import shutil
import time

from bench.common.stats import MiB, summary
from bench.storage.common import TOPIC, Params, batch_pool, fill, open_store
from logbroker.records import scan_batches
from logbroker.storage.store import Store


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
    """Returns the rows and the 1000 x 1 KiB batches read (for ``decode``)."""
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
