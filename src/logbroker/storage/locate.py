"""Finding batches inside a partition's segments.

The index gives a starting position; the batch header found there is checked
against it (a stale or corrupt index is detected, the partition's index is
rebuilt from a CRC-checked scan, and the lookup retried from the segment
start). A header that is invalid when read from a trusted position is
corruption: the partition goes offline with file, byte position and offset.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..errors import CorruptRecordError
from ..records import decode_batch
from ..records import format as fmt

if TYPE_CHECKING:
    from .log import Log
    from .results import TimestampOffset
    from .segment import Segment

log = logging.getLogger(__name__)
WINDOW = 8 << 10  # one index interval plus a margin: where the wanted batch starts


class _Bad(Exception):
    def __init__(self, position: int, reason: str) -> None:
        super().__init__(reason)
        self.position, self.reason = position, reason


class Locator:
    """Batch lookups of one Log; every method runs under the Log's lock."""

    def __init__(self, owner: "Log") -> None:
        self.log = owner

    def locate(self, seg: "Segment", offset: int) -> tuple[int, fmt.BatchHeader]:
        """Position and header of the first batch of ``seg`` with last offset >= ``offset``."""
        hint = self.log.index.lookup(offset)
        if hint is not None and hint[1] == seg.base_offset and hint[2] > 0:
            try:
                return self._walk(seg, hint[2], offset, expect=hint[0])
            except _Bad as bad:
                log.warning("%s: index entry for offset %d is stale (%s); rebuilding the index",
                            self.log.name, hint[0], bad.reason)
                self.rebuild_index()
        try:
            return self._walk(seg, 0, offset, expect=seg.base_offset)
        except _Bad as bad:
            raise self.log._fail(f"{seg.path} byte {bad.position}: {bad.reason} "
                                 f"(looking for offset {offset})") from None

    def _walk(self, seg: "Segment", pos: int, offset: int, expect: int) -> tuple[int, fmt.BatchHeader]:
        first = True
        while pos < seg.size:
            buf = seg.read(pos, min(WINDOW, seg.size - pos))
            p = 0
            while len(buf) - p >= fmt.HEADER_SIZE:
                try:
                    header = fmt.read_header(buf, p)
                except CorruptRecordError as exc:
                    raise _Bad(pos + p, exc.message) from None
                if first and header.base_offset != expect:
                    raise _Bad(pos + p, f"expected a batch at offset {expect}, found {header.base_offset}")
                first = False
                if header.next_offset > offset:
                    return pos + p, header
                p += header.size
            if p == 0:
                raise _Bad(pos, "truncated batch header")
            pos += p
        raise _Bad(pos, f"offset {offset} not found before the end of the segment")

    def read_from(self, seg: "Segment", pos: int, max_bytes: int, limit: int) -> bytes:
        """Whole batches from ``pos`` with next offset <= ``limit``, within ``max_bytes``
        (at least one batch)."""
        buf = seg.read(pos, max(fmt.HEADER_SIZE, min(max_bytes, seg.size - pos)))
        end = 0
        try:
            for p, header in fmt.scan_batches(buf, 0, verify=False):
                if header.next_offset > limit:
                    break
                end = p + header.size
            if end == 0:
                header = fmt.read_header(buf, 0)
                if header.next_offset > limit:
                    return b""
                buf, end = seg.read(pos, header.size), header.size
        except CorruptRecordError as exc:
            raise self.log._fail(f"{seg.path} after byte {pos}: {exc.message}") from None
        return buf if end == len(buf) else buf[:end]

    def slice_from(self, seg: "Segment", pos: int, max_bytes: int, limit: int) -> int:
        """Bytes to send from ``pos``: up to ``max_bytes`` but never past the
        batch at ``limit``, and at least the first batch. May end inside a
        batch (readers drop an incomplete trailing batch, as Kafka's do)."""
        if limit >= self.log.segment_end(seg):
            end = seg.size
        else:
            end, _ = self.locate(seg, limit)
        try:
            first = fmt.read_header(seg.read(pos, fmt.HEADER_SIZE), 0)
        except CorruptRecordError as exc:
            raise self.log._fail(f"{seg.path} byte {pos}: {exc.message}") from None
        if first.next_offset > limit:
            return 0
        return min(end - pos, max(max_bytes, first.size))

    def offset_for_timestamp(self, ts: int) -> "TimestampOffset | None":
        from .results import TimestampOffset

        lg = self.log
        start = lg.index.lookup_time(ts)
        start = lg.log_start_offset if start is None else max(start, lg.log_start_offset)
        if start >= lg.log_end_offset:
            return None
        first_seg = lg.segment_for(start)
        pos, _ = self.locate(first_seg, start)
        for seg in lg.segments[lg.segments.index(first_seg):]:
            for bpos, header in seg.scan(pos if seg is first_seg else 0, seg.size, verify=False,
                                         chunk=WINDOW):
                if header.next_offset <= start or header.max_timestamp < ts:
                    continue
                try:
                    batch = decode_batch(seg.read(bpos, header.size))
                except CorruptRecordError as exc:
                    raise lg._fail(f"{seg.path} byte {bpos} (offset {header.base_offset}): "
                                   f"{exc.message}") from None
                for i, t in enumerate(batch.timestamps()):
                    if t >= ts and header.base_offset + i >= lg.log_start_offset:
                        return TimestampOffset(header.base_offset + i, t)
        return None

    def rebuild_index(self) -> None:
        """Forget the partition's index and rebuild it from a CRC-checked scan."""
        lg = self.log
        lg.index.clear()
        interval = lg.config.index_interval_bytes
        since, max_ts = interval, -1
        for seg in lg.segments:
            since = interval
            try:
                for pos, header in seg.scan(0, seg.size, verify=True):
                    max_ts = max(max_ts, header.max_timestamp)
                    if since >= interval:
                        lg.index.add(header.base_offset, seg.base_offset, pos, max_ts)
                        since = 0
                    since += header.size
            except CorruptRecordError as exc:
                raise lg._fail(f"index rebuild: {exc.message}") from None
        lg._since_index = since
        lg._checkpoint_locked()
