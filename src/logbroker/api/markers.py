"""Transaction markers on the partitions this broker leads: the one path
both the WriteTxnMarkers handler (a peer broker's transaction coordinator)
and this broker's own transaction coordinator take.

``write_markers(svc, markers)`` writes each ``TxnMarker`` through the
metadata interface's ``append_marker`` (the leader's ``Log.append_marker``
in its current leader epoch), waits for its acks as a produce's acks=all
(the fsync on a single node, the in-sync replicas in a cluster), and
answers a ``MarkerResult`` per marker, in order: error 0 once acknowledged;
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS,
the fencing errors storage raises (INVALID_PRODUCER_EPOCH,
TRANSACTION_COORDINATOR_FENCED: nothing written), REQUEST_TIMED_OUT after
``ACK_TIMEOUT_S``. A marker acknowledged on a partition of the offsets
topic is handed to the group coordinator (``svc.groups.on_marker``): the
transaction's offsets commit or are dropped.

``write_txn_markers(svc, req, session)`` is the handler: brokers only. In a
cluster the connection must have proved, with the cluster's secret, that it
is a broker (api/peer.py), whatever ACLs a user holds; a single node has no
peer to send it (INVALID_REQUEST: its coordinator calls ``write_markers``).
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import limits
from ..errors import (ClusterAuthorizationFailedError, InvalidRequestError, LogbrokerError,
                      RequestTimedOutError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import MarkerResult
from .edge import check_partition_key

log = logging.getLogger("logbroker.transactions")
ACK_TIMEOUT_S = 30.0  # not acknowledged by then: REQUEST_TIMED_OUT (the coordinator retries)
WARN_EVERY_S = 1.0  # refusals logged at most once a second (the rest at debug)
_last_warning = [0.0]
MAX_MARKERS = 10_000  # per request: one transaction's partitions, many transactions at most


async def write_markers(svc, markers) -> tuple:
    """A ``MarkerResult`` per marker of ``markers`` (module docstring);
    never raises for one marker's failure."""
    meta, loop = svc.meta, asyncio.get_running_loop()
    results: list = [None] * len(markers)
    waiting: list = []
    for i, mk in enumerate(markers):
        try:
            check_partition_key(mk.topic, mk.partition)
            limits.check_int(mk.producer_id, "producer_id", 0, limits.MAX_OFFSET)
            limits.check_int(mk.producer_epoch, "producer_epoch", 0, 32767)
            limits.check_int(mk.coordinator_epoch, "coordinator_epoch", 0, limits.MAX_INT32)
            appended = meta.append_marker(mk.topic, mk.partition, mk)
            if svc.verifier is not None:  # its next transaction there is verified again
                svc.verifier.forget(mk.producer_id, mk.topic, mk.partition)
        except LogbrokerError as exc:
            results[i] = MarkerResult(mk.producer_id, mk.topic, mk.partition, *_err(exc))
            continue
        fut = loop.create_future()
        if meta.when_acked(appended, -1, _setter(fut), inline=False):  # off the loop thread
            waiting.append((i, fut))
        else:
            _acked(svc, mk)
            results[i] = MarkerResult(mk.producer_id, mk.topic, mk.partition, 0, "")
    if waiting:
        await asyncio.wait([f for _, f in waiting], timeout=ACK_TIMEOUT_S)
    for i, fut in waiting:
        mk = markers[i]
        if not fut.done():
            exc = RequestTimedOutError(f"{mk.topic}-{mk.partition}: the marker was not "
                                       f"acknowledged by the {meta.ack_wait} within "
                                       f"{ACK_TIMEOUT_S:g} s")
        else:
            exc = fut.result()
        if exc is None:
            _acked(svc, mk)
            results[i] = MarkerResult(mk.producer_id, mk.topic, mk.partition, 0, "")
        else:
            results[i] = MarkerResult(mk.producer_id, mk.topic, mk.partition, *_err(exc))
    return tuple(results)


def _setter(fut: asyncio.Future):
    """A ``when_acked`` callback completing ``fut`` with the error (or None)."""
    def done(exc) -> None:
        if not fut.done():
            fut.set_result(exc)
    return done


def _acked(svc, mk) -> None:
    """A marker on the offsets topic settles its transaction's pending offsets."""
    if mk.topic == limits.OFFSETS_TOPIC and svc.groups is not None:
        try:
            svc.groups.on_marker(mk.partition, mk.producer_id, mk.commit)
        except Exception:  # noqa: BLE001 - the marker is written; a reload replays it
            log.exception("the group coordinator failed to take the marker of producer %d on "
                          "%s-%d", mk.producer_id, mk.topic, mk.partition)


async def write_txn_markers(svc, req: m.WriteTxnMarkers, session) -> m.WriteTxnMarkersResponse:
    """The handler: a peer broker's markers (module docstring)."""
    check_broker(svc.meta, session)
    if len(req.markers) > MAX_MARKERS:
        raise InvalidRequestError(f"{len(req.markers)} markers in one request (limit "
                                  f"{MAX_MARKERS})")
    return m.WriteTxnMarkersResponse(parts=await write_markers(svc, req.markers))


def check_broker(meta, session) -> None:
    """INVALID_REQUEST on a single node; CLUSTER_AUTHORIZATION_FAILED unless
    the connection proved it is a broker of this cluster (api/peer.py)."""
    meta.check_replication()  # INVALID_REQUEST on a single node: no peer sends markers
    meta.peer_key()  # CLUSTER_UNAVAILABLE until this broker has the cluster's secret
    proven = session.broker
    if proven.__class__ is int and proven >= 0:
        return
    now = time.monotonic()
    level = logging.DEBUG
    if now - _last_warning[0] >= WARN_EVERY_S:
        _last_warning[0], level = now, logging.WARNING
    log.log(level, "refused WriteTxnMarkers from %s (%s): the connection has not proved it is a "
                "broker", session.peer, session.principal or "anonymous")
    raise ClusterAuthorizationFailedError(
        "WriteTxnMarkers refused: only the cluster's brokers write transaction markers (they "
        "prove their identity with the cluster's secret; docs/cluster.md)")
