"""``logbroker cluster status|rebalance|reassign|reassignments``: the
replication state at a glance, moving leadership back to the preferred
replicas, and moving partitions to other brokers (``reassign``, with
``--wait`` showing the targets in sync until it finishes; ``reassignments``
lists the moves in progress).

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


def _state(p, moving) -> str:
    if p.leader < 0:
        return "offline"
    if (p.topic, p.partition) in moving:
        return "reassigning"
    return "under-replicated" if p.under_replicated else "ok"


@cluster.command()
@click.argument("topics", nargs=-1)
@bootstrap_option
@json_option
def status(topics, conn, as_json):
    """Brokers (address, liveness, controller) and every partition's leader,
    replicas, in-sync replicas, leader epoch, high watermark and state (ok,
    under-replicated, reassigning, offline; default: all topics)."""
    from .. import Admin

    with Admin(**conn) as admin:
        desc = admin.describe_cluster(list(topics) or None)
        led = [(p.topic, p.partition) for p in desc.partitions if p.leader >= 0]
        found = admin.list_offsets(led, "latest", raise_errors=False) if led else {}
        moving = admin.list_partition_reassignments(list(topics) or None)
    hws = {tp: getattr(v, "offset", None) for tp, v in found.items()}
    parts = [{**p._asdict(), "high_watermark": hws.get((p.topic, p.partition)),
              "under_replicated": p.under_replicated, "state": _state(p, moving)}
             for p in desc.partitions]
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


def _broker_ids(ctx, param, value):
    if value is None:
        return None
    try:
        ids_ = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(f"a comma-separated list of broker ids, not {value!r}") from None
    if not ids_:
        raise click.BadParameter("name at least one broker id")
    return ids_


def _move_row(m) -> dict:
    return {"topic": m.topic, "partition": m.partition, "replicas": list(m.replicas),
            "target": list(m.target), "adding": list(m.adding), "removing": list(m.removing)}


@cluster.command()
@click.argument("topic")
@click.option("--partition", "-p", type=int, required=True, help="The partition to move.")
@click.option("--replicas", callback=_broker_ids, default=None,
              help="Target broker ids, comma-separated, the first the preferred leader.")
@click.option("--cancel", is_flag=True, help="Cancel the move in progress (original replicas).")
@click.option("--wait", is_flag=True, help="Show progress until the move has finished.")
@click.option("--wait-timeout", type=click.FloatRange(0.1), default=600.0, show_default=True,
              help="Seconds --wait waits at most.")
@bootstrap_option
@json_option
def reassign(topic, partition, replicas, cancel, wait, wait_timeout, conn, as_json):
    """Move a partition of TOPIC to other brokers (--replicas 2,3) or cancel
    its move (--cancel): the new replicas catch up, leadership moves, the
    old replicas are deleted. With --wait, the progress (targets in sync)
    until it has finished."""
    import time

    from .. import Admin

    if cancel == (replicas is not None):
        raise click.UsageError("give either --replicas or --cancel")
    with Admin(**conn) as admin:
        admin.reassign_partitions({(topic, partition): None if cancel else replicas})
        if not as_json:
            click.echo(f"{topic}[{partition}]: " + ("move cancelled" if cancel else
                                                    f"moving to {ids(replicas)}"))
        deadline, said = time.monotonic() + wait_timeout, None
        while True:
            moving = admin.list_partition_reassignments([topic]).get((topic, partition))
            if moving is None or not wait:
                break
            state = admin.describe_cluster([topic]).partitions
            isr = next((p.isr for p in state if p.partition == partition), ())
            line = (f"{topic}[{partition}]: replicas {ids(moving.replicas)}, targets in sync "
                    f"{sum(r in isr for r in moving.target)}/{len(moving.target)}, adding "
                    f"{ids(moving.adding)}, removing {ids(moving.removing)}")
            if line != said and not as_json:
                click.echo(line)
                said = line
            if time.monotonic() >= deadline:
                raise click.ClickException(f"{topic}[{partition}] is still moving after "
                                           f"{wait_timeout:g} s")
            time.sleep(0.5)
    if as_json:
        emit_json({"topic": topic, "partition": partition, "cancelled": cancel,
                   "in_progress": None if moving is None else _move_row(moving)})
    elif moving is None:
        click.echo(f"{topic}[{partition}]: done")


@cluster.command()
@click.argument("topics", nargs=-1)
@bootstrap_option
@json_option
def reassignments(topics, conn, as_json):
    """The partition moves in progress (of TOPICS, default: all)."""
    from .. import Admin

    with Admin(**conn) as admin:
        moves = sorted(admin.list_partition_reassignments(list(topics) or None).values())
    if as_json:
        emit_json({"reassignments": [_move_row(mv) for mv in moves]})
        return
    table(["TOPIC", "PARTITION", "REPLICAS", "TARGET", "ADDING", "REMOVING"],
          [(mv.topic, mv.partition, ids(mv.replicas), ids(mv.target), ids(mv.adding),
            ids(mv.removing)) for mv in moves])
    click.echo(f"{len(moves)} partition move(s) in progress")
