"""DeleteRecords: each partition's log start moved up, as Kafka's
DeleteRecords does (docs/kafka.md): asked of the partition's leader
(NOT_LEADER_OR_FOLLOWER elsewhere); offset -1 is the high watermark; an
offset above the high watermark is OFFSET_OUT_OF_RANGE; one at or below
the log start changes nothing. The move is durable before the answer (the
log start is checkpointed in LMDB: storage/log.py ``delete_before``);
whole segments below it are removed after ``file_delete_delay_ms``.
Readers honour it at once: a Fetch below it is OFFSET_OUT_OF_RANGE and
ListOffsets' earliest is it; in a cluster the followers move theirs when
their next ReplicaFetch answer carries it (cluster/follower.py).

The cuts run off the loop, their checkpoints in one LMDB commit; the parts
of one request are bounded by ``max_partitions_per_request``
(POLICY_VIOLATION)."""

from __future__ import annotations

import logging

from .. import limits
from ..errors import LogbrokerError, OffsetOutOfRangeError, PolicyViolationError, StorageError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.partition_messages import HIGH_WATERMARK, RecordsCutResult
from ..storage.log import Log
from .edge import check_partition_key

log = logging.getLogger("logbroker.topics")


def _target(lg, offset: int) -> int:
    """Where the log start goes for ``offset`` (-1: the high watermark)."""
    hw = lg.high_watermark
    if offset == HIGH_WATERMARK:
        return hw
    if offset < 0 or offset > hw:
        raise OffsetOutOfRangeError(f"{lg.name}: cannot delete records before {offset}: not in "
                                    f"0..{hw} (the high watermark), nor -1")
    return offset


def _cut(logs: list) -> list:
    """Move each (log, offset) log's start, then checkpoint the moved ones
    in one LMDB commit (one fsync for the request, not one per partition);
    the error or the new log start of each (runs off the loop)."""
    out, moved = [], []
    for lg, offset in logs:
        try:
            start = lg.log_start_offset
            lg.delete_before(offset, checkpoint=False)
            if lg.log_start_offset != start:
                moved.append(lg)
            out.append(lg.log_start_offset)
        except LogbrokerError as exc:
            out.append(exc)
    try:
        Log.checkpoint_many(moved)
    except Exception as exc:  # noqa: BLE001 - not durable: every moved part says so
        log.warning("DeleteRecords: checkpointing %d logs failed: %r", len(moved), exc)
        failed = StorageError(f"the new log start could not be made durable: {exc}")
        ids = {id(lg) for lg in moved}
        out = [failed if id(lg) in ids else r for (lg, _), r in zip(logs, out)]
    return out


async def delete_records(svc, req: m.DeleteRecords, session) -> m.DeleteRecordsResponse:
    """Each part checked (name, partition, this broker leads it, offset),
    then the cuts in one call off the loop; answers in the request's order."""
    limit = svc.config.max_partitions_per_request
    if len(req.parts) > limit:
        exc = PolicyViolationError(f"DeleteRecords names {len(req.parts)} partitions; "
                                   f"max_partitions_per_request is {limit}")
        log.debug("DeleteRecords refused: %s", exc.message)
        return m.DeleteRecordsResponse(*_err(exc))
    answers: list = [None] * len(req.parts)
    todo, where = [], []
    for i, (topic, partition, offset) in enumerate(req.parts):
        try:
            check_partition_key(topic, partition)
            limits.check_not_internal({topic})
            limits.check_int(offset, "offset", -1, limits.MAX_OFFSET)
            lg = svc.meta.log_for(topic, partition)
            todo.append((lg, _target(lg, offset)))
            where.append(i)
        except LogbrokerError as exc:
            answers[i] = exc
    if todo:
        done = await svc.offload(_cut, todo) if svc.offload is not None else _cut(todo)
        for i, result in zip(where, done):
            answers[i] = result
    out = []
    for (topic, partition, _), result in zip(req.parts, answers):
        if isinstance(result, LogbrokerError):
            log.debug("DeleteRecords of %s-%s refused: %s", topic, partition, result)
            out.append(RecordsCutResult(topic, partition, *_err(result), -1))
        else:
            out.append(RecordsCutResult(topic, partition, 0, "", result))
    return m.DeleteRecordsResponse(parts=tuple(out))
