"""Removing data from a log, as policies over ``Segments``: ``truncate_to``
(the tail: recovery, a follower's divergence), ``reset`` (everything: a
follower restarting at its leader's log start) and ``delete_before`` (the
head: retention). Both run under the Log's lock; the Log persists a
checkpoint before it returns, so a restart never resurrects removed data."""

from __future__ import annotations

from ..errors import OffsetOutOfRangeError
from .epochs import LeaderEpochs
from .index import PartitionIndex
from .locate import Locator
from .segment import Segment
from .segments import Segments


def truncate_to(segments: Segments, index: PartitionIndex, epochs: LeaderEpochs,
                locator: Locator, offset: int, deadline: int) -> None:
    """Drop offsets >= ``offset`` (whole batches: the log end becomes the
    base of the batch holding ``offset``, or ``offset`` itself in a gap). A cut at a segment's first batch
    removes that segment and the one before it is active again (no empty
    segment is left where the leader a follower copies has none). At or
    below the log start the log is emptied and restarts at ``offset`` (its
    files removed after ``deadline``)."""
    if offset >= segments.log_end:
        return
    if offset <= segments.log_start:
        _restart(segments, index, offset, deadline)
    else:
        seg, pos, header = locator.find(offset)
        new_end = offset if header is None else min(offset, header.base_offset)  # a gap: offset
        if new_end <= segments.log_start:  # the cut batch straddles the log start
            _restart(segments, index, segments.log_start, deadline)
        elif pos == 0 and seg is not segments.first:  # at a segment's start: the one before goes on
            before = segments.segment_for(seg.base_offset - 1)
            segments.truncate_tail(before, before.size, new_end)
        else:
            segments.truncate_tail(seg, pos, new_end)
    index.truncate(segments.log_end)
    index.restart_cadence()
    epochs.truncate_from(segments.log_end)


def reset(segments: Segments, index: PartitionIndex, epochs: LeaderEpochs, offset: int,
          deadline: int) -> None:
    """Empty the log and restart it at ``offset``, any offset (above the log
    end too: a follower behind its leader's log start); the epoch history
    goes with the data (Kafka's truncateFullyAndStartAt)."""
    _restart(segments, index, offset, deadline)
    epochs.clear()


def _restart(segments: Segments, index: PartitionIndex, offset: int, deadline: int) -> None:
    segments.reset(offset, deadline)
    index.clear()


def delete_before(segments: Segments, index: PartitionIndex, offset: int,
                  deadline: int) -> list[Segment]:
    """Retention: the log start becomes ``offset``; sealed segments wholly
    below it are deleted (renamed now, removed after ``deadline``). Raises
    OffsetOutOfRangeError past the log end. Returns the segments."""
    if offset > segments.log_end:
        raise OffsetOutOfRangeError(f"cannot delete before {offset}, past the log end "
                                    f"{segments.log_end}")
    if offset <= segments.log_start:
        return []
    doomed = segments.delete_head(offset, deadline)
    index.delete_before(segments.first.base_offset)
    return doomed
