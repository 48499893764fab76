"""The one batch walker: where the record batches lie in a buffer or a file.

Every reader of the format walks batches through these (storage reads and
recovery, the fetch buffer of the consumer, the Spark reader, ``logbroker
inspect``), so the rules are written once:

- A walk yields whole batches only. It stops silently at an incomplete tail
  (fewer bytes than a header, or than the batch its header announces): the
  caller learns where valid data ends from the last batch it was given.
- An invalid header (and, with ``verify``, a CRC mismatch) raises
  ``CorruptRecordError`` whose ``position`` is the batch's byte position in
  the buffer or file; batches before it were already yielded.
- No I/O here: a file walk reads through the ``read(position, size)``
  callable it is given, in windows of ``window`` bytes; a batch larger than
  the window is read alone.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator

from ..errors import CorruptRecordError, LogbrokerError, RecordTooLargeError
from . import format as fmt
from .decoder import readable
from .inflate import inflate

WINDOW = 4 << 20
SEARCH_INFLATE_BYTES = 1 << 20  # a compressed Kafka batch the search by time decodes at most
SEARCH_RECORDS = 10_000  # records of a Kafka batch the search by time decodes at most


def header_positions(buf) -> Iterator[int]:
    """The byte position of each batch header that fits whole in ``buf``,
    stepping by the batch length fields alone (nothing checked, no header
    decoded): for the produce path's quick looks at a part's magic and
    attribute bytes, where what is not a whole batch is storage's to refuse."""
    n, pos = len(buf), 0
    while pos + fmt.HEADER_SIZE <= n:
        yield pos
        pos += int.from_bytes(buf[pos + 8:pos + 12], "big") + fmt.LOG_OVERHEAD


def scan_fields(buf, start: int = 0, end: "int | None" = None) -> Iterator[tuple[int, tuple]]:
    """``(position, header fields)`` (``format.read_fields``: checked, no
    object) of each whole batch in ``buf[start:end]``; no CRC check."""
    pos, end = start, len(buf) if end is None else end
    while end - pos >= fmt.HEADER_SIZE:
        fields = fmt.read_fields(buf, pos)
        size = fields[fmt.F_BATCH_LENGTH] + fmt.LOG_OVERHEAD
        if end - pos < size:
            return
        yield pos, fields
        pos += size


def scan_batches(buf, start: int = 0, end: "int | None" = None, *,
                 verify: bool = True) -> Iterator[tuple[int, fmt.BatchHeader]]:
    """``(position, header)`` of each whole batch in ``buf[start:end]``."""
    for pos, fields in scan_fields(buf, start, end):
        header = fmt.BatchHeader(*fields)
        if verify:
            fmt.check_crc(buf, pos, header)
        yield pos, header


def split_batches(buf) -> list[tuple[memoryview, fmt.BatchHeader]]:
    """``buf`` as a list of ``(batch view, header)``; raises CorruptRecordError
    unless it is a whole, non-empty number of batches (no CRC check)."""
    mv = memoryview(buf).cast("B")
    out, end = [], 0
    for pos, fields in scan_fields(mv):  # no scan_batches around it: every produced part walks
        end = pos + fields[fmt.F_BATCH_LENGTH] + fmt.LOG_OVERHEAD
        out.append((mv[pos:end], fmt.BatchHeader._make(fields)))
    if not out or end != len(mv):
        raise CorruptRecordError(f"{len(mv)} bytes are not a whole number of record batches "
                                 f"(whole batches end at byte {end})", position=end)
    return out


def whole_batches(buf) -> memoryview:
    """The longest prefix of ``buf`` made of whole batches (each header
    checked, no CRC check): what a fetch answer that may end inside its last
    batch holds. Empty when not even one batch is whole; an invalid header
    raises CorruptRecordError at its position."""
    mv = memoryview(buf).cast("B")
    end = 0
    for pos, header in scan_batches(mv, verify=False):
        end = pos + header.size
    return mv[:end]


