"""Record codec sections of the storage benchmark: ``encode`` (``encode_batch``,
the one encoder: what ``Producer`` sends) and ``decode`` (``decode_batch`` +
``to_arrow``, and ``decode_batch(...).records()`` for contrast)."""

from __future__ import annotations

import time

from bench.common.stats import bounded, summary
from bench.storage.common import SHAPES, Params, make_batch, make_values
from logbroker.records import decode_batch
from logbroker.records.encoder import encode_batch

DECODE_MODES = ("arrow", "arrow_noverify", "records")


def bench_encode(p: Params, tick) -> list[dict]:
    rows = []
    for size, n in SHAPES:
        values = make_values(size, n, 1)
        timestamps, keys = [time.time_ns() // 1_000_000] * n, [None] * n
        rates, mbps = [], []
        for _ in range(p.repeats):
            def step(_i: int) -> int:  # the lists are what Producer.send() appends to
                return len(encode_batch(timestamps, keys, values, {}))
            calls, nbytes, dt = bounded(step, max(1, p.encode_max_records // n), p.encode_seconds)
            rates.append(calls * n / dt)
            mbps.append(calls * n * size / dt / 1e6)
            tick()
        rows.append({"record_bytes": size, "records_per_batch": n, "records_per_s": summary(rates),
                     "value_mb_per_s": summary(mbps)})
    return rows


def bench_decode(p: Params, batches: list[bytes], tick) -> list[dict]:
    """``batches``: 1000 x 1 KiB batches read back from a log (built here if empty);
    1000 x 100 B batches are built in memory."""
    from logbroker.records.arrow import to_arrow

    sets = {"1024": batches or [make_batch(1024, 1000, s) for s in range(8)],
            "100": [make_batch(100, 1000, s) for s in range(64)]}
    rows = []
    for label, data in sets.items():
        value_bytes = [len(decode_batch(b).values.data) for b in data]
        records = [decode_batch(b, verify=False).header.record_count for b in data]
        for mode in DECODE_MODES:
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
