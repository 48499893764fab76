"""``logbroker transactions list|describe``: the transaction coordinators'
view of transactional ids (a table for people, ``--json`` for scripts).
An unknown id is ``error: TRANSACTIONAL_ID_NOT_FOUND: ...``, exit 1.
``transactions hanging`` / ``abort``: the partitions' side, Kafka's
kafka-transactions.sh find-hanging and abort (api/txn_admin.py)."""

from __future__ import annotations

import time

import click

from .common import bootstrap_option, emit_json, json_option, table
from ..errors import InvalidRequestError

STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
          "CompleteAbort", "PrepareEpochFence", "Dead")


@click.group()
def transactions() -> None:
    """Transactions: transactional ids, their state, producer and partitions."""


@transactions.command("list")
@bootstrap_option
@click.option("-s", "--state", "states", multiple=True, type=click.Choice(STATES),
              help="Only transactional ids in this state (repeatable).")
@json_option
def list_(conn, states, as_json):
    """Every transactional id the brokers coordinate: producer id, state."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.list_transactions(states)
    if as_json:
        emit_json([row._asdict() for row in found])
    else:
        table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"],
              [(r.transactional_id, r.producer_id, r.state, r.coordinator) for r in found])


@transactions.command()
@click.argument("ids", nargs=-1, required=True)
@bootstrap_option
@json_option
def describe(ids, conn, as_json):
    """State, producer id and epoch, timeout, age of the open transaction and
    its partitions, per transactional id."""
    from .. import Admin

    for tid in ids:
        if not 1 <= len(tid) <= 249 or not tid.isprintable():
            raise InvalidRequestError(f"transactional id {tid[:60]!r}: use 1-249 printable "
                                      "characters")
    with Admin(**conn) as admin:
        found = admin.describe_transactions(ids)
    if as_json:
        emit_json([{**found[t]._asdict(), "partitions": [list(tp) for tp in found[t].partitions]}
                   for t in dict.fromkeys(ids)])
        return
    now = int(time.time() * 1000)
    table(["TRANSACTIONAL-ID", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "OPEN-FOR",
           "COORDINATOR", "PARTITIONS"],
          [(d.transactional_id, d.state, d.producer_id, d.producer_epoch, d.timeout_ms,
            f"{(now - d.start_ms) / 1000:.1f}s" if d.start_ms >= 0 else "-", d.coordinator,
            _partitions(d.partitions)) for d in (found[t] for t in dict.fromkeys(ids))])


def _partitions(tps) -> str:
    """``t[0,1] u[3]``, compactly."""
    by_topic: dict = {}
    for t, p in tps:
        by_topic.setdefault(t, []).append(str(p))
    return " ".join(f"{t}[{','.join(ps)}]" for t, ps in by_topic.items()) or "-"


@transactions.command()
@click.option("--topic", "topics", multiple=True, help="Only this topic (repeatable; default: "
              "every topic).")
@click.option("--max-age-ms", type=click.IntRange(0), default=900_000, show_default=True,
              help="Open longer than this: the brokers' transaction_max_timeout_ms (no "
              "coordinator keeps a transaction open longer).")
@bootstrap_option
@json_option
def hanging(topics, max_age_ms, conn, as_json):
    """Open transactions older than --max-age-ms, per partition (each
    partition's leader answers: DescribeProducers)."""
    from .. import Admin

    with Admin(**conn) as admin:
        counts = admin.list_topics()
        names = list(dict.fromkeys(topics)) or sorted(counts)
        missing = [t for t in names if t not in counts]
        if missing:
            raise InvalidRequestError(f"unknown topic {missing[0]!r}")
        found = admin.describe_producers([(t, p) for t in names for p in range(counts[t])])
    now = int(time.time() * 1000)
    rows = [o for opened in found.values() for o in opened
            if o.first_timestamp >= 0 and now - o.first_timestamp > max_age_ms]
    if as_json:
        emit_json([{**o._asdict(), "age_ms": now - o.first_timestamp} for o in rows])
        return
    table(["TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "FIRST-OFFSET",
           "OPEN-FOR"],
          [(o.topic, o.partition, o.producer_id, o.producer_epoch, o.coordinator_epoch,
            o.first_offset, f"{(now - o.first_timestamp) / 1000:.1f}s") for o in rows])


@transactions.command()
@click.option("--topic", required=True, help="The partition's topic.")
@click.option("--partition", type=click.IntRange(0), required=True)
@click.option("--producer-id", type=click.IntRange(0), default=None,
              help="The producer whose open transaction to abort (transactions hanging).")
@click.option("--start-offset", type=click.IntRange(0), default=None,
              help="Or the open transaction's first offset (its producer found there).")
@click.option("--producer-epoch", type=click.IntRange(-1, 32767), default=-1,
              help="Its epoch (default: the open transaction's).")
@click.option("--coordinator-epoch", type=click.IntRange(-1), default=-1,
              help="The marker's coordinator epoch (default: its last marker's there, or 0).")
@bootstrap_option
def abort(topic, partition, producer_id, start_offset, producer_epoch, coordinator_epoch, conn):
    """Abort a hanging transaction: the partition's leader writes an abort
    marker for the producer's open transaction there (ALTER on the cluster).
    Its records become aborted there whatever its coordinator decides.
    Name it by --producer-id or by --start-offset (Kafka's tool's two ways)."""
    from .. import Admin

    if (producer_id is None) == (start_offset is None):
        raise InvalidRequestError("name the transaction by --producer-id or --start-offset "
                                  "(one of the two)")
    with Admin(**conn) as admin:
        if start_offset is not None:
            opened = admin.describe_producers([(topic, partition)])[(topic, partition)]
            found = [o for o in opened if o.first_offset == start_offset]
            if not found:
                raise InvalidRequestError(f"no open transaction starts at offset "
                                          f"{start_offset} of {topic}-{partition}")
            producer_id = found[0].producer_id
        admin.abort_transaction(topic, partition, producer_id, producer_epoch,
                                coordinator_epoch)
    click.echo(f"aborted producer {producer_id}'s open transaction on {topic}-{partition}")
