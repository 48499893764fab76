"""Figures and markdown tables of a peers run (pure functions over its JSON).

``figures(results)`` reduces the repeats to ``{system: {figure: summary}}``
(median, min, max, n of the runs where the phase completed); ``markdown``
renders the section written into docs/benchmarks.md. Ratios are
logbroker / peer for throughput and peer / logbroker for latency, so > 1
always means logbroker is better; each peer is compared with the logbroker
mode of the same durability (fsync rows with ``logbroker``, the others with
``logbroker-lazy``). Beside the streaming tables: the windowed produce
(``W1/window``, ``W2/window``: windows of 1,000, each waited for; its rate
also ÷ the same run's streaming produce) and the round trip with 1 KiB
values (``RT1k``) next to the 100 B one (``RT``).
"""

from __future__ import annotations

from typing import Iterable

from bench.common import stats
from bench.peers.loops import KEY_BYTES
from bench.peers.run import SYSTEMS

TPUT = (("W1", "produce"), ("W1", "consume"), ("W2", "produce"), ("W2", "consume"),
        ("scale", "produce"), ("scale", "consume"))
WINDOWED = ("W1", "W2")
ROUNDTRIPS = ("RT", "RT1k")


def summary(values: list[float]) -> "dict | None":
    return stats.summary(values) if values else None


def _payload(sizes: dict, wl: str) -> tuple[int, int]:
    """(records, payload bytes) of a workload."""
    if wl == "scale":
        topics, per = sizes["scale"]
        return topics * per, topics * per * (KEY_BYTES + 100)
    n, vb = sizes[wl]
    return n, n * (KEY_BYTES + vb)


def per_run(res: dict, sizes: dict) -> dict:
    """The figures of one run of one system: {name: value} (missing = failed)."""
    out: dict = {}
    for wl, mode in TPUT + tuple((wl, "window") for wl in WINDOWED):  # each window after its produce
        r = res.get(f"{wl}/{mode}") or {}
        n, nbytes = _payload(sizes, wl)
        if "error" in r or r.get("records") != n or not r.get("seconds"):
            continue
        out[f"{wl} {mode} rec/s"] = n / r["seconds"]
        out[f"{wl} {mode} MB/s"] = nbytes / r["seconds"] / 1e6
        out[f"{wl} {mode} cpu s"] = r["cpu_s"]
        out[f"{wl} {mode} rss MiB"] = r["peak_rss_mib"]
        if mode == "window":
            out[f"{wl} window p50 ms"], out[f"{wl} window p99 ms"] = r["window_p50_ms"], r["window_p99_ms"]
            if f"{wl} produce rec/s" in out:  # this run's windowed ÷ its streaming produce
                out[f"{wl} window / stream"] = out[f"{wl} window rec/s"] / out[f"{wl} produce rec/s"]
        elif mode == "produce":
            out[f"{wl} disk/payload"] = (r["disk_bytes"] - r["disk_before"]) / nbytes
            if r.get("ack_p50_ms") is not None:
                out[f"{wl} ack p50 ms"], out[f"{wl} ack p99 ms"] = r["ack_p50_ms"], r["ack_p99_ms"]
            if r.get("setup_seconds") is not None:
                out[f"{wl} setup s"] = r["setup_seconds"]
    for wl in ROUNDTRIPS:
        rt = res.get(f"{wl}/roundtrip") or {}
        if "error" not in rt and rt.get("p50_ms"):
            out.update({f"{wl} p50 ms": rt["p50_ms"], f"{wl} p99 ms": rt["p99_ms"], f"{wl} cpu s": rt["cpu_s"],
                        f"{wl} rss MiB": rt["peak_rss_mib"]})
    return out


def figures(results: dict) -> dict:
    by: dict = {}
    for run in results["runs"]:
        for system, res in run.items():
            for k, v in per_run(res, results["sizes"]).items():
                by.setdefault(system, {}).setdefault(k, []).append(v)
    runs = len(results["runs"])
    return {s: {k: {**summary(v), "of": runs} for k, v in figs.items()} for s, figs in by.items()}


def limit_figures(results: dict) -> dict:
    """{limit figure: summary} over the runs' ``limits``."""
    vals: dict = {}
    for lim in results.get("limits", []):
        for name, d in lim.items():
            if not isinstance(d, dict):  # {"error": ...}: that run's limits failed
                continue
            for k, v in d.items():
                if isinstance(v, (int, float)):
                    vals.setdefault(f"{name}.{k}", []).append(float(v))
    return {k: summary(v) for k, v in vals.items()}


