"""Finding batches inside a partition's segments.

The index gives a starting position; the batch header found there is checked
against it (a stale or corrupt index is detected, the partition's index is
rebuilt from a CRC-checked scan, and the lookup retried from the segment
start). Damage found from a trusted position (a segment start, a verified
index entry) raises ``CorruptRecordError`` naming the file, byte position,
offset and the next readable offset where one is known: the Log takes the
partition offline with it.

Reads only: the Locator never changes the log's state. Every method runs
under the Log's lock.
"""

from __future__ import annotations

import logging
from typing import Callable, Iterator

from ..errors import CorruptRecordError, OffsetOutOfRangeError
from ..records import format as fmt
from ..records.walker import batch_timestamps, first_at_or_after, scan_batches, scan_file
from .index import PartitionIndex
from .segment import Segment
from .segments import Segments

log = logging.getLogger(__name__)
WINDOW = 8 << 10  # one index interval plus a margin: where the wanted batch starts


class _Stale(Exception):
    pass


class SegmentDamage(CorruptRecordError):
    """Damage found while scanning ``segment`` (message and position as found)."""

    def __init__(self, segment: Segment, cause: CorruptRecordError) -> None:
        super().__init__(cause.message, position=cause.position)
        self.segment = segment


class Locator:
    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_after_rebuild", "index", "name", "segments")

    def __init__(self, name: str, segments: Segments, index: PartitionIndex,
                 after_rebuild: Callable[[], None]) -> None:
        self.name, self.segments, self.index = name, segments, index
        self._after_rebuild = after_rebuild

    def start_of_read(self, offset: int, upto: "int | None") -> "tuple[Segment, int, int] | None":
        """(segment, position, limit) where a read at ``offset`` starts (the
        batch holding it, or the next one after a gap), or None when nothing
        lies below the limit (``upto``, at most the log end) yet. Raises
        OffsetOutOfRangeError below the log start or past the log end."""
        start = self._start(offset, upto)
        return None if start is None else start[:3]

    def _start(self, offset: int, upto: "int | None"):
        """``start_of_read`` plus the header of the batch found there."""
        segs = self.segments
        if offset < segs.log_start or offset > segs.log_end:
            raise OffsetOutOfRangeError(f"{self.name}: offset {offset} is outside "
                                        f"[{segs.log_start}, {segs.log_end}]")
        limit = segs.log_end if upto is None else min(upto, segs.log_end)
        if offset >= limit:
            return None
        seg, pos, header = self.find(offset)
        return None if header is None else (seg, pos, limit, header)

    def find(self, offset: int) -> tuple[Segment, int, "fmt.BatchHeader | None"]:
        """(segment, position, header) of the first batch with last offset
        >= ``offset``: the batch holding it, or after a gap (compaction) the
        next batch, in a later segment if the gap ends ``offset``'s one.
        Header None when no batch follows (the position is then the end of
        the last segment looked at)."""
        seg = self.segments.segment_for(offset)
        pos, header = self.locate(seg, offset)
        while header is None and seg is not self.segments.active:
            seg = self.segments.from_segment(seg)[1]
            pos, header = self.locate(seg, seg.base_offset)
        return seg, pos, header

    def locate(self, seg: Segment, offset: int) -> tuple[int, "fmt.BatchHeader | None"]:
        """Position and header of the first batch of ``seg`` with last offset
        >= ``offset``; ``(seg.size, None)`` when none is and ``seg`` is sealed
        (a gap that compaction left at its end, or an emptied segment) or
        ``offset`` is the log end."""
        # at or below the segment's base the walk starts at byte 0 anyway: no index lookup
        hint = self.index.lookup(offset) if offset > seg.base_offset else None
        found = None
        if hint is not None and hint[1] == seg.base_offset and hint[2] > 0:
            try:
                found = self._walk(seg, hint[2], offset, expect=hint[0])
            except (_Stale, CorruptRecordError) as exc:
                log.warning("%s: index entry for offset %d is stale (%s); rebuilding the index",
                            self.name, hint[0], exc)
                self.rebuild_index()
        try:
            found = found or self._walk(seg, 0, offset, expect=None)
        except _Stale as exc:
            raise CorruptRecordError(f"{seg.path}: {exc} (looking for offset {offset})") from None
        except CorruptRecordError as exc:
            raise self._damage(seg, exc.position or 0, exc.message, offset) from None
        if found[1] is None and seg is self.segments.active and offset < self.segments.log_end:
            raise CorruptRecordError(f"{seg.path}: offset {offset} not found before byte "
                                     f"{seg.size}, the end of the segment")
        return found

    def _walk(self, seg: Segment, pos: int, offset: int,
              expect: "int | None") -> tuple[int, "fmt.BatchHeader | None"]:
        """Walk from ``pos``, where a batch of offset ``expect`` must start
        (None: the segment's start, where a gap may come first). The batch
        at ``pos`` is checked alone first: a read at a batch's start (a
        consumer going on where its last fetch ended, a log's first read)
        needs no window and no walk."""
        first = _header_at(seg, pos)
        if first is not None and first.next_offset > offset:
            if first.base_offset != expect if expect is not None \
                    else first.base_offset < seg.base_offset:
                raise _Stale(f"byte {pos}: expected a batch at offset "
                             f"{seg.base_offset if expect is None else expect}, found "
                             f"{first.base_offset}")
            return pos, first
        for bpos, header, _ in scan_file(seg.read, pos, seg.size, window=WINDOW):
            if bpos == pos and (header.base_offset != expect if expect is not None
                                else header.base_offset < seg.base_offset):
                raise _Stale(f"byte {pos}: expected a batch at offset "
                             f"{seg.base_offset if expect is None else expect}, found "
                             f"{header.base_offset}")
            if header.next_offset > offset:
                return bpos, header
        return seg.size, None

    def read_from(self, seg: Segment, pos: int, max_bytes: int, limit: int) -> bytes:
        """Whole batches from ``pos`` with next offset <= ``limit``, within ``max_bytes``
        (at least one batch)."""
        buf = seg.read(pos, max(fmt.HEADER_SIZE, min(max_bytes, seg.size - pos)))
        end = 0
        try:
            for p, header in scan_batches(buf, verify=False):
                if header.next_offset > limit:
                    break
                end = p + header.size
            if end == 0:
                header = fmt.read_header(buf, 0)
                if header.next_offset > limit:
                    return b""
                buf, end = seg.read(pos, header.size), header.size
        except CorruptRecordError as exc:
            raise self._damage(seg, pos + end, exc.message) from None
        return buf if end == len(buf) else buf[:end]

    def slice(self, offset: int, max_bytes: int,
              upto: "int | None") -> "tuple[Segment, int, int] | None":
        """(segment, position, size) of the bytes a fetch at ``offset`` sends
        (``start_of_read``'s start and contract): up to ``max_bytes`` but
        never past the batch at the limit, and at least the first batch;
        None when there is nothing to send yet. May end inside a batch
        (readers drop an incomplete trailing batch, as Kafka's do). A read
        from a segment's base offset of a whole segment below the limit
        that fits ``max_bytes`` is the whole segment: no header is read (a
        consumer starting at the beginning of thousands of partitions)."""
        segs = self.segments
        seg = segs.segment_for(offset)
        if offset == seg.base_offset and seg.size and segs.log_start <= offset < segs.log_end \
                and max_bytes >= seg.size and segs.segment_end(seg) <= \
                (segs.log_end if upto is None else upto):
            return seg, 0, seg.size
        start = self._start(offset, upto)
        if start is None:
            return None
        seg, pos, limit, first = start
        if first.next_offset > limit:
            return None
        if limit >= self.segments.segment_end(seg):
            end = seg.size
        else:
            end, _ = self.locate(seg, limit)  # the segment's size when ``limit`` is in a gap
        return seg, pos, min(end - pos, max(max_bytes, first.size))

    def offset_for_timestamp(self, ts: int) -> "tuple[int, int] | None":
        """(offset, timestamp) of the earliest record with timestamp >= ``ts``."""
        segs = self.segments
        start = scan_start(self.index, ts, segs.log_start)
        if start >= segs.log_end:
            return None
        first = segs.segment_for(start)
        pos, _ = self.locate(first, start)
        return first_at_or_after(self._batches_from(first, pos), ts, start, segs.log_end)

    def _batches_from(self, first: Segment, pos: int) -> Iterator[tuple[fmt.BatchHeader, Callable]]:
        for seg in self.segments.from_segment(first):
            try:
                for bpos, header, data in scan_file(seg.read, pos if seg is first else 0, seg.size,
                                                    window=WINDOW):
                    yield header, batch_timestamps(data)
            except CorruptRecordError as exc:
                raise self._damage(seg, exc.position or 0, exc.message) from None

    def rebuild_index(self) -> None:
        """Forget the partition's index and rebuild it from a CRC-checked scan."""
        try:
            rebuild_index(self.index, self.segments)
        except SegmentDamage as exc:
            raise self._damage(exc.segment, exc.position or 0,
                               f"index rebuild: {exc.message}") from None
        self._after_rebuild()

    def _damage(self, seg: Segment, position: int, why: str,
                looking_for: "int | None" = None) -> CorruptRecordError:
        """The error for damage at ``position`` of ``seg``, naming the next
        readable offset (the next segment's base: batch boundaries after
        damage cannot be trusted) so an operator knows what is lost."""
        end = self.segments.segment_end(seg)
        nxt = f"; next readable offset {end}" if seg is not self.segments.active else \
            "; nothing after it in this segment is readable"
        what = f" (looking for offset {looking_for})" if looking_for is not None else ""
        return CorruptRecordError(f"{seg.path} byte {position}: {why}{what}{nxt}", position=position)


