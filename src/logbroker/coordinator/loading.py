"""Rebuild a coordinator's view of one offsets partition from its log.

The log is the truth; the view (groups with their committed offsets and
last stable membership, and the transactional offsets still awaiting their
marker) is derived from it by replaying every record from the log start to
the high watermark, newest record of a key winning — the same answer before
and after compaction. The high watermark is read again as the replay goes,
so what was acknowledged while it ran is in the view when it ends.

Transactions (pending_offsets.py): a transactional batch's offsets wait
under its producer; that producer's COMMIT marker applies them (but those a
later plain commit replaced), its ABORT marker drops them.

Reading is chunked and yields to the event loop between chunks, so a large
partition never stalls the broker.
"""

from __future__ import annotations

import asyncio
import logging
import struct

from ..records import format as fmt
from ..records.decoder import decode_batch
from ..records.walker import split_batches
from ..storage.groups import CommittedOffset
from ..storage.log import Log
from .consumer_group import apply_consumer_record
from .consumer_records import ConsumerGroupRecord
from .group import Group, GroupLimits
from .pending_offsets import PendingOffsets
from .records import GroupRecord, OffsetRecord, read_batch

log = logging.getLogger("logbroker.coordinator")
CHUNK_BYTES = 1 << 20
_CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type (0 abort, 1 commit)


async def load_groups(lg: Log, limits: GroupLimits, now: float,
                      pending: "PendingOffsets | None" = None) -> dict[str, Group]:
    """The groups of ``lg`` (an offsets partition) as of its high watermark;
    ``pending`` (when given) gets the transactional offsets awaiting markers."""
    groups: dict[str, Group] = {}
    pending = PendingOffsets() if pending is None else pending
    offset = lg.log_start_offset
    while offset < lg.high_watermark:
        data = lg.read(offset, CHUNK_BYTES, upto=lg.high_watermark)
        if not data:
            break
        for batch, header in split_batches(data):
            replay_batch(groups, pending, batch, header, limits, now)
            offset = header.next_offset
        await asyncio.sleep(0)
    return {name: g for name, g in groups.items()
            if not g.empty or g.generation or pending.has_group(name)}


def replay_batch(groups: dict, pending: PendingOffsets, batch, header, limits: GroupLimits,
                 now: float) -> None:
    """Apply one stored batch of an offsets partition to ``groups`` / ``pending``."""
    transactional, control = txn_flags(header.magic, header.attributes)
    if control:
        commit = marker_commit(batch)
        if commit is not None:
            for group, (t, p), value in pending.complete(header.producer_id, commit):
                apply_offset(groups, OffsetRecord(group, t, p, value.offset, value.metadata,
                                                  value.commit_ms), limits)
        return
    records = read_batch(batch)
    if transactional:
        pending.saw_batch(header.producer_id, header.producer_epoch, header.base_sequence,
                          header.record_count)
        by_group: dict = {}
        for rec in records:
            if isinstance(rec, OffsetRecord) and rec.offset is not None:
                by_group.setdefault(rec.group, {})[(rec.topic, rec.partition)] = \
                    CommittedOffset(rec.offset, rec.metadata, rec.commit_ms)
        for group, offsets in by_group.items():
            pending.add(header.producer_id, group, offsets)
        return
    for rec in records:
        if isinstance(rec, OffsetRecord):
            pending.plain_commit(rec.group, (rec.topic, rec.partition))
        _apply(groups, rec, limits, now)


def apply_offset(groups: dict, rec: OffsetRecord, limits: GroupLimits) -> None:
    """A committed (or deleted) offset into its group (made if missing)."""
    group = groups.get(rec.group)
    if group is None:
        if rec.offset is None:
            return
        group = groups[rec.group] = Group(rec.group, limits)
    group.apply(rec.topic, rec.partition, None if rec.offset is None else
                CommittedOffset(rec.offset, rec.metadata, rec.commit_ms))


def _apply(groups: dict, rec, limits: GroupLimits, now: float) -> None:
    if isinstance(rec, ConsumerGroupRecord):
        apply_consumer_record(groups, rec, limits, now)
        return
    if isinstance(rec, OffsetRecord):
        apply_offset(groups, rec, limits)
        return
    group = groups.get(rec.group)
    if group is None:
        group = groups[rec.group] = Group(rec.group, limits)
    if isinstance(rec, GroupRecord):
        if rec.generation is None:  # the group was deleted
            del groups[rec.group]
        else:
            group.restore(rec, now)


def txn_flags(magic: int, attributes: int) -> tuple:
    """(transactional, control) of a batch header, either magic."""
    flags = getattr(fmt, "txn_flags", None)  # records/format.py's, once storage has it
    if flags is not None:
        return flags(magic, attributes)
    if magic == fmt.MAGIC:
        return bool(attributes & 0x0800), bool(attributes & 0x1000)
    return bool(attributes & 0x0010), bool(attributes & 0x0020)


def marker_commit(batch) -> "bool | None":
    """True for a COMMIT marker, False for ABORT, None (logged) when the
    control batch cannot be read (damage: nothing is applied)."""
    try:
        rec = next(iter(decode_batch(bytes(batch)).records()))
        _, kind = _CONTROL_KEY.unpack_from(bytes(rec.key or b""), 0)
    except Exception as exc:  # noqa: BLE001 - a bad stored batch never stops a load
        log.warning("offsets log: skipping an unreadable control batch (%s)", exc)
        return None
    return kind == 1
