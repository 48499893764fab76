"""WriteTxnMarkers, the leader side of transaction markers.

PROVISIONAL (helper C, issue 31): a minimal stand-in for the leader side's
own module (helper L's branch replaces this file whole). The coordinator
calls ``write_markers(svc, markers)`` for the partitions this broker leads
and peers send ``WriteTxnMarkers`` for the others; both land here.

``write_markers`` writes each marker with the metadata interface's
``append_marker`` when it has one (the leader side's), else with the
partition log's ``append_marker`` (storage) and its local fsync; with
neither (storage without transaction support) the marker is answered as
written without writing anything.
"""

from __future__ import annotations

import asyncio

from .. import limits
from ..errors import ClusterAuthorizationFailedError, InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import MarkerResult

MAX_MARKERS = 10_000  # markers of one request


async def write_markers(svc, markers) -> tuple:
    """Write each marker as its partition's leader, waited until
    acknowledged; a MarkerResult per marker, in order."""
    meta = svc.meta
    out = []
    for mk in markers:
        try:
            limits.check_topic_name(mk.topic)
            limits.check_partition(mk.partition)
            await _write_one(svc, meta, mk)
            out.append(MarkerResult(mk.producer_id, mk.topic, mk.partition, 0, ""))
        except LogbrokerError as exc:
            out.append(MarkerResult(mk.producer_id, mk.topic, mk.partition, *_err(exc)))
    return tuple(out)


async def _write_one(svc, meta, mk) -> None:
    if hasattr(meta, "append_marker"):
        appended = meta.append_marker(mk.topic, mk.partition, mk)
        fut = asyncio.get_running_loop().create_future()
        if meta.when_acked(appended, -1, lambda exc: fut.done() or fut.set_result(exc)):
            exc = await fut
            if exc is not None:
                raise exc
        return
    lg, epoch = meta.epoch_of(mk.topic, mk.partition)
    if not hasattr(lg, "append_marker"):
        return
    info = lg.append_marker(mk.producer_id, mk.producer_epoch, mk.commit, mk.coordinator_epoch,
                            epoch, sync=False)
    fut = svc.commit.request(lg, info.last_offset + 1)
    if fut is not None:
        await fut


async def write_txn_markers(svc, req: m.WriteTxnMarkers, session) -> m.WriteTxnMarkersResponse:
    """Brokers only: the connection must have proved it is a broker of this cluster."""
    if svc.meta.peer_key() is None:
        raise InvalidRequestError("WriteTxnMarkers is a request between a cluster's brokers")
    if session.broker.__class__ is not int or session.broker < 0:
        raise ClusterAuthorizationFailedError("WriteTxnMarkers: this connection has not proved "
                                              "it is a broker of this cluster")
    if len(req.markers) > MAX_MARKERS:
        raise InvalidRequestError(f"{len(req.markers)} markers (limit {MAX_MARKERS})")
    return m.WriteTxnMarkersResponse(parts=await write_markers(svc, req.markers))