def scan_file(read: Callable[[int, int], bytes], start: int, end: int, *, verify: bool = False,
              window: int = WINDOW, max_batch: "int | None" = None
              ) -> Iterator[tuple[int, fmt.BatchHeader, "memoryview | None"]]:
    """``(position, header, bytes)`` of each whole batch of a file's
    ``[start, end)``, read through ``read(position, size)``.

    ``bytes`` is a view of the whole batch, or None for a batch larger than
    ``max_batch`` (then nothing of it but its header was read, and ``verify``
    does not apply to it: the caller checks it piecewise if it must).
    """
    pos = start
    while end - pos >= fmt.HEADER_SIZE:
        mv = memoryview(read(pos, min(max(window, fmt.HEADER_SIZE), end - pos)))
        at = 0
        try:
            while len(mv) - at >= fmt.HEADER_SIZE:
                header = fmt.read_header(mv, at)
                if header.size > len(mv) - at:
                    break
                if max_batch is not None and header.size > max_batch:
                    yield pos + at, header, None
                else:
                    if verify:
                        fmt.check_crc(mv, at, header)
                    yield pos + at, header, mv[at:at + header.size]
                at += header.size
            if at == 0:  # one batch larger than the window (or a torn tail)
                header = fmt.read_header(mv, 0)
                if header.size > end - pos:
                    return
                if max_batch is not None and header.size > max_batch:
                    yield pos, header, None
                else:
                    data = memoryview(read(pos, header.size))
                    if len(data) < header.size:
                        return  # the file shrank under us
                    if verify:
                        fmt.check_crc(data, 0, header)
                    yield pos, header, data
                at = header.size
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.message.replace(f" at position {at}", ""),
                                     position=pos + at) from None
        pos += at


def first_at_or_after(batches: Iterable[tuple[fmt.BatchHeader, Callable[[], Iterable[int]]]],
                      ts: int, low: int, high: int) -> "tuple[int, int] | None":
    """``(offset, timestamp)`` of the first record in ``[low, high)`` whose
    timestamp is >= ``ts``, walking ``(header, timestamps)`` in offset order,
    where ``timestamps()`` gives the batch's record timestamps (decoding it);
    batches whose max timestamp is below ``ts`` are skipped undecoded. The
    one offset-for-timestamp search (storage and Spark)."""
    for header, timestamps in batches:
        if header.base_offset >= high:
            return None
        if header.next_offset <= low or header.max_timestamp < ts:
            continue
        for i, t in enumerate(timestamps()):
            offset = header.base_offset + i
            if t >= ts and low <= offset < high:
                return offset, t
    return None


def batch_timestamps(data) -> Callable[[], Iterable[int]]:
    """The ``timestamps`` callable of ``first_at_or_after`` for raw batch bytes
    (decoded, CRC-checked, only when called). A Kafka batch whose records do
    not decode (``kafka_v2.readable``), or that holds more than
    ``SEARCH_RECORDS`` records or compressed records inflating past
    ``SEARCH_INFLATE_BYTES`` (a search decodes no more: its cost, ~20 ms
    under the log's lock, is bounded whatever was stored), stands as its
    header's max timestamp for every record: the search lands on its first
    offset, never fails."""
    def timestamps() -> Iterable[int]:
        header = fmt.read_header(data, 0)
        fmt.check_crc(data, 0, header)
        small = header.magic != fmt.KAFKA_MAGIC or (header.record_count <= SEARCH_RECORDS and
                                                     _inflates_within(data, header))
        batch = readable(data) if small else None
        return batch.timestamps() if batch is not None else \
            itertools.repeat(header.max_timestamp, header.record_count)
    return timestamps


def _inflates_within(data, header: fmt.BatchHeader, limit: int = SEARCH_INFLATE_BYTES) -> bool:
    """Whether the batch's records, if compressed (a Kafka batch), inflate
    to at most ``limit`` bytes (checked outside the GIL, into a mapping
    unmapped at once); True for anything else (``readable`` judges it)."""
    codec = header.attributes & fmt.COMPRESSION_MASK if header.magic == fmt.KAFKA_MAGIC else 0
    if not codec:
        return True
    try:
        inflate(codec, memoryview(data)[fmt.HEADER_SIZE:header.size], limit).close()
    except RecordTooLargeError:
        return False
    except LogbrokerError:
        return True
    return True
