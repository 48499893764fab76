"""``append`` section of the storage benchmark: ``Log.append([batch])`` per call
with the default "fsync" policy beside a raw ``os.write`` + ``os.fdatasync``
baseline in the same run on the same disk, and the "lazy" policy for reference.

Within each repeat raw and fsync alternate in short slices so drift on a shared
machine hits both alike; the ratio is the median of the per-repeat ratios
logbroker/raw. Lazy runs on its own after them (its writeback would disturb
them)."""

from __future__ import annotations

import os

from bench.common.stats import bounded, summary
from bench.storage.common import SHAPES, TOPIC, Params, batch_pool, open_store, remove


class Appender:
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
    targets = [Appender(k, pool, os.path.join(workdir, f"append-{k}")) for k in ("raw", "fsync")]
    try:
        for i in range(p.append_slices):
            for t in (targets if i % 2 == 0 else targets[::-1]):
                t.slice(per_slice, seconds)
    finally:
        for t in targets:
            out[t.kind] = t.close()
    lazy = Appender("lazy", pool, os.path.join(workdir, "append-lazy"))
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
