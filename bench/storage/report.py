"""Output of the storage benchmark: the targets check and its rich tables
(``bench.common.harness`` prints them and writes them as markdown)."""

from __future__ import annotations

from rich.table import Table

from bench.common.harness import fmt_s, table, targets_table
from bench.common.stats import GiB, MiB


def encode_table(rows: list[dict]) -> Table:
    return table("encode_batch, the producer's encoder — median (min–max)",
                  ("record", "recs/batch", "records/s", "value MB/s"),
                  [(f"{r['record_bytes']} B", str(r["records_per_batch"]), fmt_s(r["records_per_s"], 0),
                    fmt_s(r["value_mb_per_s"])) for r in rows])


def append_table(rows: list[dict]) -> Table:
    return table("Append, one batch per call — MB/s median (min–max)",
                  ("record", "recs/batch", "batch B", "raw write+fdatasync", "logbroker fsync",
                   "fsync records/s", "ratio fsync/raw", "extra µs/append", "logbroker lazy",
                   "lazy records/s"),
                  [(f"{r['record_bytes']} B", str(r["records_per_batch"]), f"{r['batch_bytes']:,}",
                    fmt_s(r["raw"]["mb_per_s"]), fmt_s(r["fsync"]["mb_per_s"]),
                    fmt_s(r["fsync"]["records_per_s"], 0), fmt_s(r["ratio_fsync_vs_raw"], 2),
                    fmt_s(r["overhead_us_per_append"]), fmt_s(r["lazy"]["mb_per_s"]),
                    fmt_s(r["lazy"]["records_per_s"], 0)) for r in rows])


def read_table(rows: list[dict]) -> Table:
    return table("Log.read(offset, max_bytes=1 MiB), sealed segments, page cache warm",
                  ("batch", "log MiB", "segments", "MB/s"),
                  [(f"{r['records_per_batch']} x {r['record_bytes']} B", f"{r['log_bytes'] / MiB:,.0f}",
                    str(r["sealed_segments"]), fmt_s(r["mb_per_s"])) for r in rows])


DECODE_NAMES = {"arrow": "decode_batch + to_arrow", "arrow_noverify": "decode_batch(verify=False) + to_arrow",
                "records": "decode_batch(...).records()"}


def decode_table(rows: list[dict]) -> Table:
    return table("Decode 1000-record batches", ("record", "path", "value GB/s", "records/s"),
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
    return table(f"Store.open (+close) — segments of {rep['segment_bytes'] / MiB:,.0f} MiB; "
                  "ms median (min–max)",
                  ("data", "segments", "case", "open ms", "close ms", "segment bytes read", "tail past RP"),
                  rows)


def tables(results: dict) -> list[Table]:
    makers = [("encode", encode_table), ("append", append_table), ("read", read_table),
              ("decode", decode_table), ("reopen", reopen_table)]
    out = [make(results[key]) for key, make in makers if key in results]
    if results.get("targets"):
        out.append(targets_table(results["targets"]))
    return out


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
