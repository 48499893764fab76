"""Checks of batches before a Log writes them: a producer's (``append``)
and a leader's, as it stored them (``append_replicated``).

Pure: each function looks at the batches (and what it is told of the log)
and raises, changing nothing; the Log writes only once everything passed.
"""

from __future__ import annotations

from ..errors import InvalidRecordError, InvalidRequestError, RecordTooLargeError
from ..records import format as fmt
from ..records.compact import has_null_key
from ..records.compression import READ_LIMIT
from ..records.kafka_v2 import check_batch
from ..records.walker import split_batches
from .epochs import LeaderEpochs

Parsed = list[tuple[memoryview, fmt.BatchHeader]]
DECOMPRESSION_FACTOR = 16  # a Kafka batch's records may decompress to 16x max_batch_bytes


def parse_batches(batches, *, max_batch_bytes: "int | None" = None,
                  require_keys: bool = False, check_records: bool = True) -> Parsed:
    """``batches`` (one buffer of whole batches, or a sequence of such) as
    ``(view, header)`` pairs, every header, exact length and CRC32C checked,
    and each batch no larger than ``max_batch_bytes`` when given. Raises
    CorruptRecordError, RecordTooLargeError, InvalidRequestError when
    there is no batch at all, or InvalidRecordError for a record without a
    key when ``require_keys`` (a compacted topic; checked from the key
    column's mode and bitmap, nothing decoded).

    A Kafka batch (magic 2) is checked as Kafka's LogValidator does, by
    ``kafka_v2.check_batch`` (records walked, a compressed section
    decompressed within ``DECOMPRESSION_FACTOR`` x ``max_batch_bytes``,
    at most ``compression.READ_LIMIT``), unless ``check_records`` is false
    (a follower copying its leader's bytes: header and CRC only)."""
    if isinstance(batches, (bytes, bytearray, memoryview)):
        parsed = split_batches(batches)
    else:
        parsed = [item for raw in batches for item in split_batches(raw)]
    if not parsed:
        raise InvalidRequestError("append needs at least one batch")
    limit = READ_LIMIT if max_batch_bytes is None else \
        min(READ_LIMIT, DECOMPRESSION_FACTOR * max_batch_bytes)
    for mv, header in parsed:
        if max_batch_bytes is not None and header.size > max_batch_bytes:
            raise RecordTooLargeError(f"batch of {header.size} bytes exceeds max_batch_bytes "
                                      f"{max_batch_bytes}")
        fmt.check_crc(mv, 0, header)
        if header.magic == fmt.KAFKA_MAGIC:
            if check_records:
                check_batch(mv, header, limit=limit, require_keys=require_keys)
        elif require_keys and has_null_key(mv, header):
            raise InvalidRecordError(f"a compacted topic takes only records with a key: the batch "
                                     f"of {header.record_count} record(s) has one without")
    return parsed


def check_replicated(parsed: Parsed, log_end: int, epochs: LeaderEpochs, name: str) -> None:
    """A follower's batches, as the leader stored them, must continue the
    log: the first at ``log_end`` or past it (a compacted leader's log has
    a gap there; below it the follower must truncate or reset first), each
    next one after the previous one's last offset (gaps allowed), leader
    epochs never decreasing and not older than an epoch of the log that
    holds data."""
    first = parsed[0][1]
    if first.base_offset < log_end:
        raise InvalidRequestError(f"{name}: replicated batches start at offset "
                                  f"{first.base_offset}, below the log end {log_end}")
    epochs.check_replicated(first.leader_epoch, log_end, name)
    for (_, prev), (_, h) in zip(parsed, parsed[1:]):
        if h.base_offset <= prev.last_offset:
            raise InvalidRequestError(f"{name}: replicated batch at offset {h.base_offset} "
                                      f"overlaps the one before it (offsets {prev.base_offset}"
                                      f"..{prev.last_offset})")
        if h.leader_epoch < prev.leader_epoch:
            raise InvalidRequestError(f"{name}: replicated batch at offset {h.base_offset} has "
                                      f"leader epoch {h.leader_epoch}, older than the "
                                      f"{prev.leader_epoch} of the batch before it")