def fmt(s: "dict | None", digits: int = 0, scale: float = 1.0) -> str:
    if not s:
        return "failed"
    m, lo, hi = s["median"] * scale, s["min"] * scale, s["max"] * scale
    short = f" n={s['n']}" if s["n"] < s.get("of", s["n"]) else ""
    if s["n"] == 1:
        return f"{m:,.{digits}f}{short}"
    return f"{m:,.{digits}f} ({lo:,.{digits}f}–{hi:,.{digits}f}){short}"


def like_for_like(system: str) -> str:
    return "logbroker" if SYSTEMS[system].fsync else "logbroker-lazy"


def ratio(figs: dict, system: str, key: str, higher_is_better: bool = True) -> str:
    ref = figs.get(like_for_like(system), {}).get(key)
    own = figs.get(system, {}).get(key)
    if system.startswith("logbroker") or not ref or not own or not own["median"] or not ref["median"]:
        return "-"
    r = ref["median"] / own["median"] if higher_is_better else own["median"] / ref["median"]
    return f"{r:.2f}x"


def _table(header: Iterable[str], rows: list[list[str]], first_left: int = 2) -> str:
    header = list(header)
    align = ["---" if i < first_left else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def workload_table(figs: dict, systems: list[str], wl: str) -> str:
    rows = []
    for s in systems:
        f = figs.get(s, {})
        cpu = [f.get(f"{wl} {m} cpu s") for m in ("produce", "consume")]
        rows.append([s, SYSTEMS[s].durability,
                     fmt(f.get(f"{wl} produce rec/s")), fmt(f.get(f"{wl} produce MB/s"), 1),
                     f"{fmt(f.get(f'{wl} ack p50 ms'), 2)} / {fmt(f.get(f'{wl} ack p99 ms'), 2)}",
                     fmt(f.get(f"{wl} consume rec/s")), fmt(f.get(f"{wl} consume MB/s"), 1),
                     " / ".join(fmt(c, 2) for c in cpu),
                     fmt(f.get(f"{wl} produce rss MiB")),
                     fmt(f.get(f"{wl} disk/payload"), 2),
                     ratio(figs, s, f"{wl} produce rec/s"), ratio(figs, s, f"{wl} consume rec/s")])
    return _table(["system", "durability", "produce rec/s", "produce MB/s",
                   "ack p50 / p99 ms under load (every 128th record)", "consume rec/s", "consume MB/s",
                   "server CPU s (produce / consume)", "server peak RSS MiB", "disk bytes / payload byte",
                   "logbroker ÷ this, produce", "logbroker ÷ this, consume"], rows)


def window_table(figs: dict, systems: list[str]) -> str:
    rows = []
    for s in systems:
        f = figs.get(s, {})
        row = [s, SYSTEMS[s].durability]
        for wl in WINDOWED:
            row += [fmt(f.get(f"{wl} window rec/s")), fmt(f.get(f"{wl} window MB/s"), 1),
                    fmt(f.get(f"{wl} window / stream"), 2),
                    f"{fmt(f.get(f'{wl} window p50 ms'), 2)} / {fmt(f.get(f'{wl} window p99 ms'), 2)}"]
        rows.append(row + [ratio(figs, s, f"{wl} window rec/s") for wl in WINDOWED])
    header = ["system", "durability"]
    for wl in WINDOWED:
        header += [f"{wl} window rec/s", f"{wl} window MB/s", f"{wl} window ÷ own streaming {wl} produce",
                   f"{wl} window time p50 / p99 ms"]
    return _table(header + [f"logbroker ÷ this, {wl} window" for wl in WINDOWED], rows)


def roundtrip_table(figs: dict, systems: list[str], wl: str = "RT") -> str:
    rows = [[s, SYSTEMS[s].durability, fmt(figs.get(s, {}).get(f"{wl} p50 ms"), 3),
             fmt(figs.get(s, {}).get(f"{wl} p99 ms"), 3), fmt(figs.get(s, {}).get(f"{wl} cpu s"), 2),
             fmt(figs.get(s, {}).get(f"{wl} rss MiB")), ratio(figs, s, f"{wl} p50 ms", higher_is_better=False)]
            for s in systems]
    return _table(["system", "durability", "ack p50 ms", "ack p99 ms", "server CPU s", "server peak RSS MiB",
                   "this ÷ logbroker, p50"], rows)


def scale_table(figs: dict, systems: list[str]) -> str:
    rows = []
    for s in systems:
        f = figs.get(s, {})
        rows.append([s, SYSTEMS[s].durability, fmt(f.get("scale setup s"), 2),
                     fmt(f.get("scale produce rec/s")), fmt(f.get("scale consume rec/s")),
                     " / ".join(fmt(f.get(f"scale {m} cpu s"), 2) for m in ("produce", "consume")),
                     fmt(f.get("scale produce rss MiB")), fmt(f.get("scale disk/payload"), 2),
                     ratio(figs, s, "scale produce rec/s"), ratio(figs, s, "scale consume rec/s")])
    return _table(["system", "durability", "create topics s", "produce rec/s", "consume rec/s",
                   "server CPU s (create + produce / consume)", "server peak RSS MiB", "disk bytes / payload byte",
                   "logbroker ÷ this, produce", "logbroker ÷ this, consume"], rows)


LIMITS = (("seq_write_fsync_64k.mb_per_s", "sequential write, fdatasync every 64 KiB", "MB/s", 0, 1.0),
          ("seq_write_fsync_1m.mb_per_s", "sequential write, fdatasync every 1 MiB", "MB/s", 0, 1.0),
          ("append_4k_fdatasync.p50_ms", "4 KiB append + fdatasync, p50", "ms", 3, 1.0),
          ("append_4k_fdatasync.p99_ms", "4 KiB append + fdatasync, p99", "ms", 3, 1.0),
          ("tcp_blocking.gb_per_s", "loopback TCP stream, blocking sockets", "GB/s", 2, 1.0),
          ("tcp_blocking.rtt_p50_ms", "loopback TCP 100 B ping-pong p50, blocking", "ms", 3, 1.0),
          ("tcp_asyncio.gb_per_s", "loopback TCP stream, asyncio both ends", "GB/s", 2, 1.0),
          ("tcp_asyncio.rtt_p50_ms", "loopback TCP 100 B ping-pong p50, asyncio", "ms", 3, 1.0),
          ("sendfile.gb_per_s", "sendfile from the page cache to loopback TCP", "GB/s", 2, 1.0))


def limits_table(lims: dict) -> str:
    rows = [[label, fmt(lims.get(key), digits, scale), unit] for key, label, unit, digits, scale in LIMITS]
    return _table(["limit", "measured", "unit"], rows, first_left=1)


def _frac(num: "dict | None", den: "dict | None", den_scale: float = 1.0) -> str:
    if not num or not den or not den["median"]:
        return "-"
    return f"{num['median'] / (den['median'] * den_scale):.2f}"


def vs_limits_table(figs: dict, lims: dict) -> str:
    """logbroker's figures as a fraction of the machine's (1.00 = at the limit)."""
    rows = []
    for s in ("logbroker", "logbroker-lazy"):
        f = figs.get(s, {})
        w = lims.get("seq_write_fsync_1m.mb_per_s")
        net = lims.get("tcp_asyncio.gb_per_s")
        rt = lims.get("tcp_asyncio.rtt_p50_ms")
        fs = lims.get("append_4k_fdatasync.p50_ms")
        floor = None if not rt else {"median": rt["median"] + (fs["median"] if fs and s == "logbroker" else 0)}
        rows.append([s, _frac(f.get("W1 produce MB/s"), w), _frac(f.get("W2 produce MB/s"), w),
                     _frac(f.get("W1 consume MB/s"), net, 1000), _frac(f.get("W2 consume MB/s"), net, 1000),
                     _frac(floor, f.get("RT p50 ms"))])
    return _table(["mode", "W1 produce ÷ seq write (fsync/1 MiB)", "W2 produce ÷ seq write (fsync/1 MiB)",
                   "W1 consume ÷ loopback TCP (asyncio)", "W2 consume ÷ loopback TCP (asyncio)",
                   "RT floor ÷ RT p50 (TCP ping-pong [+ 4 KiB fdatasync])"], rows, first_left=1)


def markdown(results: dict, charts: list[str]) -> str:
    """The docs/benchmarks.md section of a run (between the peers markers)."""
    figs, lims = figures(results), limit_figures(results)
    systems = [s for s in results["systems"] if s in SYSTEMS]
    sz, env = results["sizes"], results["environment"]
    win, rt1k = sz.get("window", 1000), sz.get("RT1k", sz["RT"])
    n_runs = len(results["runs"])
    cell = (f"median (min–max) of {n_runs} runs (a cell from fewer runs, where some failed, says n=)"
            if n_runs > 1 else "one run" + (" (--quick)" if results["quick"] else ""))
    parts = [
        f"Run {env['date']} ({results['elapsed_s']:.0f} s), `{results['command']}`, {cell}. "
        f"Machine: {env['nproc']} CPU ({env['cpu']}), {env['ram_gib']} GiB RAM, disk `{env['disk']}`, "
        f"kernel {env['kernel']}, Python {env['python']}; git `{env['git_commit']}`.",
        "Versions: " + ", ".join(f"{k} {v}" for k, v in results["versions"].items()) + ".",
        f"Workloads: W1 {sz['W1'][0]:,} × {sz['W1'][1]} B values, W2 {sz['W2'][0]:,} × {sz['W2'][1]} B, "
        f"16-byte keys (1,024 distinct); one producer until every record is acknowledged, then one "
        f"consumer from the start. Windows: the same records to a fresh topic, one producer sending "
        f"{win:,} records, waiting until every one of the {win:,} is acknowledged, then the next {win:,} "
        f"(logbroker: the sync Producer with its defaults, acks=all, linger_ms=0, {win:,} sends then "
        f"`result()` of every handle; Redis: one non-transactional pipeline of {win:,} XADDs, "
        f"`execute()` — its streaming produce is already this shape; NATS: {win:,} `publish_async`, "
        f"then `publish_async_completed()`; RabbitMQ: one `send_batch` of {win:,}, then its {win:,} "
        f"confirms), timed until the last is acknowledged; window time is the first send to the last "
        f"ack of a window. RT: {sz['RT']:,} awaited single-record sends of 100 B; RT1k: {rt1k:,} "
        f"of 1,024 B. Scale: "
        f"{sz['scale'][0]:,} topics × {sz['scale'][1]:,} records of 100 B, round-robin, then one consumer "
        f"of all topics. Each system starts fresh in its own temp dir on 127.0.0.1 for every run; the "
        f"runs interleave the systems. Server CPU is the server's process tree (utime + stime) during "
        f"the phase; peak RSS is its VmHWM (reset before each phase); disk bytes are allocated blocks "
        f"under its data dir after the produce phase, minus those before.",
        "Ratios: logbroker ÷ peer for throughput and peer ÷ logbroker for latency, so > 1 means "
        "logbroker is better. Each peer is compared with the logbroker mode of the same durability: "
        "fsync-before-ack rows with `logbroker`, the others with `logbroker-lazy`.",
        "**Durability of an ack**\n\n" + _table(
            ["system", "ack waits for fsync?", "what", "client"],
            [[s, "yes" if SYSTEMS[s].fsync else "no", SYSTEMS[s].durability, SYSTEMS[s].client] for s in systems],
            first_left=4),
        f"**W1: {sz['W1'][0]:,} × {sz['W1'][1]} B**\n\n" + workload_table(figs, systems, "W1"),
        f"**W2: {sz['W2'][0]:,} × {sz['W2'][1]} B**\n\n" + workload_table(figs, systems, "W2"),
        f"**Windows of {win:,} (send {win:,}, wait for every ack, next)**\n\n" + window_table(figs, systems),
        f"**RT: single-record round trip ({sz['RT']:,} awaited sends)**\n\n" + roundtrip_table(figs, systems),
        f"**RT1k: single-record round trip, 1 KiB values ({rt1k:,} awaited sends)**\n\n"
        + roundtrip_table(figs, systems, "RT1k"),
        f"**Scale: {sz['scale'][0]:,} topics**\n\n" + scale_table(figs, systems),
        "**The machine's limits (same run)**\n\n" + limits_table(lims),
        "**logbroker against the limits** (fractions; 1.00 = at the limit)\n\n" + vs_limits_table(figs, lims),
    ]
    parts += [f"![{c}]({c})" for c in charts]
    return "\n\n".join(parts) + "\n"
