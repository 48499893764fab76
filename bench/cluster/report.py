"""Output of the cluster bench: medians over rounds, ratios paired within a
round, CPU by process role, failover figures, the targets and their tables."""

from __future__ import annotations

from bench.cluster.phases import CONFIGS, LABELS
from bench.common.harness import fmt_s, table, targets_table
from bench.common.stats import summary

PAIRS = (("c3-rf3", "c3-rf1"), ("c3-rf3", "c1-rf1"), ("c3-rf3", "single"), ("c3-rf1", "single"),
         ("c1-rf1", "single"))


def _get(phases: list, config: str, name: str, round_no: int) -> "dict | None":
    return next((ph for ph in phases if ph["config"] == config and ph["phase"] == name
                 and ph["round"] == round_no), None)


def cpu_roles(ph: dict) -> dict:
    """CPU seconds of the phase by role: ``client``, ``etcd``, ``leader`` (brokers
    that lead a partition of the topic and follow none), ``follower`` (follow
    and lead none; also their count), ``mixed`` (both), ``idle`` (neither),
    ``brokers`` (all), ``main_share`` (the brokers' main threads, i.e. event
    loops, as a share of the brokers' CPU)."""
    out = {"client": ph["cpu_s"], "etcd": ph["cpu"].get("etcd", {}).get("cpu_s", 0.0), "leader": 0.0,
           "follower": 0.0, "followers": 0, "mixed": 0.0, "idle": 0.0, "brokers": 0.0}
    main = 0.0
    for bid, role in ph["roles"].items():
        used = ph["cpu"].get(f"broker-{bid}")
        if used is None:
            continue
        kind = ("mixed" if role["follows"] else "leader") if role["leads"] else (
            "follower" if role["follows"] else "idle")
        out[kind] += used["cpu_s"]
        out["followers"] += kind == "follower"
        out["brokers"] += used["cpu_s"]
        main += used["threads"].get("main", 0.0)
    out["main_share"] = main / out["brokers"] if out["brokers"] else None
    return out


def summarize(results: dict) -> dict:
    """``{config: {phase: {metric: summary}}}``, ``ratios`` paired per round,
    ``failover`` medians."""
    phases = [ph for r in results.get("rounds", []) for ph in r["phases"]]
    out: dict = {"configs": {}, "ratios": {}}
    for ph in phases:
        out["configs"].setdefault(ph["config"], {}).setdefault(ph["phase"], []).append(ph)
    for by_phase in out["configs"].values():
        for name, runs in list(by_phase.items()):
            m: dict = {}
            keys = ["records_per_s", "mb_per_s", "seconds"]
            keys += [k for k in ("ack_p50_ms", "ack_p99_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "mean_ms",
                                 "max_ms") if all(k in r for r in runs)]
            for k in keys:
                m[k] = summary([r[k] for r in runs])
            for k in ("busy_cores", "ours_cores", "other_cores"):
                m[k] = summary([r["machine"][k] for r in runs])
            roles = [cpu_roles(r) for r in runs]
            n = [r["records"] for r in runs]
            for k in ("client", "etcd", "leader", "mixed", "idle", "brokers"):
                m[f"{k}_us_per_record"] = summary([1e6 * x[k] / c for x, c in zip(roles, n)])
                m[f"{k}_cores"] = summary([x[k] / r["seconds"] for x, r in zip(roles, runs)])
            if all(x["followers"] for x in roles):
                m["follower_us_per_record"] = summary([1e6 * x["follower"] / x["followers"] / c
                                                       for x, c in zip(roles, n)])
                m["follower_cores"] = summary([x["follower"] / x["followers"] / r["seconds"]
                                               for x, r in zip(roles, runs)])
            m["total_us_per_record"] = summary([1e6 * (x["client"] + x["etcd"] + x["brokers"]) / c
                                                for x, c in zip(roles, n)])
            shares = [x["main_share"] for x in roles if x["main_share"] is not None]
            if shares:
                m["broker_main_thread_share"] = summary(shares)
            by_phase[name] = m
    rounds = sorted({ph["round"] for ph in phases})
    for a, b in PAIRS:
        for name, metric in (("W1.produce", "records_per_s"), ("W1.consume", "records_per_s"),
                             ("W2.produce", "records_per_s"), ("W2.consume", "records_per_s"),
                             ("roundtrip", "p50_ms"), ("roundtrip", "p99_ms")):
            vals = []
            for r in rounds:
                x, y = _get(phases, a, name, r), _get(phases, b, name, r)
                if x and y and y[metric]:
                    vals.append(x[metric] / y[metric])
            if vals:
                out["ratios"][f"{a}/{b} {name} {metric}"] = summary(vals)
    trials = results.get("failover", {}).get("trials", [])
    if trials:
        fo = {}
        for k in ("first_ack_s", "first_ack_any_s", "max_gap_s", "lease_gone_s", "elected_s",
                  "lat_before_p50_ms", "lat_before_p99_ms"):
            vals = [t[k] for t in trials if t.get(k) is not None]
            if vals:
                fo[k] = summary(vals)
        after = [t["first_ack_s"] - t["elected_s"] for t in trials
                 if t.get("first_ack_s") is not None and t.get("elected_s") is not None]
        if after:
            fo["client_after_election_s"] = summary(after)
        fo["trials"] = len(trials)
        fo["without_ack"] = sum(1 for t in trials if t.get("first_ack_s") is None)
        fo["failed_records"] = sum(t.get("failed", 0) for t in trials)
        out["failover"] = fo
    return out


