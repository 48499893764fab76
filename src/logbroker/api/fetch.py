"""Reading: Fetch (a consumer's long poll, up to the high watermark) and
ReplicaFetch (a follower's, up to the log end; a cluster's request). Both
answer with slices of segment files, sent as they lie on disk."""

from __future__ import annotations

import asyncio
import time

from .. import limits
from ..errors import InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import (AbortedTxn, FetchedPart, FetchResolved, ReplicaFetchedPart,
                              TxnPartState)
from ..records import format as fmt
from .edge import check_partition_key
from .fetch_session import session_for
from .peer import check_replica


async def fetch(svc, req: m.Fetch, session) -> m.FetchResponse:
    """Wait up to ``max_wait_ms`` until ``min_bytes`` are readable (or a
    part fails); each part's answer carries its HW and log start. With a
    ``session_epoch`` >= 0, through the connection's fetch session
    (``session.fetch_session``, api/fetch_session.py)."""
    if req.isolation not in (0, 1):
        raise InvalidRequestError(f"isolation {req.isolation!r}: 0 (read uncommitted) or 1 "
                                  "(read committed)")
    fs = None if req.session_epoch < 0 else session_for(session, svc.notifier, req)
    if fs is None:
        return await _sessionless(svc, req)
    fs.busy = True
    try:
        return await _in_session(svc, req, fs)
    finally:
        fs.busy = False


async def _sessionless(svc, req: m.Fetch) -> m.FetchResponse:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    resolved = {}  # a part asked at EARLIEST / LATEST: answered at once, saying where it read
    while True:
        parts, payload, total, logs, failed = _read(svc.meta, req.parts, req.max_bytes,
                                                    req.isolation == 1, resolved)
        left = deadline - loop.time()
        if total >= req.min_bytes or left <= 0 or failed or not logs or resolved:
            parts, txn = _split(parts, req.isolation)
            _count(svc, parts, total)
            return m.FetchResponse(parts=tuple(parts), payload=tuple(payload), txn=txn,
                                   resolved=_resolved_rows(resolved))
        await svc.notifier.wait(logs, left)


def _resolved_rows(resolved: dict) -> tuple:
    return tuple(FetchResolved(t, p, offset) for (t, p), offset in resolved.items())


