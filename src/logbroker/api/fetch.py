"""Reading: Fetch (a consumer's long poll, up to the high watermark) and
ReplicaFetch (a follower's, up to the log end; a cluster's request). Both
answer with slices of segment files, sent as they lie on disk."""

from __future__ import annotations

import asyncio

from .. import limits
from ..errors import InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import AbortedTxn, FetchedPart, ReplicaFetchedPart, TxnPartState
from ..records import format as fmt
from .edge import check_partition_key
from .peer import check_replica


async def fetch(svc, req: m.Fetch, session) -> m.FetchResponse:
    """Wait up to ``max_wait_ms`` until ``min_bytes`` are readable (or a
    part fails); each part's answer carries its HW and log start."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    read, txn = (_read, ()) if req.isolation == 0 else (_read_committed, None)
    while True:
        parts, payload, total, logs, failed = read(svc.meta, req)
        left = deadline - loop.time()
        if total >= req.min_bytes or left <= 0 or failed or not logs:
            if total and svc.traffic is not None:
                fetched = svc.traffic.fetched
                for part in parts:
                    if part.nbytes:
                        fetched(part.topic, part.partition, part.nbytes)
            if txn is None:  # READ_COMMITTED: the parts' TxnPartStates follow them
                txn, parts = tuple(p for p in parts if p.__class__ is TxnPartState), \
                    tuple(p for p in parts if p.__class__ is not TxnPartState)
            return m.FetchResponse(parts=tuple(parts), payload=tuple(payload), txn=txn)
        await svc.notifier.wait(logs, left)


def _read(meta, req: m.Fetch):
    parts, payload, logs, total, failed = [], [], [], 0, False
    budget = max(req.max_bytes, 1)
    for topic, partition, offset, max_bytes in req.parts:  # FetchPart
        lg = None
        try:
            check_partition_key(topic, partition)
            lg = meta.log_for(topic, partition)
            limits.check_offset(offset)
            limits.check_int(max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
            logs.append(lg)
            data = None
            if budget > 0 or total == 0:
                data = lg.slice(offset, max(1, min(max_bytes, budget)), upto=lg.high_watermark)
            data = data or b""
            parts.append(FetchedPart(topic, partition, 0, "", lg.high_watermark,
                                     lg.log_start_offset, len(data)))
            payload.append(data)
            total += len(data)
            budget -= len(data)
        except LogbrokerError as exc:
            failed = True
            hw, start = (-1, -1) if lg is None else (lg.high_watermark, lg.log_start_offset)
            parts.append(FetchedPart(topic, partition, *_err(exc), hw, start, 0))
            payload.append(b"")
    return parts, payload, total, logs, failed


def _read_committed(meta, req: m.Fetch):
    """``_read`` for isolation 1 (READ_COMMITTED): each part read up to its
    last stable offset, its TxnPartState (the LSO, the aborted transactions
    with records in what is returned) put after its FetchedPart in
    ``parts`` (``fetch`` splits them). Isolation 0 never comes here."""
    if req.isolation != 1:
        raise InvalidRequestError(f"isolation {req.isolation!r}: 0 (read uncommitted) or 1 "
                                  "(read committed)")
    parts, payload, logs, total, failed = [], [], [], 0, False
    budget = max(req.max_bytes, 1)
    for topic, partition, offset, max_bytes in req.parts:  # FetchPart
        lg = None
        try:
            check_partition_key(topic, partition)
            lg = meta.log_for(topic, partition)
            limits.check_offset(offset)
            limits.check_int(max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
            logs.append(lg)
            lso = lg.last_stable_offset
            data = None
            if budget > 0 or total == 0:
                data = lg.slice(offset, max(1, min(max_bytes, budget)), upto=lso)
            data = data or b""
            parts.append(FetchedPart(topic, partition, 0, "", lg.high_watermark,
                                     lg.log_start_offset, len(data)))
            parts.append(TxnPartState(topic, partition, lso,
                                      aborted_in(lg, offset, lso, len(data)) if data else ()))
            payload.append(data)
            total += len(data)
            budget -= len(data)
        except LogbrokerError as exc:
            failed = True
            hw, start = (-1, -1) if lg is None else (lg.high_watermark, lg.log_start_offset)
            parts.append(FetchedPart(topic, partition, *_err(exc), hw, start, 0))
            payload.append(b"")
    return parts, payload, total, logs, failed


def aborted_in(lg, offset: int, lso: int, nbytes: int) -> tuple:
    """The aborted transactions a reader of ``nbytes`` returned from
    ``offset`` (below ``lso``) needs: those that began before ``offset``
    and overlap it, and the first ones beginning at or after it, as many as
    the bytes can hold batches (a transaction with records in the returned
    bytes has its first batch there, at least a header's size each): what a
    fetch answers is bounded by its bytes, however many transactions the
    partition aborted."""
    room = nbytes // fmt.HEADER_SIZE + 1
    out = []
    for pid, first in lg.aborted_transactions(offset, lso):
        if first >= offset:
            if room <= 0:
                break
            room -= 1
        out.append(AbortedTxn(pid, first))
    return tuple(out)


async def replica_fetch(svc, req: m.ReplicaFetch, session) -> m.ReplicaFetchResponse:
    """A follower's fetch (records its progress: ISR and HW move); waits at
    most 30 s. INVALID_REQUEST on a single node; CLUSTER_AUTHORIZATION_FAILED
    unless the connection proved it is broker ``replica_id`` (api/peer.py)."""
    meta = svc.meta
    meta.check_replication()
    check_replica(meta, session, req.replica_id, "ReplicaFetch")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, min(req.max_wait_ms, 30_000)) / 1000
    while True:
        parts, payload, total, logs = _replica_read(meta, req)
        left = deadline - loop.time()
        if total >= req.min_bytes or left <= 0 or not logs:
            return m.ReplicaFetchResponse(parts=tuple(parts), payload=tuple(payload))
        await meta.wait_appended(logs, left)


def _replica_read(meta, req: m.ReplicaFetch):
    parts, payload, logs, total = [], [], [], 0
    budget = max(req.max_bytes, 1)
    for topic, partition, offset, epoch, max_bytes in req.parts:  # ReplicaFetchPart
        lg = None
        try:
            check_partition_key(topic, partition)
            limits.check_int(max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
            lg = meta.replica_log(topic, partition, req.replica_id, offset, epoch)
            logs.append(lg)
            data = None
            if budget > 0 or total == 0:
                data = lg.slice(offset, max(1, min(max_bytes, budget)))
            n = data.size if data else 0
            parts.append(ReplicaFetchedPart(topic, partition, 0, "", lg.high_watermark,
                                            lg.log_start_offset, lg.log_end_offset,
                                            data.segment.base_offset if data else -1, n))
            payload.append(data or b"")
            total += n
            budget -= n
        except LogbrokerError as exc:
            hw = start = end = -1  # this replica's offsets, where it has one
            try:
                lg = lg or meta.store.get_log(topic, partition)
                hw, start, end = lg.high_watermark, lg.log_start_offset, lg.log_end_offset
            except LogbrokerError:
                pass
            parts.append(ReplicaFetchedPart(topic, partition, *_err(exc), hw, start, end, -1, 0))
            payload.append(b"")
    return parts, payload, total, logs