def targets(s: dict) -> list[dict]:
    out = []
    fo = s.get("failover")
    if fo and "first_ack_s" in fo:
        med = fo["first_ack_s"]["median"]
        out.append({"target": "failover (kill -9 of the leader -> first ack through the new leader) median <= 3 s",
                    "measured": (f"{fmt_s(fo['first_ack_s'], 2)} s over {fo['trials']} trials"
                                 + (f", {fo['without_ack']} without an ack" if fo["without_ack"] else "")),
                    "ratio": 3.0 / med if med else 0.0, "met": med <= 3.0 and not fo["without_ack"]})
    for wl in ("W1", "W2"):
        key = f"c3-rf3/c3-rf1 {wl}.produce records_per_s"
        if key in s["ratios"]:
            r = s["ratios"][key]
            out.append({"target": f"{wl} produce acks=all: RF=3 >= 50 % of RF=1 (3 brokers, paired per round)",
                        "measured": f"{fmt_s(r, 2)}", "ratio": r["median"] / 0.5, "met": r["median"] >= 0.5})
    return out


# -- tables --------------------------------------------------------------------------------
def _order(configs: dict) -> list[str]:
    return [c for c in CONFIGS if c in configs]


def tables(results: dict) -> list:
    s = results["summary"]
    p = results["params"]
    made = []
    cfgs = s["configs"]
    if any("W1.produce" in cfgs[c] for c in cfgs):
        rows = []
        for wl in ("W1", "W2"):
            for c in _order(cfgs):
                prod, cons = cfgs[c].get(f"{wl}.produce"), cfgs[c].get(f"{wl}.consume")
                if not prod:
                    continue
                ratio = s["ratios"].get(f"c3-rf3/{c} {wl}.produce records_per_s") if c != "c3-rf3" else None
                rows.append((wl, LABELS[c], fmt_s(prod["records_per_s"], 0), fmt_s(prod["mb_per_s"], 1),
                             f"{prod['ack_p50_ms']['median']:.1f} / {prod['ack_p99_ms']['median']:.1f}"
                             if "ack_p50_ms" in prod else "-",
                             fmt_s(cons["records_per_s"], 0), fmt_s(cons["mb_per_s"], 1),
                             fmt_s(ratio, 2) if ratio else "-", fmt_s(prod["other_cores"], 2)))
        w1 = f"W1 {p['w1_records']:,} x {p['w1_value_bytes']} B, {p['w1_partitions']} partition(s)"
        w2 = f"W2 {p['w2_records']:,} x {p['w2_value_bytes']} B, {p['w2_partitions']} partition(s)"
        made.append(table(f"Produce (acks=all), then consume the same data — {w1}; {w2}; median (min–max) "
                          f"of {p['rounds']} rounds",
                          ("workload", "setup", "produce rec/s", "produce MB/s", "ack p50 / p99 ms under load",
                           "consume rec/s", "consume MB/s", "RF=3 ÷ this, produce (paired)",
                           "other procs, cores (produce)"), rows))
        rows = []
        for wl in ("W1", "W2"):
            for c in _order(cfgs):
                m = cfgs[c].get(f"{wl}.produce")
                if not m:
                    continue
                foll = m.get("follower_us_per_record")
                rows.append((wl, LABELS[c], fmt_s(m["records_per_s"], 0),
                             fmt_s(m["client_us_per_record"], 2),
                             fmt_s(m["leader_us_per_record"], 2) if m["leader_us_per_record"]["median"] else "-",
                             fmt_s(foll, 2) if foll else "-",
                             fmt_s(m["mixed_us_per_record"], 2) if m["mixed_us_per_record"]["median"] else "-",
                             fmt_s(m["etcd_us_per_record"], 3), fmt_s(m["total_us_per_record"], 2),
                             " / ".join(f"{m[k]['median']:.2f}" for k in ("client_cores", "brokers_cores",
                                                                           "etcd_cores", "other_cores")),
                             fmt_s(m["busy_cores"], 2),
                             f"{m['broker_main_thread_share']['median']:.2f}" if "broker_main_thread_share" in m
                             else "-"))
        made.append(table("CPU during produce, by process role — µs of CPU per record, median (min–max)",
                          ("workload", "setup", "rec/s", "client", "leader broker", "each follower broker",
                           "brokers leading and following", "etcd", "all our processes",
                           "cores: client / brokers / etcd / others", "machine busy cores",
                           "brokers' main-thread share"), rows))
    if any("roundtrip" in cfgs[c] for c in cfgs):
        rows = []
        for c in _order(cfgs):
            m = cfgs[c].get("roundtrip")
            if not m:
                continue
            ratio = s["ratios"].get(f"c3-rf3/{c} roundtrip p50_ms") if c != "c3-rf3" else None
            rows.append((LABELS[c], fmt_s(m["p50_ms"], 3), fmt_s(m["p90_ms"], 3), fmt_s(m["p99_ms"], 3),
                         fmt_s(m["p999_ms"], 3), fmt_s(m["mean_ms"], 3), fmt_s(ratio, 2) if ratio else "-",
                         fmt_s(m["brokers_us_per_record"], 0), fmt_s(m["other_cores"], 2)))
        made.append(table(f"Single-record round trip, send(...).result() x {p['rtt_sends']:,} (acks=all, "
                          f"linger_ms=0) — ms, median (min–max) of rounds",
                          ("setup", "p50", "p90", "p99", "p99.9", "mean", "RF=3 ÷ this, p50 (paired)",
                           "brokers' CPU µs/send", "other procs, cores"), rows))
    fo = results.get("failover", {}).get("trials", [])
    if fo:
        def sec(v):
            return "-" if v is None else f"{v:.3f}"
        rows = [(str(t["trial"] + 1), f"{t['victim']}" + (" (controller too)" if t["victim_was_controller"] else ""),
                 sec(t.get("lease_gone_s")), sec(t.get("elected_s")), sec(t.get("first_ack_any_s")),
                 sec(t.get("first_ack_s")), sec(t.get("max_gap_s")),
                 f"{t['acked']:,} / {t['sent']:,}", str(t["failed"])) for t in fo]
        f = s["failover"]
        rows.append(("median (min–max)", "", *(fmt_s(f[k], 3) if k in f else "-" for k in
                     ("lease_gone_s", "elected_s", "first_ack_any_s", "first_ack_s", "max_gap_s")), "", ""))
        made.append(table(f"Failover: kill -9 of the partition's leader under a producer sending a "
                          f"{p['failover_value_bytes']} B record every {p['failover_interval_ms']:g} ms "
                          "(acks=all, RF=3) — seconds after the kill",
                          ("trial", "killed broker", "its lease gone (seen)", "new leader (seen)",
                           "first ack, any record", "first ack of a record sent after the kill",
                           "longest gap between acks", "acked / sent", "failed records"), rows))
    if results.get("targets"):
        made.append(targets_table(results["targets"], measured="measured median (min–max)", ratio=True))
    return made

