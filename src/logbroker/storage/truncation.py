"""Removing data from a log: ``truncate_to`` (the tail) and ``delete_before``
(the head, for retention). Both run under the Log's lock and persist a
checkpoint before returning, so a restart never resurrects removed data."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import OffsetOutOfRangeError
from .segment import Segment

if TYPE_CHECKING:
    from .log import Log


def truncate_to(lg: "Log", offset: int) -> None:
    if offset >= lg._leo:
        return
    seg = lg.segment_for(offset)
    pos, header = (0, None) if offset <= lg._log_start else lg._locator.locate(seg, offset)
    if header is None:
        _empty_at(lg, offset)
    elif header.base_offset <= lg._log_start:  # the cut batch straddles the log start
        _empty_at(lg, lg._log_start)
    else:
        for doomed in lg.segments[lg.segments.index(seg) + 1:]:
            doomed.remove()
        lg.segments = lg.segments[:lg.segments.index(seg) + 1]
        seg.truncate(pos)
        lg._leo = header.base_offset
        _rescan_active(lg)
    new_end = lg._leo
    lg.index.truncate(new_end)
    lg.epochs = [(e, s) for e, s in lg.epochs if s < new_end]
    lg._store_epochs()
    lg._hw = min(lg._hw, new_end)
    if lg._rp[0] > new_end:
        lg._rp = (new_end, lg.active.base_offset, lg.active.size)
    lg._flushed = min(lg._flushed, new_end)
    lg._checkpoint_locked()


def _empty_at(lg: "Log", offset: int) -> None:
    """Remove every segment; the log restarts empty at ``offset``."""
    for seg in lg.segments:
        seg.remove()
    lg.segments = [Segment.create(lg.directory, offset, lg.files)]
    lg._log_start = lg._leo = offset
    lg._rp = (offset, offset, 0)
    lg.index.clear()
    lg._max_ts_so_far = -1


def _rescan_active(lg: "Log") -> None:
    """Recompute the active segment's max timestamp after its tail was cut."""
    seg, max_ts = lg.active, -1
    for _, header in seg.scan(0, seg.size, verify=False):
        max_ts = max(max_ts, header.max_timestamp)
    seg.max_timestamp = max_ts
    if seg.size == 0:
        seg.created_ms = -1
    lg._since_index = lg.config.index_interval_bytes


def delete_before(lg: "Log", offset: int, now: int) -> list[Segment]:
    if offset > lg._leo:
        raise OffsetOutOfRangeError(f"{lg.name}: cannot delete before {offset}, past the log "
                                    f"end {lg._leo}")
    if offset <= lg._log_start:
        return []
    lg._log_start = offset
    doomed = []
    while len(lg.segments) > 1 and lg.segments[1].base_offset <= offset:
        doomed.append(lg.segments.pop(0))
    deadline = now + lg.config.file_delete_delay_ms
    for seg in doomed:
        seg.mark_deleted()
        lg._trash.append((deadline, seg))
    first = lg.segments[0].base_offset
    lg.index.delete_before(first)
    if lg._rp[0] < first:  # everything before the first kept segment is gone anyway
        lg._rp = (first, first, 0)
    lg._hw = max(lg._hw, offset)
    lg._checkpoint_locked()
    return doomed