def _header_at(seg: Segment, pos: int) -> "fmt.BatchHeader | None":
    """The checked header of the whole batch at ``pos`` of ``seg``, or None
    where ``scan_file`` would find no whole batch (a torn tail); raises
    ``CorruptRecordError`` with the position as ``scan_file`` does."""
    if seg.size - pos < fmt.HEADER_SIZE:
        return None
    raw = seg.read(pos, fmt.HEADER_SIZE)
    if len(raw) < fmt.HEADER_SIZE:
        return None
    try:
        header = fmt.read_header(raw, 0)
    except CorruptRecordError as exc:
        raise CorruptRecordError(exc.message.replace(" at position 0", ""), position=pos) from None
    return header if header.size <= seg.size - pos else None


def rebuild_index(index: PartitionIndex, segments) -> None:
    """Clear ``index`` and re-add every entry from a CRC-checked scan of
    ``segments``; raises SegmentDamage (a CorruptRecordError naming the
    segment) at damage."""
    index.clear()
    for seg in segments:
        index.restart_cadence()
        try:
            for pos, header in seg.scan(0, seg.size, verify=True):
                index.on_batch(header.base_offset, seg.base_offset, pos, header.size,
                               header.max_timestamp)
        except CorruptRecordError as exc:
            raise SegmentDamage(seg, exc) from None
    index.restart_cadence()


def scan_start(index: PartitionIndex, ts: int, log_start: int) -> int:
    """Where a search for the first record with timestamp >= ``ts`` starts:
    the time index's last entry below ``ts``, never before the log start."""
    start = index.lookup_time(ts)
    return log_start if start is None else max(start, log_start)
