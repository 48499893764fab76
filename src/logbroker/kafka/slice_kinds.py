"""Whether a segment slice holds only Kafka batches, known without reading
the slice (docs/kafka.md §4, decision 80).

A Kafka Fetch sends a partition's slice as it lies on disk (a file slice:
``sendfile``) when every batch in it is a Kafka batch (magic 2); a batch of
ours (magic 1) must be converted (fetch_records.py). ``SliceKinds.kafka_only``
answers from what it remembers of each segment's headers:

- ``_Walked``: over ``[start, end)`` of one segment (both batch
  boundaries), the position of the first magic-1 batch and the end of the
  last one (None: there is none). A slice ``[pos, stop)`` inside it holds no
  magic-1 batch when it ends at or before the first one or starts at or
  after the end of the last one. In between (magic-1 batches on both sides
  of a run of Kafka batches) the answer is False, conservatively: a
  converted slice is always right, only slower.
- It is built on the first Kafka fetch of a segment, from that slice's
  position, and extended forward to each later slice's end, so a consumer
  reading on walks each header once. A slice outside the interval starts a
  new one there (two consumers far apart take turns; each walk then covers
  one slice, still headers only).
- The walk reads headers only: ``records.walker.scan_file`` asked for no
  batch bytes, reading ``WINDOW`` bytes at a time (the small batches whose
  headers lie in one window cost one read; a larger batch costs one window
  read at its start). No record is decoded and no CRC computed. It goes up
  to the batch holding the slice's last byte, whole in the segment (a slice
  may end inside its last batch; Kafka clients drop that tail). A header
  the walk cannot read answers False: the converting path reports it as
  today (CORRUPT_RECORD).
- Staleness: records are held by the ``Segment`` object, weakly (retention,
  compaction's replacement and a log reset put new objects in place; a
  record goes with its object), and checked against ``Segment.generation``,
  bumped before every ``truncate`` (a follower's or a former leader's cut,
  recovery): a segment cut and re-written past the walked end starts a new
  record. A walk during which the generation moved is not kept.
- Memory: a few integers per segment, at most ``MAX_SEGMENTS`` records in
  all (the least recently used is dropped first).

``KINDS`` is the process's instance; it is used on the broker's loop only
(a dropped segment's record may go from any thread: ``WeakKeyDictionary``).
"""

from __future__ import annotations

import weakref

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.walker import scan_file
from ..storage.results import FileSlice

WINDOW = 4096  # bytes read per step of a header walk (a page)
MAX_SEGMENTS = 16384  # segments remembered at once


class _Walked:
    """What one walk saw of a segment (see the module docstring)."""

    __slots__ = ("generation", "start", "end", "first_ours", "ours_end")

    def __init__(self, generation: int, start: int) -> None:
        self.generation, self.start, self.end = generation, start, start
        self.first_ours: "int | None" = None  # position of the first magic-1 batch
        self.ours_end: "int | None" = None  # end of the last magic-1 batch

    def covers(self, generation: int, pos: int) -> bool:
        return generation == self.generation and self.start <= pos <= self.end

    def kafka_only(self, pos: int, stop: int) -> bool:
        if stop > self.end:
            return False
        return self.first_ours is None or stop <= self.first_ours or pos >= self.ours_end


class SliceKinds:
    """Per segment, the batch kinds already walked (module docstring)."""

    def __init__(self, max_segments: int = MAX_SEGMENTS) -> None:
        self.max_segments = max_segments
        self._walks: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
        self.walked_bytes = 0  # segment bytes whose headers were walked (tests, tuning)

    def __len__(self) -> int:
        return len(self._walks)

    def kafka_only(self, part: FileSlice) -> bool:
        """True when every batch overlapping ``part`` is a Kafka batch
        (magic 2), so its bytes go to a Kafka client as they lie; False when
        one may be ours (magic 1), or a header on the way does not read."""
        seg, pos = part.segment, part.position
        stop = pos + part.size
        generation = seg.generation
        walks = self._walks
        walked = walks.pop(seg, None)
        if walked is None or not walked.covers(generation, pos):
            walked = _Walked(generation, pos)
        if walked.end < stop:
            try:
                self._walk(seg, walked, stop)
            except CorruptRecordError:
                pass
            if seg.generation != generation:
                return False  # cut meanwhile: what was read may be either side of the cut
        if len(walks) >= self.max_segments:
            self._evict()
        walks[seg] = walked  # last: the most recently used
        return walked.kafka_only(pos, stop)

    def _walk(self, seg, walked: _Walked, stop: int) -> None:
        """Extend ``walked`` over the batches from its end to the one holding
        byte ``stop - 1``; raises CorruptRecordError at a header that does
        not read (what came before it is kept)."""
        for pos, header, _ in scan_file(seg.read, walked.end, seg.size, window=WINDOW,
                                        max_batch=0):
            end = pos + header.size
            if header.magic == fmt.MAGIC:
                if walked.first_ours is None:
                    walked.first_ours = pos
                walked.ours_end = end
            self.walked_bytes += end - walked.end
            walked.end = end
            if end >= stop:
                return

    def _evict(self) -> None:
        """Drop the least recently used record."""
        oldest = next(iter(self._walks), None)
        if oldest is not None:
            self._walks.pop(oldest, None)


KINDS = SliceKinds()
