"""``logbroker groups list|describe|delete|reset-offsets|delete-offsets``: members and
lag at a glance."""

from __future__ import annotations

import click

from .common import bootstrap_option, emit_json, json_option, table
from ..errors import InvalidRequestError
from ..limits import iso_ms


@click.group()
def groups() -> None:
    """Consumer groups: committed offsets, lag, offset resets."""


@groups.command("list")
@bootstrap_option
@json_option
def list_(conn, as_json):
    """Every group with members or committed offsets, and its type: classic,
    or consumer (Kafka 4's consumer group protocol)."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.list_groups(kinds=True)
    if as_json:
        emit_json(list(found))
    else:
        table(["GROUP", "TYPE"], list(found.items()))


@groups.command()
@click.argument("names", nargs=-1, required=True)
@bootstrap_option
@json_option
def describe(names, conn, as_json):
    """State, generation, assignor and members (client id, host, assigned
    partitions), then per partition: committed offset, log end, lag in
    records and in time."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.describe_groups(names)
    if as_json:
        emit_json([_group_json(found[g]) for g in names])
        return
    for i, g in enumerate(names):
        d = found[g]
        if i:
            click.echo()
        click.echo(f"group {g}: type {d.kind}, state {d.state}, "
                   f"{'epoch' if d.kind == 'consumer' else 'generation'} {d.generation}, "
                   f"assignor {d.protocol or '-'}, {len(d.members)} member(s)")
        if d.members:
            table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "PARTITIONS"],
                  [(mb.member_id, mb.group_instance_id or "-", mb.client_id or "-", mb.host,
                    _partitions(mb.partitions)) for mb in d.members])
            click.echo()
        table(["GROUP", "TOPIC", "PARTITION", "COMMITTED", "LOG-END", "LAG", "LAG-TIME"],
              [(g, p.topic, p.partition, p.committed, p.log_end, p.lag if p.lag >= 0 else "-",
                _age(p.lag_ms))
               for p in d.partitions])


def _group_json(d) -> dict:
    return {"group": d.group, "type": d.kind, "state": d.state, "generation": d.generation,
            "assignor": d.protocol,
            "members": [{**mb._asdict(), "partitions": [list(tp) for tp in mb.partitions]}
                        for mb in d.members],
            "partitions": [{"group": d.group, **p._asdict()} for p in d.partitions]}


def _partitions(tps) -> str:
    """``t[0,1] u[3]``: a member's assignment, compactly."""
    by_topic: dict = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(str(p))
    return " ".join(f"{t}[{','.join(ps)}]" for t, ps in by_topic.items()) or "-"


@groups.command()
@click.argument("names", nargs=-1, required=True)
@bootstrap_option
def delete(names, conn):
    """Forget groups and their committed offsets (NON_EMPTY_GROUP while a
    group has members)."""
    from .. import Admin

    with Admin(**conn) as admin:
        admin.delete_groups(names)
    click.echo(f"deleted {len(names)} group(s)", err=True)


def _age(ms: int) -> str:
    if ms < 0:
        return "-"
    seconds = ms / 1000
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.1f}m" if seconds < 7200 else f"{seconds / 3600:.1f}h"


@groups.command("reset-offsets")
@click.argument("group")
@bootstrap_option
@click.option("-t", "--topic", "topic_names", multiple=True, help="Topic to reset (repeatable).")
@click.option("--all-topics", is_flag=True, help="Every topic the group has offsets for.")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None)
@click.option("--to-earliest", "target", flag_value="earliest")
@click.option("--to-latest", "target", flag_value="latest")
@click.option("--to-offset", type=click.IntRange(min=0), default=None)
@click.option("--to-datetime", default=None, help="ISO 8601, e.g. 2026-11-22T10:00:00Z.")
@click.option("--execute", is_flag=True, help="Apply (default: a dry run that only shows).")
@json_option
def reset_offsets(group, conn, topic_names, all_topics, partition, target, to_offset,
                  to_datetime, execute, as_json):
    """Move GROUP's committed offsets; a dry run unless --execute."""
    from .. import Admin

    spec = _spec(target, to_offset, to_datetime)
    with Admin(**conn) as admin:
        current = admin.fetch_offsets(group)
        if all_topics:
            topic_names = sorted({t for t, _ in current})
        if not topic_names:
            raise InvalidRequestError("name --topic (repeatable) or --all-topics")
        counts = admin.list_topics()
        parts = [(t, p) for t in topic_names for p in range(counts.get(t, 0))
                 if partition is None or p == partition]
        missing = [t for t in topic_names if t not in counts]
        if missing:
            raise InvalidRequestError(f"unknown topic(s): {', '.join(missing)}")
        new = ({tp: to_offset for tp in parts} if to_offset is not None else
               {tp: o.offset for tp, o in admin.list_offsets(parts, spec).items()})
        if spec not in ("earliest", "latest") and to_offset is None:
            ends = admin.list_offsets(parts, "latest")
            new = {tp: off if off >= 0 else ends[tp].offset for tp, off in new.items()}
        if execute:
            admin.commit_offsets(group, new)
    rows = [(group, t, p, current.get((t, p)).offset if current.get((t, p)) else None, new[(t, p)])
            for t, p in parts]
    if as_json:
        emit_json({"executed": execute, "offsets": [dict(zip(("group", "topic", "partition", "current",
                                                               "new"), r)) for r in rows]})
    else:
        table(["GROUP", "TOPIC", "PARTITION", "CURRENT", "NEW"], rows)
        click.echo("offsets committed" if execute else "dry run: nothing changed (add --execute)",
                   err=True)


@groups.command("delete-offsets")
@click.argument("group")
@bootstrap_option
@click.option("-t", "--topic", "topic_names", multiple=True, required=True,
              help="Topic whose committed offsets to forget (repeatable).")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None)
@json_option
def delete_offsets(group, conn, topic_names, partition, as_json):
    """Forget GROUP's committed offsets of the topics (Kafka's OffsetDelete):
    refused for a topic an active member of the group reads."""
    from .. import Admin

    with Admin(**conn) as admin:
        counts = admin.list_topics()
        missing = [t for t in topic_names if t not in counts]
        if missing:
            raise InvalidRequestError(f"unknown topic(s): {', '.join(missing)}")
        parts = [(t, p) for t in dict.fromkeys(topic_names) for p in range(counts[t])
                 if partition is None or p == partition]
        got = admin.delete_offsets(group, parts, raise_errors=False)
    rows = [(group, t, p, "deleted" if err is None else err.name) for (t, p), err in got.items()]
    if as_json:
        emit_json([dict(zip(("group", "topic", "partition", "result"), r)) for r in rows])
    else:
        table(["GROUP", "TOPIC", "PARTITION", "RESULT"], rows)
    first = next((err for err in got.values() if err is not None), None)
    if first is not None:
        raise first


def _spec(target, to_offset, to_datetime):
    chosen = [x for x in (target, to_offset, to_datetime) if x is not None]
    if len(chosen) != 1:
        raise InvalidRequestError("choose one of --to-earliest, --to-latest, --to-offset, --to-datetime")
    if to_datetime is None:
        return target or to_offset
    return iso_ms(to_datetime, f"--to-datetime {to_datetime!r} is not ISO 8601")
