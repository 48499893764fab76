"""Rebuild a coordinator's view of one offsets partition from its log.

The log is the truth; the view (groups with their committed offsets and
last stable membership) is derived from it by replaying every record from
the log start to the high watermark, newest record of a key winning — the
same answer before and after compaction. Reading is chunked and yields to
the event loop between chunks, so a large partition never stalls the broker.
"""

from __future__ import annotations

import asyncio

from ..records.walker import split_batches
from ..storage.groups import CommittedOffset
from ..storage.log import Log
from .consumer_group import apply_consumer_record
from .consumer_records import ConsumerGroupRecord
from .group import Group, GroupLimits
from .records import GroupRecord, OffsetRecord, read_batch

CHUNK_BYTES = 1 << 20


async def load_groups(lg: Log, limits: GroupLimits, now: float) -> dict[str, Group]:
    """The groups of ``lg`` (an offsets partition) as of its high watermark."""
    groups: dict[str, Group] = {}
    offset, end = lg.log_start_offset, lg.high_watermark
    while offset < end:
        data = lg.read(offset, CHUNK_BYTES, upto=end)
        if not data:
            break
        for batch, header in split_batches(data):
            for rec in read_batch(batch):
                _apply(groups, rec, limits, now)
            offset = header.base_offset + header.last_offset_delta + 1
        await asyncio.sleep(0)
    return {name: g for name, g in groups.items() if not g.empty or g.generation}


def _apply(groups: dict, rec, limits: GroupLimits, now: float) -> None:
    if isinstance(rec, ConsumerGroupRecord):
        apply_consumer_record(groups, rec, limits, now)
        return
    group = groups.get(rec.group)
    if group is None:
        group = groups[rec.group] = Group(rec.group, limits)
    if isinstance(rec, OffsetRecord):
        group.apply(rec.topic, rec.partition, None if rec.offset is None else
                    CommittedOffset(rec.offset, rec.metadata, rec.commit_ms))
    elif isinstance(rec, GroupRecord):
        if rec.generation is None:  # the group was deleted
            del groups[rec.group]
        else:
            group.restore(rec, now)

