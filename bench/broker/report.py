"""Output of the broker benchmark: medians over runs, the targets check and
its rich tables (``bench.common.harness`` prints them and writes them as markdown)."""

from __future__ import annotations

from rich.table import Table

from bench.common.harness import fmt_s, table, targets_table
from bench.common.stats import MiB, summary

# per-phase metrics summarised over runs: name -> how to get it from a phase result
METRICS = {
    "records_per_s": lambda r: r["records_per_s"],
    "mb_per_s": lambda r: r["mb_per_s"],
    "seconds": lambda r: r["seconds"],
    "client_cpu_s": lambda r: r["cpu_s"],
    "broker_cpu_s": lambda r: r["broker"]["cpu_s"],
    "broker_cpu_us_per_record": lambda r: 1e6 * r["broker"]["cpu_s"] / max(r["records"], 1),
    "broker_peak_rss_mib": lambda r: r["broker"]["peak_rss_mib"],
    **{k: (lambda r, k=k: r[k]) for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms", "mean_ms",
                                          "max_ms", "gb_per_s", "overhead_p50_ms", "overhead_p99_ms",
                                          "overhead_mean_ms")},
    "broker_cpu_s_per_gb": lambda r: r["broker"]["cpu_s_per_gb"],
    "other_cpu_share": lambda r: r["machine"]["other_cpu_s"] / r["seconds"],  # cores used by others
}


def calibration(runs: list[dict]) -> "dict | None":
    """The CPU gauge (ms of a fixed Python loop) over the runs."""
    values = [r["calibration_ms"] for r in runs if "calibration_ms" in r]
    return summary(values) if values else None


def summarize(runs: list[dict]) -> dict:
    """``{flush: {phase: {metric: summary}}}`` over the runs."""
    values: dict = {}
    for run in runs:
        for phase, res in run["phases"].items():
            slot = values.setdefault(run["flush"], {}).setdefault(phase, {})
            for name, get in METRICS.items():
                try:
                    value = get(res)
                except KeyError:
                    continue
                slot.setdefault(name, []).append(value)
    return {flush: {phase: {k: summary(v) for k, v in metrics.items()} for phase, metrics in phases.items()}
            for flush, phases in values.items()}


# (phase, metric, op, target value, text)
TARGETS = [
    ("W1.produce", "records_per_s", ">=", 250_000, "W1 produce (200k x 1 KiB) >= 250k records/s"),
    ("W1.consume", "records_per_s", ">=", 500_000, "W1 consume >= 500k records/s"),
    ("W2.produce", "records_per_s", ">=", 440_000, "W2 produce (1M x 100 B) >= 440k records/s"),
    ("W2.consume", "records_per_s", ">=", 600_000, "W2 consume >= 600k records/s"),
    ("roundtrip", "p50_ms", "<=", 0.25, "single-record durable round trip p50 <= 0.25 ms"),
    ("roundtrip", "p99_ms", "<=", 1.0, "single-record durable round trip p99 <= 1 ms"),
    ("fetch.raw", "gb_per_s", ">=", 1.0, "fetch of sealed data >= 1 GB/s to a reader (loopback)"),
]


def _num(value: float, metric: str) -> str:
    if metric.endswith("_ms") or metric == "gb_per_s":
        return f"{value:,.3f}"
    return f"{value:,.0f}"


def targets(sums: dict) -> list[dict]:
    """Durable (fsync) medians against the targets. ``ratio`` >= 1 means met
    (measured/target, or target/measured for upper bounds)."""
    out = []
    for phase, metric, op, goal, text in TARGETS:
        s = sums.get("fsync", {}).get(phase, {}).get(metric)
        if s is None:
            continue
        med = s["median"]
        ratio = med / goal if op == ">=" else goal / med if med else float("inf")
        out.append({"target": text, "phase": phase, "metric": metric, "goal": goal,
                    "measured": f"{_num(med, metric)} ({_num(s['min'], metric)}–{_num(s['max'], metric)})",
                    "value": med, "ratio": ratio, "met": med >= goal if op == ">=" else med <= goal})
    return out