async def _in_session(svc, req: m.Fetch, fs) -> m.FetchResponse:
    """A fetch through ``fs``: the request's parts and the session's ready
    ones read (and, when due, those a sweep finds changed), in that order,
    until ``max_bytes`` are spent (``_read``'s ``stop``: the parts not
    reached stay ready, first in line for the next fetch); the answer only
    what changed unless the session was just opened, and then every part
    reached. O(parts reached), however many are ready."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000
    full = req.session_epoch == 0
    # read on every pass; an opening fetch's are the session's, in the request's order (no
    # (topic, partition) made again for each of 10,000 parts)
    touched = dict.fromkeys(fs.parts if full else ((p[0], p[1]) for p in req.parts))
    if not full:
        touched = fs.to_read(touched, svc.meta, req.isolation == 1)
        now = time.monotonic()
        if fs.sweep_due(now):
            touched.update(dict.fromkeys(fs.sweep(svc.meta, req.isolation == 1, now)))
    news, resolved, reached = True, {}, {}
    while True:
        if news:
            parts, payload, total, _, failed = _read(
                svc.meta, fs.reading(touched), req.max_bytes, req.isolation == 1, resolved,
                stop=True)
            reached = dict.fromkeys((p.topic, p.partition) for p in parts)
            if resolved:
                fs.pin(resolved)
        left = deadline - loop.time()
        # answered once min_bytes are there, or max_bytes (all the answer may hold)
        if total >= min(req.min_bytes, max(req.max_bytes, 1)) or left <= 0 or failed \
                or not fs.parts or resolved:
            parts, txn = _split(parts, req.isolation)
            lso_of = None if req.isolation == 0 else \
                {(t.topic, t.partition): t.last_stable_offset for t in txn}
            parts, payload = fs.answered(parts, payload, lso_of, full)
            fs.later(tp for tp in touched if tp not in reached)
            if txn:
                kept = {(p.topic, p.partition) for p in parts}
                txn = tuple(t for t in txn if (t.topic, t.partition) in kept)
            _count(svc, parts, total)
            fs.epoch = req.session_epoch + 1
            return m.FetchResponse(parts=tuple(parts), payload=tuple(payload), txn=txn,
                                   session_epoch=req.session_epoch,
                                   resolved=_resolved_rows(resolved))
        # every part reached (the budget is not spent), nothing to answer yet:
        # wait for news of any; what was read is read again on every later
        # pass (a full answer holds them all; a change read without bytes is
        # still answered)
        ready = fs.ready
        for tp in reached:
            ready.pop(tp, None)
        touched.update(reached)
        await fs.wait(left)
        news = bool(ready)  # else the long poll ran out: what was read stands


def _split(parts: list, isolation: int) -> tuple:
    """(the FetchedParts, the TxnPartStates among them: () unless READ_COMMITTED)."""
    if isolation == 0:
        return parts, ()
    return [p for p in parts if p.__class__ is not TxnPartState], \
        tuple(p for p in parts if p.__class__ is TxnPartState)


def _count(svc, parts, total: int) -> None:
    if total and svc.traffic is not None:
        fetched = svc.traffic.fetched
        for part in parts:
            if part.nbytes:
                fetched(part.topic, part.partition, part.nbytes)


def _read(meta, specs, max_bytes: int, committed: bool, resolved: dict, stop: bool = False):
    """Read each ``(topic, partition, offset, max_bytes)`` of ``specs`` up
    to its high watermark, or with ``committed`` (READ_COMMITTED) its last
    stable offset, within ``max_bytes`` in all (at least one batch):
    (FetchedParts, payloads, bytes, logs read, a part failed). With
    ``stop`` (a session's fetch) the walk ends once ``max_bytes`` are
    spent: the parts it did not reach are not answered (the session keeps
    them ready), so a fetch costs O(parts it returns), not O(parts ready).
    Without, every part is answered, past the budget empty (Kafka's). With
    ``committed`` each part's TxnPartState (the LSO, the aborted
    transactions with records in what is returned) follows its FetchedPart
    in the first list (``_split`` splits them). An offset EARLIEST or
    LATEST is read from where it resolves (``resolved_offset``), noted in
    ``resolved`` ((topic, partition) -> offset)."""
    parts, payload, logs, total, failed = [], [], [], 0, False
    budget = max(max_bytes, 1)
    for topic, partition, offset, part_bytes in specs:  # FetchPart
        if stop and budget <= 0:
            break
        lg = None
        try:
            check_partition_key(topic, partition)
            lg = meta.log_for(topic, partition)
            limits.check_int(part_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
            hw = lg.high_watermark
            limit = lg.last_stable_offset if committed else hw
            if offset.__class__ is int and offset < 0:
                offset = resolved_offset(lg, offset, limit)  # EARLIEST / LATEST: from there
                if offset >= 0:
                    resolved[(topic, partition)] = offset
            limits.check_offset(offset)
            logs.append(lg)
            data = None
            if budget > 0 or total == 0:
                data = lg.slice(offset, max(1, min(part_bytes, budget)), upto=limit)
            size = 0 if data is None else len(data)  # once: a FileSlice's length is a Python call
            if not size:
                data = b""
            parts.append(FetchedPart(topic, partition, 0, "", hw, lg.log_start_offset, size))
            if committed:
                parts.append(TxnPartState(topic, partition, limit, aborted_in(
                    lg, offset, returned_end(lg, data, offset, limit), size) if data else ()))
            payload.append(data)
            total += size
            budget -= size
        except LogbrokerError as exc:
            failed = True
            hw, start = (-1, -1) if lg is None else (lg.high_watermark, lg.log_start_offset)
            parts.append(FetchedPart(topic, partition, *_err(exc), hw, start, 0))
            payload.append(b"")
    return parts, payload, total, logs, failed


def resolved_offset(lg, offset: int, limit: int) -> int:
    """Where a fetch at ``offset`` reads: EARLIEST (-2) the log start,
    LATEST (-1) ``limit`` (the HW, or the LSO read committed): what
    ListOffsets would answer at this moment, so a consumer starting at
    either end needs no ListOffsets first (docs/protocol.md §5.3). Any
    other offset as it is."""
    if offset == limits.EARLIEST:
        return lg.log_start_offset
    return limit if offset == limits.LATEST else offset


def returned_end(lg, data, offset: int, limit: int) -> int:
    """An offset past every record of ``data`` (the FileSlice a read at
    ``offset`` returned), at most ``limit``: the end of its segment's
    records when the slice reaches the segment's end, else the first batch
    the sparse index knows at or past the slice's last byte (Kafka's
    ``fetchUpperBoundOffset``), found by a binary search over offsets (at
    most ~63 index lookups; a hint the index keeps in step, as every read's)."""
    seg = data.segment
    try:
        hi = min(limit, lg.segment_end(seg))
    except ValueError:  # the segment left the log meanwhile (retention, compaction's swap)
        return limit
    cut = data.position + data.size
    if cut >= seg.size:
        return hi
    lookup, base, lo, top = lg.index.lookup, seg.base_offset, offset, hi
    while lo < top:  # the smallest offset whose index entry lies in seg at or past the cut
        mid = (lo + top) // 2
        hit = lookup(mid)
        if hit is not None and hit[1] == base and hit[2] >= cut:
            top = mid
        else:
            lo = mid + 1
    return min(lo, hi)


def aborted_in(lg, offset: int, end: int, nbytes: int) -> tuple:
    """The aborted transactions a reader of ``nbytes`` returned from
    ``offset`` (below ``end``) needs: those that began before ``offset``
    and overlap it, and the first ones beginning at or after it, as many as
    the bytes can hold batches (a transaction with records in the returned
    bytes has its first batch there, at least a header's size each): what a
    fetch answers is bounded by its bytes, however many transactions the
    partition aborted."""
    room = nbytes // fmt.HEADER_SIZE + 1
    out = []
    for pid, first in lg.aborted_transactions(offset, end):
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
