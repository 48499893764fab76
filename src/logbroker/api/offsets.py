"""Offsets of a partition's log: ListOffsets (earliest, latest, by time)
and OffsetForLeaderEpoch (a follower truncating to its leader's log, or a
consumer checking its position after a leader change, KIP-320), answered
alike on a single node and in a cluster (metadata/interface.py)."""

from __future__ import annotations

from .. import limits
from ..errors import (FencedLeaderEpochError, InvalidRequestError, LogbrokerError,
                      UnknownLeaderEpochError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import EpochEnd, OffsetFound
from .edge import check_partition_key
from .peer import check_replica


async def list_offsets(svc, req: m.ListOffsets, session) -> m.ListOffsetsResponse:
    """Per part: the log start (EARLIEST), the high watermark (LATEST), or
    the first offset at or after a time (-1 when none below the HW), the
    search off the loop (``svc.offload``: it may decode a stored batch).
    Isolation 1 (READ_COMMITTED): the last stable offset instead of the HW,
    for LATEST and as the bound of a time's answer."""
    meta, out = svc.meta, []
    committed = req.isolation == 1
    if req.isolation not in (0, 1):
        raise InvalidRequestError(f"isolation {req.isolation!r}: 0 (read uncommitted) or 1 "
                                  "(read committed)")
    for topic, partition, spec in req.parts:
        try:
            check_partition_key(topic, partition)
            lg = meta.log_for(topic, partition)
            meta.check_settled(topic, partition)
            limits.check_offset_spec(spec)
            if spec == m.EARLIEST:
                out.append(OffsetFound(topic, partition, 0, "", lg.log_start_offset, -1))
            elif spec == m.LATEST:
                out.append(OffsetFound(topic, partition, 0, "", lg.last_stable_offset if committed
                                       else lg.high_watermark, -1))
            else:
                hit = lg.offset_for_timestamp(spec) if svc.offload is None else \
                    await svc.offload(lg.offset_for_timestamp, spec)
                if hit is None or hit.offset >= (lg.last_stable_offset if committed
                                                 else lg.high_watermark):
                    out.append(OffsetFound(topic, partition, 0, "", -1, -1))
                else:
                    out.append(OffsetFound(topic, partition, 0, "", hit.offset, hit.timestamp))
        except LogbrokerError as exc:
            out.append(OffsetFound(topic, partition, *_err(exc), -1, -1))
    return m.ListOffsetsResponse(parts=tuple(out))


def offset_for_leader_epoch(svc, req: m.OffsetForLeaderEpoch, session
                            ) -> m.OffsetForLeaderEpochResponse:
    """Each part's ``(largest epoch <= the one asked, its end offset)``,
    from the leader's log and epoch (``meta.epoch_of``: NOT_LEADER,
    UNKNOWN_TOPIC_OR_PARTITION, ...: that part's error). A current epoch of
    -1 is not checked (a consumer that knows none); another one older than
    the leader's is FENCED_LEADER_EPOCH, newer UNKNOWN_LEADER_EPOCH. A log
    with no epoch history yet (nothing written) answers an epoch >= 0 with
    the leader's epoch and its end. A follower's (``replica_id`` >= 0)
    in a cluster needs the connection's proof that it is that broker
    (api/peer.py)."""
    check_replica(svc.meta, session, req.replica_id, "OffsetForLeaderEpoch")
    out = []
    for topic, partition, current, epoch in req.parts:
        try:
            check_partition_key(topic, partition)
            log, leader_epoch = svc.meta.epoch_of(topic, partition)
            if current != -1 and current != leader_epoch:
                cls = FencedLeaderEpochError if current < leader_epoch else UnknownLeaderEpochError
                raise cls(f"{topic}-{partition}: epoch {current}, the leader's is {leader_epoch}")
            found_epoch, end = log.end_offset_for_epoch(epoch)
            if found_epoch == -1 and epoch >= 0 and not log.epochs:
                found_epoch, end = leader_epoch, log.log_end_offset
            out.append(EpochEnd(topic, partition, 0, "", found_epoch, end))
        except LogbrokerError as exc:
            out.append(EpochEnd(topic, partition, *_err(exc), -1, -1))
    return m.OffsetForLeaderEpochResponse(parts=tuple(out))
