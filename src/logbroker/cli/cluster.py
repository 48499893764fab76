"""``logbroker cluster status|rebalance``: the replication state at a glance,
and moving leadership back to the preferred replicas.

``status`` asks any broker for the cluster's metadata (DescribeCluster) and
each partition's leader for its high watermark (ListOffsets latest); a
partition without a reachable leader shows no high watermark. ``rebalance``
is one ElectLeaders request: every partition whose preferred replica (the
first of its replicas) is live and in sync gets it back as leader; it prints
what moved, and fails (exit 1) when a partition could not be moved for an
error. A single node answers both: one broker, the leader of everything.
"""

from __future__ import annotations

import click

from .common import bootstrap_option, emit_json, ids, json_option, table


@click.group()
def cluster() -> None:
    """Brokers, leaders and in-sync replicas; preferred-leader elections."""


def _state(p) -> str:
    if p.leader < 0:
        return "offline"
    return "under-replicated" if p.under_replicated else "ok"


@cluster.command()
@click.argument("topics", nargs=-1)
@bootstrap_option
@json_option
def status(topics, conn, as_json):
    """Brokers (address, liveness, controller) and every partition's leader,
    replicas, in-sync replicas, leader epoch and high watermark (default:
    all topics)."""
    from .. import Admin

    with Admin(**conn) as admin:
        desc = admin.describe_cluster(list(topics) or None)
        led = [(p.topic, p.partition) for p in desc.partitions if p.leader >= 0]
        found = admin.list_offsets(led, "latest", raise_errors=False) if led else {}
    hws = {tp: getattr(v, "offset", None) for tp, v in found.items()}
    parts = [{**p._asdict(), "high_watermark": hws.get((p.topic, p.partition)),
              "under_replicated": p.under_replicated, "state": _state(p)} for p in desc.partitions]
    under = sum(p["under_replicated"] for p in parts)
    offline = sum(p["state"] == "offline" for p in parts)
    if as_json:
        emit_json({"cluster": desc.cluster, "controller": desc.controller,
                   "brokers": [b._asdict() for b in desc.brokers], "partitions": parts,
                   "under_replicated": under, "offline": offline})
        return
    click.echo(f"cluster {desc.cluster or '(single node)'}, controller "
               f"{desc.controller if desc.controller >= 0 else 'none'}, {desc.server}")
    table(["BROKER", "ADDRESS", "STATUS"],
          [(b.id, f"{b.host}:{b.port}" if b.live else "-",
            ("live" if b.live else "down") + (" (controller)" if b.id == desc.controller else ""))
           for b in desc.brokers])
    table(["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "HIGH-WATERMARK", "STATE"],
          [(p["topic"], p["partition"], p["leader"] if p["leader"] >= 0 else "none",
            p["leader_epoch"], ids(p["replicas"]), ids(p["isr"]), p["high_watermark"], p["state"])
           for p in parts])
    click.echo(f"{len(parts)} partition(s), {under} under-replicated, {offline} offline")


@cluster.command()
@click.argument("topics", nargs=-1)
@bootstrap_option
@json_option
def rebalance(topics, conn, as_json):
    """Give each partition (of TOPICS, default: all) back to its preferred
    replica where that one is live and in sync; prints what moved."""
    from .. import Admin

    with Admin(**conn) as admin:
        before = {(p.topic, p.partition): p.leader
                  for p in admin.describe_cluster(list(topics) or None).partitions}
        results = admin.elect_leaders(list(topics) or None)
    unknown = [r.error for r in results.values() if r.partition < 0 and r.error is not None]
    if unknown:
        raise unknown[0]
    rows = sorted(results.values())
    moved = [r for r in rows if r.error is None and before.get((r.topic, r.partition)) != r.leader]
    failed = [r for r in rows if r.error is not None]
    if as_json:
        emit_json({"moved": [{"topic": r.topic, "partition": r.partition,
                              "from": before.get((r.topic, r.partition)), "to": r.leader}
                             for r in moved],
                   "unchanged": len(rows) - len(moved) - len(failed),
                   "failed": [{"topic": r.topic, "partition": r.partition, "leader": r.leader,
                               "error": r.error.name, "message": r.error.message} for r in failed]})
    else:
        if moved or failed:
            table(["TOPIC", "PARTITION", "FROM", "TO", "RESULT"],
                  [(r.topic, r.partition, before.get((r.topic, r.partition)), r.leader,
                    "moved" if r.error is None else f"{r.error.name}: {r.error.message}")
                   for r in moved + failed])
        click.echo(f"{len(moved)} partition(s) moved to their preferred leader, "
                   f"{len(rows) - len(moved) - len(failed)} unchanged, {len(failed)} failed")
    if failed:
        raise failed[0].error
