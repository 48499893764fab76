"""Consumer group requests: committed offsets and lag (offsets and time)."""

from __future__ import annotations

import time

from .. import limits
from ..errors import GroupNotFoundError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..records import format as fmt
from ..storage.store import Store
from .edge import check_partition_key


def fetch_offsets(store: Store, req: m.FetchOffsets) -> m.FetchOffsetsResponse:
    """The group's committed offsets (its name was checked at the edge)."""
    check_fetch_offsets(req)
    return offsets_answer(req, store.groups.fetch(req.group))


def check_fetch_offsets(req: m.FetchOffsets) -> None:
    for topic, partition in req.parts or ():
        check_partition_key(topic, partition)


def offsets_answer(req: m.FetchOffsets, committed: dict) -> m.FetchOffsetsResponse:
    """The answer to ``req`` from a group's committed offsets by (topic, partition)."""
    wanted = req.parts if req.parts is not None else sorted(committed)
    out = []
    for topic, partition in wanted:
        c = committed.get((topic, partition))
        out.append((topic, partition, -1, "", 0) if c is None
                   else (topic, partition, c.offset, c.metadata, c.commit_ms))
    return m.FetchOffsetsResponse(parts=tuple(out))


def describe_group(store: Store, group: str) -> tuple:
    """(group, error, message, parts): per committed partition, the committed
    offset, the log end (high watermark), the lag in records, the commit
    time, and the lag in ms: how long ago the next record to read was written
    (-1: caught up). A bad name or a group without offsets has an error."""
    try:
        committed = store.groups.fetch(limits.check_group_name(group))
        if not committed:
            raise GroupNotFoundError(f"unknown group {group!r} (no committed offsets)")
    except LogbrokerError as exc:
        return (group, *_err(exc), ())
    now = int(time.time() * 1000)
    parts = [lag_row(store, topic, partition, c, now)
             for (topic, partition), c in sorted(committed.items())]
    return (group, 0, "", tuple(parts))


def lag_row(store: Store, topic: str, partition: int, c, now: int) -> tuple:
    """(topic, partition, committed, log_end, lag, commit_ms, lag_ms) of one
    committed offset; -1 where the partition is not in ``store``."""
    try:
        lg = store.get_log(topic, partition)
        end = lg.high_watermark
    except LogbrokerError:
        return (topic, partition, c.offset, -1, -1, c.commit_ms, -1)
    lag = max(0, end - c.offset)
    return (topic, partition, c.offset, end, lag, c.commit_ms,
            _lag_ms(lg, c.offset, now) if lag else -1)


def _lag_ms(lg, offset: int, now: int) -> int:
    try:
        data = lg.read(max(offset, lg.log_start_offset), 1, upto=lg.high_watermark)
    except LogbrokerError:
        return -1
    if len(data) < fmt.HEADER_SIZE:
        return -1
    return max(0, now - fmt.read_header(data).first_timestamp)
