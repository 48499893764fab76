"""``reopen`` section of the storage benchmark: clean ``Store.open`` + ``close``
of a data dir at two sizes, and reopen after a simulated crash with unflushed
tails of two sizes. Bytes read from segments during the open are counted by
wrapping ``Segment.read`` in this process (instrumentation only)."""

from __future__ import annotations

import os
import shutil
import time

from bench.common.stats import summary
from bench.storage.common import TOPIC, Params, batch_pool, count_segment_reads, crash, fill, open_store
from logbroker.storage import checkpoints as ck
from logbroker.storage.store import Store


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
