"""Log compaction at the bytes level (pure bytes, no I/O): a batch's keys,
the cheap null-key check of a compacted topic's append path, and a batch
re-encoded as runs of the records it keeps.

A batch has no per-record offset delta: its records hold the offsets
``base_offset .. base_offset + last_offset_delta`` one after the other.
So when compaction removes records from the middle of a batch, the kept
ones become several batches, one per run of consecutive kept records, each
stamped with the offset of its first record. ``encode_runs`` builds them
with the one encoder (``encoder.encode_batch``): same leader epoch,
producer id and epoch, timestamp type, records (timestamps, keys, values,
headers) unchanged; the base sequence moves with the run; CRC recomputed.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import CorruptRecordError
from . import format as fmt
from .decoder import RecordBatch
from .encoder import encode_batch


def has_null_key(buf, header: fmt.BatchHeader, pos: int = 0) -> bool:
    """Whether a record of the batch at ``buf[pos:]`` has a null key,
    decided from the header's key-column mode and, for a nullable key
    column only, its validity bitmap (a few bytes at a fixed place): no
    record is decoded. ``buf`` must hold the batch (header checked)."""
    mode = (header.attributes >> fmt.KEY_MODE_SHIFT) & 3
    if mode == fmt.COL_DENSE:
        return False
    if mode == fmt.COL_ABSENT:
        return True
    n = header.record_count
    start = pos + fmt.HEADER_SIZE + 4 * n  # the key column follows the timestamp deltas
    bitmap = bytes(memoryview(buf)[start:start + (n + 7) // 8])
    if len(bitmap) != (n + 7) // 8:
        raise CorruptRecordError(f"batch at offset {header.base_offset}: key bitmap cut short")
    full, rest = divmod(n, 8)
    if bitmap[:full] != b"\xff" * full:
        return True
    return bool(rest) and bitmap[full] & ((1 << rest) - 1) != (1 << rest) - 1


def runs_of(keep: Sequence[bool]) -> list[tuple[int, int]]:
    """``[(first, end)]`` index ranges of consecutive True entries of ``keep``."""
    out, start = [], None
    for i, kept in enumerate(keep):
        if kept and start is None:
            start = i
        elif not kept and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(keep)))
    return out


def encode_runs(data, batch: RecordBatch, keep: Sequence[bool]) -> list[bytes]:
    """The records ``i`` of ``batch`` (decoded from ``data``, its bytes)
    with ``keep[i]``, as whole stamped batches, one per run of consecutive
    kept records, in offset order (an empty list when nothing is kept).
    Every record kept: ``[data]`` as it is.

    Run ``r`` of records ``a..b-1`` gets base offset ``base_offset + a``,
    the batch's leader epoch and producer fields, base sequence
    ``base_sequence + a`` (unless the batch has none, -1), the records'
    own timestamps, keys, values and headers, and a fresh CRC."""
    h = batch.header
    if len(keep) != h.record_count:
        raise ValueError(f"{len(keep)} keep flags for a batch of {h.record_count} records")
    runs = runs_of(keep)
    if runs == [(0, h.record_count)]:
        return [bytes(data)]
    if not runs:
        return []
    stamps = batch.timestamps()
    keys, values = batch.keys.tolist(), batch.values.tolist()
    has_headers = batch.header_counts is not None
    out = []
    for a, b in runs:
        headers = {i - a: batch.headers_of(i) for i in range(a, b)} if has_headers else {}
        raw = encode_batch(stamps[a:b], keys[a:b], values[a:b], headers,
                           producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                           base_sequence=h.base_sequence + a if h.base_sequence >= 0 else -1,
                           log_append_time=bool(h.attributes & fmt.LOG_APPEND_TIME))
        out.append(fmt.stamp(raw, h.base_offset + a, h.leader_epoch) + raw[fmt.STAMP_SIZE:])
    return out

