"""The admin client's view of transactions: ``describe_transactions`` (at
each transactional id's coordinator, DescribeTransactions) and
``list_transactions`` (ListTransactions of every live broker, merged: each
answers for the ids it coordinates). Results are plain tuples (below)."""

from __future__ import annotations

import asyncio
from typing import Iterable, NamedTuple

from ...errors import LogbrokerError, for_code
from ...protocol import messages as m
from .. import validate
from ..group.coordinator import Coordinators, refinds
from ..net.routing import Router

TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
              "CompleteAbort", "PrepareEpochFence", "Dead")  # Kafka's names
MAX_ID_CHARS = 249
REFIND_ATTEMPTS = 5  # a row answered NOT_COORDINATOR (the id moved): found again this often


class TransactionDescription(NamedTuple):
    """A transactional id as its coordinator holds it: ``state`` one of
    ``TXN_STATES``; ``start_ms`` -1 without an open transaction;
    ``partitions`` ``((topic, partition), ...)`` in the open transaction;
    ``coordinator`` the broker id that answered."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int
    partitions: tuple
    coordinator: int


class TransactionListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


def transactional_ids(ids) -> list[str]:
    """Distinct ids in order; ``TypeError`` / ``ValueError`` for a bad one."""
    items = [ids] if isinstance(ids, str) else list(validate.iterable(ids, "transactional_ids"))
    for item in items:
        if not isinstance(item, str):
            raise TypeError(f"a transactional id must be a str, not {type(item).__name__}")
        if not 1 <= len(item) <= MAX_ID_CHARS or not item.isprintable():
            raise ValueError(f"transactional id {item[:60]!r}: use 1-{MAX_ID_CHARS} printable "
                             "characters")
    return list(dict.fromkeys(items))


def states_of(states) -> tuple:
    items = [states] if isinstance(states, str) else list(validate.iterable(states, "states"))
    bad = [s for s in items if s not in TXN_STATES]
    if bad:
        raise ValueError(f"unknown transaction state {bad[0]!r}: one of {', '.join(TXN_STATES)}")
    return tuple(dict.fromkeys(items))


async def describe(coordinators: Coordinators, ids, raise_errors: bool = True) -> dict:
    """``{id: TransactionDescription}`` (or, without ``raise_errors``, the
    id's error as its value); raises the first id's error
    (``TransactionalIdNotFoundError`` for an id no coordinator knows)."""
    names = transactional_ids(ids)
    out: dict = {}

    async def one(tid: str) -> None:
        try:
            for attempt in range(REFIND_ATTEMPTS):
                coord = await coordinators.find(tid)
                resp = await coordinators.call(tid,
                                               m.DescribeTransactions(transactional_ids=(tid,)))
                row = next((r for r in resp.transactions if r.transactional_id == tid), None)
                if row is None:
                    raise LogbrokerError(f"transactional id {tid!r}: not in the answer")
                if not (row.error and refinds(for_code(row.error)())):
                    break
                coordinators.forget(tid)  # it moved: ask the new coordinator
                await asyncio.sleep(0.05 * (attempt + 1))
            if row.error:
                raise for_code(row.error)(f"transactional id {tid!r}: {row.message}"
                                          if row.message else f"transactional id {tid!r}")
            out[tid] = TransactionDescription(
                tid, row.state, row.producer_id, row.producer_epoch, row.timeout_ms,
                row.start_ms, tuple((p.topic, p.partition) if hasattr(p, "topic") else tuple(p)
                                    for p in row.parts), coord[0])
        except LogbrokerError as exc:
            out[tid] = exc

    await asyncio.gather(*(one(t) for t in names))
    if raise_errors:
        for tid in names:
            if isinstance(out[tid], LogbrokerError):
                raise out[tid]
    return {t: out[t] for t in names}


async def list_all(router: Router, states=()) -> list[TransactionListing]:
    """Every transactional id of every live broker (sorted by id), only
    those in ``states`` if given; raises the first broker's error."""
    wanted = states_of(states)
    brokers = (await router.metadata(())).brokers
    answers = await asyncio.gather(*(router.call(bid, m.ListTransactions(states=wanted))
                                     for bid, _, _ in brokers), return_exceptions=True)
    found: dict = {}
    for (bid, _, _), answer in zip(brokers, answers):
        if isinstance(answer, BaseException):
            raise answer
        for row in answer.transactions:
            found[row.transactional_id] = TransactionListing(row.transactional_id,
                                                             row.producer_id, row.state, bid)
    return [found[t] for t in sorted(found)]


class OpenTransaction(NamedTuple):
    """A producer's open transaction on a partition (DescribeProducers at
    its leader): ``first_timestamp`` the create time of its first batch (ms,
    -1 unknown); ``coordinator_epoch`` of the producer's last marker there."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    first_timestamp: int


async def describe_producers(router: Router, partitions) -> dict:
    """``{(topic, partition): [OpenTransaction]}`` from each leader; raises
    the first partition's error."""
    from ...protocol.parts import TopicPartition
    tps = [TopicPartition(*validate.topic_partition(tp)) for tp in
           validate.iterable(partitions, "partitions")]
    rows: dict = {}
    for i in range(0, len(tps), 1000):  # a broker's limit per request
        rows.update(await router.by_leader(tps[i:i + 1000],
                                           lambda parts: m.DescribeProducers(parts=parts)))
    out = {}
    for tp in tps:
        row = rows[tuple(tp)]
        if isinstance(row, LogbrokerError):
            raise row
        if row.error:
            raise for_code(row.error)(f"{tp[0]}-{tp[1]}: {row.message}")
        out[tuple(tp)] = [OpenTransaction(tp[0], tp[1], *o) for o in row.open]
    return out


async def abort(router: Router, topic: str, partition: int, producer_id: int,
                producer_epoch: int = -1, coordinator_epoch: int = -1) -> None:
    """An abort marker for ``producer_id``'s open transaction on the
    partition, written by its leader (AbortTxnPartition, sent once)."""
    from ...protocol.txn_admin_messages import AbortSpec
    topic, partition = validate.topic_partition((topic, partition))
    spec = AbortSpec(topic, partition, validate.count(producer_id, "producer_id", 0,
                                                      (1 << 63) - 1),
                     validate.count(producer_epoch, "producer_epoch", -1, 32767),
                     validate.count(coordinator_epoch, "coordinator_epoch", -1, (1 << 31) - 1))
    rows = await router.by_leader([spec], lambda parts: m.AbortTxnPartition(parts=parts),
                                  retry=False)
    row = rows[(topic, partition)]
    if isinstance(row, LogbrokerError):
        raise row
    if row.error:
        raise for_code(row.error)(f"{topic}-{partition}: {row.message}")
