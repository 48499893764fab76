"""Retention by time and size: whole sealed segments, oldest first, when
the cleanup policy includes ``delete``.

A segment is deleted when every condition allows: it is sealed (the active
segment never goes), it lies wholly below the last stable offset (the high
watermark, or the first offset of the oldest open transaction: a segment
holding records of an open transaction stays), and either its
largest timestamp is older than ``retention_ms`` or the log without it still
holds at least ``retention_bytes``. Deletion stops at the first segment that
must stay, so the log remains one contiguous range.
"""

from __future__ import annotations

from .log import Log
from .segment import Segment


def apply_retention(log: Log, now: int) -> list[Segment]:
    """Roll an aged active segment, then delete what retention allows
    (nothing unless the cleanup policy includes ``delete``)."""
    cfg = log.config
    log.roll_if_aged(now)
    if not cfg.deletes:  # cleanup_policy = compact: compaction.py alone removes records
        return []
    segments = log.segments
    if len(segments) < 2:  # only the active segment, which never goes: most partitions
        return []
    total = sum(s.size for s in segments)
    end, stable = None, log.last_stable_offset
    for seg, nxt in zip(segments, segments[1:]):
        if nxt.base_offset > stable:
            break
        expired = cfg.retention_ms >= 0 and seg.max_timestamp < now - cfg.retention_ms
        oversize = cfg.retention_bytes >= 0 and total - seg.size >= cfg.retention_bytes
        if not (expired or oversize):
            break
        total -= seg.size
        end = nxt.base_offset
    return [] if end is None else log.delete_before(end, now)
