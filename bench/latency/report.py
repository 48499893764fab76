"""The figures of ``python -m bench.latency``: each stage's medians over
rounds, the derived breakdown (differences taken within a round, then the
median over rounds), and the report's tables."""

from __future__ import annotations

from bench.common import harness
from bench.common.stats import summary

STAGES = {
    "pingpong": "loopback TCP 100 B ping-pong, blocking sockets",
    "fdatasync": "1 KiB pwrite + fdatasync, growing file",
    "fdatasync_prealloc": "1 KiB pwrite + fdatasync, preallocated file",
    "raw_lazy": "raw socket Produce, lazy broker",
    "raw_fsync": "raw socket Produce, fsync broker",
    "sync_lazy": "sync Producer send().result(), lazy broker",
    "sync_fsync": "sync Producer send().result(), fsync broker",
    "aio_fsync": "asyncio Producer await send(), fsync broker",
    "split_fsync": "sync Producer, callback stamped, fsync broker",
}
SPLIT = {
    "send_call": "send() call (caller thread: append, encode, socket write)",
    "to_callback": "send() return -> response callback (network, broker, fsync, I/O thread wake, decode)",
    "callback": "response callback (resolve the batch, drain)",
    "to_result": "callback end -> result() returns (hand-off to the caller thread, GIL)",
}
# (key, label, how, [(sign, stage)]) or, for the split, (key, label, how, part)
DERIVED = (
    ("network", "network floor", "ping-pong", [(1, "pingpong")]),
    ("broker_processing", "broker request processing", "raw lazy - ping-pong",
     [(1, "raw_lazy"), (-1, "pingpong")]),
    ("fsync_path", "the broker's fsync path", "raw fsync - raw lazy", [(1, "raw_fsync"), (-1, "raw_lazy")]),
    ("fdatasync_floor", "  fdatasync floor, growing file", "1 KiB pwrite + fdatasync", [(1, "fdatasync")]),
    ("fdatasync_prealloc", "  fdatasync, preallocated file", "the same, no size change",
     [(1, "fdatasync_prealloc")]),
    ("fsync_path_over_floor", "  fsync path beyond the floor", "raw fsync - raw lazy - fdatasync",
     [(1, "raw_fsync"), (-1, "raw_lazy"), (-1, "fdatasync")]),
    ("client_fsync", "the client library, fsync broker", "sync fsync - raw fsync",
     [(1, "sync_fsync"), (-1, "raw_fsync")]),
    ("client_lazy", "the client library, lazy broker", "sync lazy - raw lazy",
     [(1, "sync_lazy"), (-1, "raw_lazy")]),
    *((f"split_{part}", f"  split: {label}", "p50 of the part, stamped sync producer", part)
      for part, label in SPLIT.items()),
    ("split_sum", "  split: sum of the parts' p50s", "beside the stamped total's p50", "sum"),
    ("stamping", "stamped - plain sync producer", "split fsync - sync fsync",
     [(1, "split_fsync"), (-1, "sync_fsync")]),
    ("asyncio_vs_sync", "asyncio vs sync producer", "aio fsync - sync fsync",
     [(1, "aio_fsync"), (-1, "sync_fsync")]),
)
SYSCALL_MIN = 0.5  # calls per send shown in the table


def _derived_value(rnd: dict, terms) -> float:
    if terms == "sum":
        return sum(rnd["split_fsync"]["split"][part]["p50_ms"] for part in SPLIT)
    if isinstance(terms, str):
        return rnd["split_fsync"]["split"][terms]["p50_ms"]
    return sum(sign * rnd[name]["p50_ms"] for sign, name in terms)


def summarize(results: dict) -> dict:
    rounds = results["rounds"]
    out: dict = {}
    for name in STAGES:
        got = [r[name] for r in rounds]
        s = {"p50_ms": summary([g["p50_ms"] for g in got]), "p99_ms": summary([g["p99_ms"] for g in got])}
        if "broker" in got[0]:
            s.update(client_cpu_us=summary([g["client_cpu_us"] for g in got]),
                     broker_user_us=summary([g["broker"]["user_us"] for g in got]),
                     broker_sys_us=summary([g["broker"]["sys_us"] for g in got]),
                     broker_ctx=summary([g["broker"]["ctx"] for g in got]))
        out[name] = s
    out["split"] = {part: {q: summary([r["split_fsync"]["split"][part][q] for r in rounds])
                           for q in ("p50_ms", "p99_ms")} for part in SPLIT}
    for part in SPLIT:  # a part is negative when the threads overlap (see SPLIT's labels)
        out["split"][part]["negative_share"] = summary(
            [r["split_fsync"]["split"][part]["negative"] / r["split_fsync"]["n"] for r in rounds])
    derived = [{"key": key, "name": label, "how": how,
                "ms": summary([_derived_value(r, terms) for r in rounds])}
               for key, label, how, terms in DERIVED]
    return {"summary": out, "derived": derived}


def _ms(s: dict) -> str:
    return harness.fmt_s(s, 3)


def _how(row: dict, split: dict) -> str:
    """The derivation; a split part also says how often it was negative."""
    part = split.get(row["key"].removeprefix("split_"))
    share = part["negative_share"]["median"] if part and "negative_share" in part else 0
    return f"{row['how']}; < 0 in {100 * share:.1f}% of sends" if share else row["how"]


def tables(results: dict) -> list:
    s, p = results["summary"], results["params"]
    rows = []
    for name, label in STAGES.items():
        st = s[name]
        if "broker_user_us" in st:
            extra = (f"{st['broker_user_us']['median']:.0f} / {st['broker_sys_us']['median']:.0f}",
                     f"{st['broker_ctx']['median']:.1f}", f"{st['client_cpu_us']['median']:.0f}")
        else:
            extra = ("-", "-", "-")
        rows.append((label, _ms(st["p50_ms"]), _ms(st["p99_ms"])) + extra)
    made = [harness.table(
        f"Durable 1 KiB round trip, p50 (median of rounds): {p['rounds']} round(s) x {p['sends']:,} sends "
        f"per stage, 1,024 B value + 16 B key, acks=all; ms median (min-max); CPU and context "
        f"switches: medians", ("stage", "p50 ms", "p99 ms", "broker CPU us/send user / sys",
                              "broker ctx switches/send", "client CPU us/send"), rows)]
    total = s["split_fsync"]["p50_ms"]
    made.append(harness.table(
        f"Where the time goes (derived): p50s, differences within a round, ms median (min-max) of "
        f"{p['rounds']}; the stamped producer's total p50 {_ms(total)}",
        ("part", "ms", "how"), [(d["name"], _ms(d["ms"]), _how(d, s["split"])) for d in results["derived"]],
        justify="left"))
    sc = results.get("syscalls") or {}
    if "per_send" in sc:
        made.append(harness.table(
            "Broker syscalls per durable send (strace -c -f)",
            ("syscall", f"per send ({sc['sends']} raw sends, fresh fsync broker; >= {SYSCALL_MIN})"),
            [(name, f"{n:.2f}") for name, n in sc["per_send"].items() if n >= SYSCALL_MIN]))
    elif sc:
        made.append(harness.table("Broker syscalls per durable send", ("note",),
                                  [(sc.get("skipped", "not measured"),)], justify="left"))
    return made