def _cell(s: "dict | None", digits: int) -> str:
    return fmt_s(s, digits) if s else "-"


def throughput_table(sums: dict) -> Table:
    rows = []
    for wl in ("W1", "W2"):
        for flush in ("fsync", "lazy"):
            for kind in ("produce", "consume"):
                m = sums.get(flush, {}).get(f"{wl}.{kind}")
                if m:
                    rows.append((wl, flush, kind, _cell(m["records_per_s"], 0), _cell(m["mb_per_s"], 1),
                                 _cell(m["client_cpu_s"], 2), _cell(m["broker_cpu_s"], 2),
                                 _cell(m["broker_cpu_us_per_record"], 2), _cell(m["broker_peak_rss_mib"], 0),
                                 _cell(m.get("other_cpu_share"), 2)))
    return table("Produce, then consume (separate client processes, acks=all) — median (min–max)",
                 ("workload", "broker flush", "phase", "records/s", "MB/s (key+value)", "client CPU s",
                  "broker CPU s", "broker CPU µs/record", "broker peak RSS MiB", "other procs, cores"), rows)


def roundtrip_table(sums: dict, sends: int) -> Table:
    rows = []
    for flush in ("fsync", "lazy"):
        for phase, name in (("roundtrip.raw", "raw socket (no client library)"),
                            ("roundtrip", "logbroker.Producer")):
            m = sums.get(flush, {}).get(phase)
            if m:
                rows.append((flush, name, *(_cell(m[k], 3) for k in ("p50_ms", "p90_ms", "p99_ms", "p999_ms",
                                                                      "mean_ms", "max_ms")),
                             _cell(m.get("overhead_p50_ms"), 3), _cell(m["broker_cpu_us_per_record"], 1),
                             _cell(m.get("other_cpu_share"), 2)))
    return table(f"Single-record round trip, send(...).result() x {sends:,} — ms, median (min–max) of runs",
                 ("broker flush", "sender", "p50", "p90", "p99", "p99.9", "mean", "max",
                  "client overhead p50", "broker CPU µs/send", "other procs, cores"), rows)


def fetch_table(sums: dict, runs: list[dict]) -> Table:
    m = sums.get("fsync", {})
    first = next((r["phases"]["fetch.raw"] for r in runs if "fetch.raw" in r["phases"]), None)
    extent = (f"{first['sealed_bytes'] / MiB:,.0f} MiB in {first['sealed_segments']} sealed segments, "
              f"{first['end_offset']:,} records") if first else ""
    rows = []
    if "fetch.raw" in m:
        r = m["fetch.raw"]
        rows.append(("raw protocol reader (Fetch, header walk only)", _cell(r["gb_per_s"], 3),
                     _cell(r["broker_cpu_s_per_gb"], 3), _cell(r["client_cpu_s"], 2),
                     _cell(r.get("other_cpu_share"), 2)))
    if "fetch.consumer" in m:
        r = m["fetch.consumer"]
        rows.append(("logbroker.Consumer.poll (CRC + records)", _cell(r["gb_per_s"], 3), "-",
                     _cell(r["client_cpu_s"], 2), _cell(r.get("other_cpu_share"), 2)))
    return table(f"Fetch probe: {extent}, page cache warm — GB/s (10^9 B), median (min–max)",
                 ("reader", "GB/s", "broker CPU s per GB", "reader CPU s", "other procs, cores"), rows)


def tables(results: dict) -> list[Table]:
    sums = results["summary"]
    out = [throughput_table(sums)]
    if any("roundtrip" in v for v in sums.values()):
        out.append(roundtrip_table(sums, results["params"]["rtt_sends"]))
    if any(k.startswith("fetch.") for k in sums.get("fsync", {})):
        out.append(fetch_table(sums, results["runs"]))
    if results.get("targets"):
        out.append(targets_table(results["targets"], "Targets (durable acks, broker flush=fsync)",
                                 "measured median (min–max)", ratio=True))
    return [t for t in out if t.row_count]

