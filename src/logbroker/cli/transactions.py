"""``logbroker transactions list|describe``: the transaction coordinators'
view of transactional ids (a table for people, ``--json`` for scripts).
An unknown id is ``error: TRANSACTIONAL_ID_NOT_FOUND: ...``, exit 1."""

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
