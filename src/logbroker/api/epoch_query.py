"""OffsetForLeaderEpoch, answered the same way on a single node and in a
cluster (the handlers differ only in how they find a partition's log and
its leader's epoch): a follower truncating to its leader's log, or a
consumer checking its position after a leader change (KIP-320, the Kafka
listener's clients)."""

from __future__ import annotations

from typing import Callable

from ..errors import FencedLeaderEpochError, LogbrokerError, UnknownLeaderEpochError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from .edge import check_partition_key


def answer_epoch_query(req: m.OffsetForLeaderEpoch, lookup: Callable
                       ) -> m.OffsetForLeaderEpochResponse:
    """Each part's ``(largest epoch <= the one asked, its end offset)``.
    ``lookup(topic, partition)`` gives ``(log, leader epoch)`` or raises
    (NOT_LEADER, UNKNOWN_TOPIC_OR_PARTITION, ...: that part's error). A
    current epoch of -1 is not checked (a consumer that knows none);
    another one older than the leader's is FENCED_LEADER_EPOCH, newer
    UNKNOWN_LEADER_EPOCH. A log with no epoch history yet (nothing
    written) answers an epoch >= 0 with the leader's epoch and its end."""
    out = []
    for topic, partition, current, epoch in req.parts:
        try:
            check_partition_key(topic, partition)
            log, leader_epoch = lookup(topic, partition)
            if current != -1 and current != leader_epoch:
                cls = FencedLeaderEpochError if current < leader_epoch else UnknownLeaderEpochError
                raise cls(f"{topic}-{partition}: epoch {current}, the leader's is {leader_epoch}")
            found = log.end_offset_for_epoch(epoch)
            if found[0] == -1 and epoch >= 0 and not log.epochs:
                found = (leader_epoch, log.log_end_offset)
            out.append((topic, partition, 0, "", *found))
        except LogbrokerError as exc:
            out.append((topic, partition, *_err(exc), -1, -1))
    return m.OffsetForLeaderEpochResponse(parts=tuple(out))
