"""``logbroker topics list|create|describe|alter|delete|delete-records``."""

from __future__ import annotations

import click

from ..errors import LogbrokerError, PartitionOfflineError, UnknownTopicOrPartitionError, for_code
from .common import bootstrap_option, emit_json, ids, json_option, table
from .topic_settings import alter_settings, config_options, parse_settings


@click.group()
def topics() -> None:
    """Create, list, describe and delete topics."""


@topics.command("list")
@bootstrap_option
@json_option
def list_(conn, as_json):
    """Every topic and its partition count."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.list_topics()
    if as_json:
        emit_json([{"topic": t, "partitions": n} for t, n in sorted(found.items())])
    else:
        table(["TOPIC", "PARTITIONS"], sorted(found.items()))


@topics.command()
@click.argument("name")
@bootstrap_option
@click.option("--partitions", type=click.IntRange(1, 10_000), default=1, show_default=True)
@click.option("--retention-ms", type=int, default=None, help="-1: keep forever.")
@click.option("--retention-bytes", type=int, default=None, help="-1: no size limit.")
@click.option("--segment-bytes", type=click.IntRange(min=128), default=None)
@click.option("--replication-factor", type=click.IntRange(min=1), default=None,
              help="Copies of each partition (default: the cluster's; a single node: 1).")
@click.option("--min-insync-replicas", type=click.IntRange(min=1), default=None,
              help="acks=all writes are refused while fewer replicas are in sync.")
@click.option("--unclean-leader-election", is_flag=True, default=None,
              help="Let an out-of-sync replica lead when no in-sync one is left (may lose data).")
@click.option("--config", "configs", multiple=True, metavar="K=V",
              help="Any other log setting (e.g. flush=lazy, segment_ms=3600000).")
@click.option("--replica-assignment", "assignment", default=None, metavar="1:2,2:3",
              help="Each partition's brokers, in partition order (',' between partitions, ':' "
                   "between brokers; the first leads): sets the partition count and the "
                   "replication factor.")
def create(name, conn, partitions, retention_ms, retention_bytes, segment_bytes,
           replication_factor, min_insync_replicas, unclean_leader_election, configs,
           assignment):
    """Create topic NAME."""
    from .. import Admin, NewTopic
    from ..limits import parse_replica_assignment

    settings = {k: v for k, v in (("retention_ms", retention_ms), ("retention_bytes", retention_bytes),
                                  ("segment_bytes", segment_bytes),
                                  ("min_insync_replicas", min_insync_replicas),
                                  ("unclean_leader_election",
                                   "true" if unclean_leader_election else None)) if v is not None}
    settings.update(parse_settings(configs))
    lists = None if assignment is None else parse_replica_assignment(assignment)
    if lists is not None:
        partitions, replication_factor = len(lists), replication_factor or len(lists[0])
    with Admin(**conn) as admin:
        admin.create_topics([NewTopic(name, partitions, settings, replication_factor,
                                      None if lists is None else dict(enumerate(lists)))])
    rf = "" if replication_factor is None else f", replication factor {replication_factor}"
    click.echo(f"created topic {name} with {partitions} partition(s){rf}")


@topics.command()
@click.argument("names", nargs=-1)
@bootstrap_option
@json_option
def describe(names, conn, as_json):
    """Partitions (offsets, size, segments; leader, replicas, in-sync
    replicas) and settings of topics (default: all)."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.describe_topics(list(names) or None)
        own = {name: _overrides(admin, name) for name in found}
    if as_json:
        emit_json([{"topic": d.name, "configs": d.configs, "overrides": own[d.name],
                    "partitions": [p._asdict() for p in d.partitions]}
                   for d in found.values()])
        return
    parts = [(d.name, p) for d in found.values() for p in d.partitions]
    table(["TOPIC", "PARTITION", "LOG-START", "LOG-END", "HIGH-WATERMARK", "BYTES", "SEGMENTS",
           "STATUS"], [(t, p.partition, p.log_start, p.log_end, p.high_watermark, p.size_bytes,
                        p.segments, _status(p)) for t, p in parts])
    table(["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
          [(t, p.partition, p.leader if p.leader >= 0 else "none", ids(p.replicas), ids(p.isr))
           for t, p in parts], title="replication")
    for d in found.values():  # the reasons, whole (too long for a cell)
        for p in (p for p in d.partitions if p.error):
            click.echo(f"{d.name}-{p.partition} {_status(p)}: {p.message}")
    for d in found.values():  # SOURCE: set on the topic, or the broker's default
        shown = {**d.configs, **own[d.name]}
        table(["CONFIG", "VALUE", "SOURCE"],
              [(k, v, "topic" if k in own[d.name] else "default") for k, v in sorted(shown.items())],
              title=f"{d.name} settings")


def _overrides(admin, name: str) -> dict:
    """The settings set on topic ``name`` ({} if it is gone meanwhile)."""
    try:
        return admin.describe_configs(name).overrides
    except LogbrokerError:
        return {}


def _status(p) -> str:
    """online; offline (damaged, or no leader right now); else the error's name
    (e.g. NOT_LEADER_OR_FOLLOWER when its leader could not be asked)."""
    if not p.error:
        return "online" if p.leader >= 0 else "offline"
    return "offline" if p.error == PartitionOfflineError.code or p.leader < 0 \
        else for_code(p.error).name


@topics.command()
@click.argument("name")
@bootstrap_option
@config_options
@click.option("--partitions", type=click.IntRange(1, 10_000), default=None,
              help="The new partition count: larger than the present one (partitions are "
                   "only added; existing data stays where it is).")
def alter(name, conn, configs, deleted, partitions):
    """Change topic NAME: its partition count (--partitions N) and its
    settings (--config K=V, --delete-config K), applied live on every broker
    hosting it."""
    from .. import Admin

    if partitions is None and not configs and not deleted:
        raise click.UsageError("nothing to alter: give --partitions N, --config K=V or "
                               "--delete-config K")
    with Admin(**conn) as admin:
        _alter_partitions(admin, name, partitions)
        done = alter_settings(admin, name, configs, deleted)
    if done is not None:
        click.echo(done)


@topics.command()
@click.argument("names", nargs=-1, required=True)
@bootstrap_option
def delete(names, conn):
    """Delete topics and all their data."""
    from .. import Admin

    with Admin(**conn) as admin:
        admin.delete_topics(names)
    for name in names:
        click.echo(f"deleted topic {name}")


def _alter_partitions(admin, name: str, partitions: "int | None") -> None:
    """``topics alter --partitions N``: the topic's count raised to N."""
    if partitions is None:
        return
    admin.create_partitions({name: partitions})
    click.echo(f"topic {name} now has {partitions} partition(s)")


@topics.command("delete-records")
@click.argument("name")
@bootstrap_option
@click.option("--partition", "partitions", type=click.IntRange(0, 9_999), multiple=True,
              help="A partition (repeatable; default: every partition of the topic).")
@click.option("--before-offset", "--offset", "offset", type=click.IntRange(-1), required=True,
              help="Delete the records below this offset; -1: below the high watermark "
                   "(everything readable).")
@json_option
def delete_records(name, conn, partitions, offset, as_json):
    """Delete the records of topic NAME below an offset (its log start moves
    up; Kafka's DeleteRecords)."""
    from .. import Admin

    with Admin(**conn) as admin:
        if not partitions:
            count = admin.list_topics().get(name)
            if count is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            partitions = range(count)
        moved = admin.delete_records({(name, p): offset for p in partitions})
    rows = [(t, p, start) for (t, p), start in sorted(moved.items())]
    if as_json:
        emit_json([{"topic": t, "partition": p, "log_start": s} for t, p, s in rows])
    else:
        table(["TOPIC", "PARTITION", "LOG-START"], rows)
