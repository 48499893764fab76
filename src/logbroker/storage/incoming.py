"""Checks of batches before a Log writes them: a producer's (``append``)
and a leader's, as it stored them (``append_replicated``).

Pure: each function looks at the batches (and what it is told of the log)
and raises, changing nothing; the Log writes only once everything passed.
"""

from __future__ import annotations

from crc32c import crc32c

from ..errors import InvalidRecordError, InvalidRequestError, LogbrokerError, RecordTooLargeError
from ..records import format as fmt
from ..records.compact import has_null_key
from ..records.compression import READ_LIMIT
from ..records.inflate import inflate
from ..records.kafka_v2 import check_batch, check_transactional
from ..records.walker import header_positions, scan_fields, split_batches
from .epochs import LeaderEpochs

Parsed = list[tuple[memoryview, fmt.BatchHeader]]
DECOMPRESSION_FACTOR = 16  # a Kafka batch's records may decompress to 16x max_batch_bytes
WALK_ON_LOOP = 64 << 10  # an uncompressed Kafka section a compacted topic walks on the loop


class Convert:
    """A produce part still to be converted into batches: ``data`` its
    bytes as received (``len``), ``convert()`` the batches to check and
    store (raises a LogbrokerError). A legacy message set (Kafka's magic
    0/1): up-converting it inflates its wrappers and costs Python per
    message, so ``inspect`` runs it off the loop; ``parse_batches`` runs
    it where no inflation thread is (handlers called directly)."""

    __slots__ = ("data", "convert")

    def __init__(self, data, convert) -> None:
        self.data, self.convert = data, convert

    def __len__(self) -> int:
        return len(self.data)


class Inspected:
    """A produce part's ``data`` (one buffer of whole batches) whose Kafka
    batches ``inspect`` checked off the loop: ``error`` is the refusal it
    found (raised by ``parse_batches``), else None; ``require_keys`` the
    rule the records were checked by (a compacted topic's)."""

    __slots__ = ("data", "error", "require_keys")

    def __init__(self, data, error: "LogbrokerError | None", require_keys: bool) -> None:
        self.data, self.error, self.require_keys = data, error, require_keys


def part_buffers(data) -> list:
    """The buffers of whole batches a produce part holds, whatever form the
    handler got it in: bytes (one buffer), a sequence of buffers, an
    ``Inspected`` part (its bytes; none when its check refused it: storage
    raises that error) or a ``Convert`` part (none: a legacy message set,
    not converted yet, has no batch header of ours or Kafka's v2)."""
    cls = data.__class__
    if cls is Inspected:
        return [] if data.error is not None else part_buffers(data.data)
    if cls is Convert:
        return []
    if isinstance(data, (bytes, bytearray, memoryview)):
        return [data]
    return list(data)


def kafka_sections(data) -> bool:
    """Whether the part ``data`` may hold a Kafka batch (magic 2), the only
    kind ``inspection_bytes`` can count: a walk of the batches' lengths and
    magic bytes (no header decoded), True for anything but one bytes-like
    buffer. What is malformed answers either way: the loop's check reports it."""
    if not isinstance(data, (bytes, memoryview, bytearray)):
        return True
    return any(data[pos + fmt.STAMP_SIZE] == fmt.KAFKA_MAGIC for pos in header_positions(data))


def inspection_bytes(data, require_keys: bool) -> int:
    """The bytes of records in the part ``data`` too costly for the loop,
    0 when there are none: compressed Kafka sections, and (``require_keys``)
    uncompressed Kafka sections of more than ``WALK_ON_LOOP`` bytes to walk.
    Reads each batch's header fields only (no copy); 0 for anything
    malformed (the loop's check reports it). A ``Convert`` part: its size."""
    if data.__class__ is Convert:
        return len(data)
    total = 0
    try:
        for _, fields in scan_fields(data):
            if fields[fmt.F_MAGIC] != fmt.KAFKA_MAGIC:
                continue
            size = fields[fmt.F_BATCH_LENGTH] + fmt.LOG_OVERHEAD - fmt.HEADER_SIZE
            if fields[fmt.F_ATTRIBUTES] & fmt.COMPRESSION_MASK or (
                    require_keys and size > WALK_ON_LOOP):
                total += size
    except LogbrokerError:
        return 0
    return total


def inspect(data, *, max_batch_bytes: int, require_keys: bool, budget) -> Inspected:
    """Run in a worker thread: every check ``parse_batches`` makes of the
    part ``data``, each compressed section inflated (``inflate``: outside
    the GIL, unmapped after) within its batch's limit and what ``budget``
    (``take(n)``, ``left``, ``scratch``) has left for the request, which
    it is charged.
    Never raises: the refusal is the result's ``error``. A ``Convert``
    part is converted first (its result is what is checked and stored)."""
    try:
        if data.__class__ is Convert:
            data = data.convert()
        _check_all(split_batches(data), max_batch_bytes, require_keys, budget)
    except LogbrokerError as exc:
        return Inspected(data, exc, require_keys)
    return Inspected(data, None, require_keys)


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
    if batches.__class__ is Convert:
        batches = batches.convert()
    if batches.__class__ is Inspected:
        if batches.error is not None:
            raise batches.error
        if batches.require_keys or not require_keys:  # checked by the rule that applies
            return split_batches(batches.data)
        batches = batches.data  # the topic became compacted since: checked again here
    if isinstance(batches, (bytes, bytearray, memoryview)):
        parsed = split_batches(batches)
    else:
        parsed = [item for raw in batches for item in split_batches(raw)]
    if not parsed:
        raise InvalidRequestError("append needs at least one batch")
    _check_all(parsed, max_batch_bytes, require_keys, None, check_records)
    return parsed


def _check_all(parsed: Parsed, max_batch_bytes: "int | None", require_keys: bool, budget,
               check_records: bool = True) -> None:
    """``parse_batches``' checks of each batch; a compressed Kafka section
    is inflated into a mapping when a ``budget`` is given (``inspect``)."""
    limit = READ_LIMIT if max_batch_bytes is None else \
        min(READ_LIMIT, DECOMPRESSION_FACTOR * max_batch_bytes)
    for mv, header in parsed:  # mv: the whole batch
        if max_batch_bytes is not None and len(mv) > max_batch_bytes:
            raise RecordTooLargeError(f"batch of {len(mv)} bytes exceeds max_batch_bytes "
                                      f"{max_batch_bytes}")
        if crc32c(mv[fmt.CRC_START:]) != header.crc:
            fmt.check_crc(mv, 0, header)  # raises, saying where
        if header.magic == fmt.KAFKA_MAGIC:
            codec = header.attributes & fmt.COMPRESSION_MASK
            if not check_records:
                continue
            if budget is None or not codec:
                check_batch(mv, header, limit=limit, require_keys=require_keys)
                continue
            room = min(limit, budget.left)
            try:
                out = inflate(codec, mv[fmt.HEADER_SIZE:header.size], room, budget.scratch)
            except RecordTooLargeError:
                budget.take(room)  # inflated that far before it stopped
                if room < limit:
                    budget.exceeded()  # raises the request's rule
                raise
            with out:
                budget.take(out.size)
                check_batch(mv, header, limit=limit, require_keys=require_keys,
                            inflated=out.view)
        elif check_records and header.attributes & fmt.TXN_BITS:
            check_transactional(header)
            if require_keys and has_null_key(mv, header):
                raise InvalidRecordError(f"a compacted topic takes only records with a key: the "
                                         f"batch of {header.record_count} record(s) has one without")
        elif require_keys and has_null_key(mv, header):
            raise InvalidRecordError(f"a compacted topic takes only records with a key: the batch "
                                     f"of {header.record_count} record(s) has one without")


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
