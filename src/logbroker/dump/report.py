"""Read-only inspection of segment files, partition dirs and data dirs.

The logic of ``logbroker inspect`` (cli/inspect.py is its click shell). It
never writes: segments are opened ``O_RDONLY``; with ``verify`` the offset
index of an existing ``<data>/meta.lmdb`` is read through
``MetaStore(path, readonly=True)``, which a running broker tolerates (a tail
may then be seen mid-write, and the index may lag the files).

``plan(paths)`` resolves PATHs and raises ``InvalidRequestError`` for one
that is missing or no logbroker file or directory, before anything is read.
``inspect(plan, records=, verify=)`` then yields frozen events, file by file
in offset order: BatchInfo (CRC always checked), RecordInfo (``records``),
Problem (bad CRC, invalid header, incomplete tail, malformed records; with
``verify`` also offset gaps and overlaps (a compacted topic's gaps are normal:
notes) and offset-index entries that do not match the segments), Notice (something left unchecked), FileSummary,
and, after a partition holding transactional or control batches, its
Transactions (open transactions replayed from the files read, the last
stable offset, the aborted count). A BatchInfo carries its batch's
transactional flag and, for a control batch, its marker (commit or abort,
coordinator epoch).

A bad CRC does not stop a file's scan; an invalid header or an incomplete
tail ends it. Offsets are checked against the file name and, for a whole
partition dir, across its segments. Memory is bounded: reads of CHUNK
bytes, a larger batch alone up to MAX_DECODE, a batch larger still is
CRC-checked piecewise and not decoded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Union

import lmdb

from ..errors import CorruptRecordError, InvalidRequestError, LogbrokerError
from ..records import Record, decode_batch
from ..records import format as fmt
from . import reader as inspect_reader
from .reader import Raw, Reader, Stop, read_batches
from .txn_view import Transactions, TxnTracker
from ..storage.checkpoints import load_checkpoint
from ..storage.config import LogConfig
from ..storage.index import iter_entries
from ..storage.metastore import FILENAME, MetaStore
from ..storage.segment import DELETED_SUFFIX, parse_segment_name, segment_name
from ..storage.store import parse_partition_dir
from ..storage.topics import TopicStore



@dataclass(frozen=True)
class SegmentFile:
    path: str  # as displayed: the user's PATH joined with names found under it
    base_offset: int  # from the file name
    size: int  # at planning time (progress only; the scan uses the size at open)


@dataclass(frozen=True)
class PartitionInput:
    """Segments of one directory; ``whole`` when it is every segment there."""

    name: str  # directory name, ``<topic>-<partition>`` for a real partition
    directory: str
    segments: tuple[SegmentFile, ...]
    whole: bool
    meta_path: "str | None"  # the data dir's meta.lmdb, if there is one


@dataclass(frozen=True)
class Plan:
    partitions: tuple[PartitionInput, ...]

    @property
    def total_bytes(self) -> int:
        return sum(s.size for p in self.partitions for s in p.segments)


@dataclass(frozen=True)
class BatchInfo:
    """A batch whose header parsed; ``header`` has last_offset, size, next_offset."""

    file: str
    position: int
    header: fmt.BatchHeader
    crc_ok: bool
    transactional: bool = False
    marker: "tuple[bool, int] | None" = None  # a control batch's (commit, coordinator epoch)


@dataclass(frozen=True)
class RecordInfo:
    file: str
    position: int  # of the batch holding the record
    record: Record  # offset, timestamp, key, value, headers


@dataclass(frozen=True)
class Problem:
    file: str
    position: int
    offset: "int | None"  # None when no offset can be named
    reason: str

    def __str__(self) -> str:
        offset = "?" if self.offset is None else self.offset
        return f"PROBLEM {self.file} byte {self.position} offset {offset}: {self.reason}"


@dataclass(frozen=True)
class Notice:
    file: str
    message: str


@dataclass(frozen=True)
class FileSummary:
    file: str
    size: int  # file size when it was opened
    batches: int
    records: int
    batch_bytes: int  # bytes in complete batches
    first_offset: "int | None"
    last_offset: "int | None"
    problems: int


Event = Union[BatchInfo, RecordInfo, Problem, Notice, FileSummary, Transactions]


# -- resolving PATHs ----------------------------------------------------------------------
def plan(paths: Iterable[str]) -> Plan:
    """Resolve every PATH; raises InvalidRequestError for the first bad one."""
    parts: list[PartitionInput] = []
    for path in paths:
        parts.extend(_resolve(path))
    return Plan(tuple(parts))


def _resolve(path: str) -> list[PartitionInput]:
    if os.path.isfile(path):
        base = parse_segment_name(os.path.basename(path).removesuffix(DELETED_SUFFIX))
        if base is None:
            raise InvalidRequestError(f"{path}: not a logbroker segment file "
                                      "(expected <20-digit base offset>.log)")
        seg = SegmentFile(path, base, os.path.getsize(path))
        directory = os.path.dirname(path) or "."
        meta = None if path.endswith(DELETED_SUFFIX) else _parent_meta(directory)
        return [PartitionInput(_name(directory), directory, (seg,), False, meta)]
    if os.path.isdir(path):
        entries = os.listdir(path)
        meta = os.path.join(path, FILENAME) if FILENAME in entries else None
        subdirs = [(parsed, e) for e in entries if (parsed := parse_partition_dir(e))
                   and (os.path.isdir(os.path.join(path, e)) if meta
                        else _has_segments(os.path.join(path, e)))]
        if meta or subdirs:
            return [_partition(os.path.join(path, e), meta) for _, e in sorted(subdirs)]
        if _has_segments(path) or _parent_meta(path):
            return [_partition(path, _parent_meta(path))]
        raise InvalidRequestError(f"{path}: not a logbroker data dir, partition dir or segment file")
    if not os.path.lexists(path):
        raise InvalidRequestError(f"{path}: no such file or directory")
    raise InvalidRequestError(f"{path}: not a regular file or directory")


def _has_segments(directory: str) -> bool:
    """Whether ``directory`` is a directory holding segment files (a partition always has one)."""
    return os.path.isdir(directory) and any(parse_segment_name(e) is not None
                                            for e in os.listdir(directory))


def _name(directory: str) -> str:
    return os.path.basename(os.path.abspath(directory))


def _parent_meta(directory: str) -> "str | None":
    """The enclosing data dir's meta.lmdb, if ``directory`` is a partition dir in one."""
    meta = os.path.join(os.path.dirname(os.path.abspath(directory)), FILENAME)
    return meta if parse_partition_dir(_name(directory)) and os.path.exists(meta) else None


def _partition(directory: str, meta: "str | None") -> PartitionInput:
    segs = []
    for entry in os.listdir(directory):
        base = parse_segment_name(entry)  # live segments only, not .deleted ones
        if base is not None:
            try:
                segs.append(SegmentFile(os.path.join(directory, entry), base,
                                        os.path.getsize(os.path.join(directory, entry))))
            except FileNotFoundError:  # removed since listdir (retention)
                pass
    segs.sort(key=lambda s: s.base_offset)
    return PartitionInput(_name(directory), directory, tuple(segs), True, meta)


# -- checking -----------------------------------------------------------------------------
@dataclass
class _State:
    """What one partition's scan carries from segment to segment."""

    records: bool
    verify: bool
    whole: bool
    expected: "int | None" = None  # where the next segment must start
    index: "dict[int, dict[int, list[int]]] | None" = None  # segment -> pos -> offsets
    flushed: "tuple[int, int] | None" = None  # checkpointed recovery point: (segment, position)
    problems: int = 0
    compacted: bool = False  # the topic's cleanup_policy has compact: offset gaps are normal
    txns: TxnTracker = field(default_factory=TxnTracker)

    def unflushed(self, segment: int, position: int) -> bool:
        """Whether byte ``position`` of ``segment`` lies past the checkpointed
        recovery point: a live broker may still be writing there and its
        index entries wait for the next checkpoint, so nothing there is damage."""
        return self.flushed is not None and (segment, position) >= self.flushed


def inspect(plan_: Plan, *, records: bool = False, verify: bool = False) -> Iterator[Event]:
    """Events for every file of ``plan_`` (see the module docstring).

    Raises only on I/O errors other than a file vanishing (OSError).
    """
    metas: dict[str, "MetaStore | None"] = {}
    try:
        for part in plan_.partitions:
            state = _State(records, verify, part.whole)
            if verify and part.meta_path:
                state.index = yield from _load_index(part, metas, state)
            for seg in part.segments:
                yield from _scan_segment(seg, state)
            if state.index and part.whole:
                yield from _unmatched_segments(part, state.index)
            if state.txns.seen:
                yield state.txns.summary(part.name)
    finally:
        for meta in metas.values():
            if meta is not None:
                meta.close()


def _open_meta(path: str, metas: dict):
    """The data dir's MetaStore, opened once; None (after a Notice or Problem) if unusable."""
    if path not in metas:
        metas[path] = None
        if not os.path.exists(path + "-lock"):  # LMDB would create it: inspect never writes
            yield Notice(path, f"offset index not checked: {path}-lock is missing")
        else:
            try:
                metas[path] = MetaStore(path, readonly=True)
            except LogbrokerError as exc:
                yield Problem(path, 0, None, f"cannot read the offset index: {exc.message}")
    return metas[path]


def _load_index(part: PartitionInput, metas: dict, st: _State):
    """The partition's offset-index rows grouped by segment -> position -> offsets,
    or None when there is no usable index; sets ``st.flushed`` from the checkpoint."""
    path = part.meta_path
    meta = yield from _open_meta(path, metas)
    if meta is None or not (meta.has("parts") and meta.has("oidx")):
        return None
    rows: dict[int, dict[int, list[int]]] = {}
    try:
        pid = meta.partition_id(part.name, create=False)
        if pid is None:
            return rows  # unknown to the index: every first batch lacks its entry
        st.compacted = _compacted(meta, part.name.rpartition("-")[0])
        ckpt = load_checkpoint(meta, pid) if meta.has("ckpt") else None
        if ckpt is not None:
            st.flushed = (ckpt.rp_segment, ckpt.rp_position)
            st.txns.high_watermark = ckpt.high_watermark
        for entry in iter_entries(meta, pid):
            if isinstance(entry, bytes):
                yield Problem(path, 0, None, f"malformed offset index row of {part.name}: {entry.hex()}")
                continue
            off, segment, pos = entry
            rows.setdefault(segment, {}).setdefault(pos, []).append(off)
    except lmdb.Error as exc:
        yield Problem(path, 0, None, f"cannot read the offset index of {part.name}: {exc}")
        return None
    return rows


def _compacted(meta: MetaStore, topic: str) -> bool:
    """Whether ``topic``'s stored settings say ``cleanup_policy`` compact."""
    found = TopicStore(meta).get(topic) if meta.has("topics") else None
    return found is not None and LogConfig().replace(**found.overrides).compacts


def _scan_segment(seg: SegmentFile, st: _State) -> Iterator[Event]:
    try:
        fd = os.open(seg.path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        yield Notice(seg.path, "file vanished before it was read (deleted by retention?)")
        st.expected = None
        return
    try:
        yield from _scan_open(seg, Reader(fd, os.fstat(fd).st_size), st)
    finally:
        os.close(fd)


def _scan_open(seg: SegmentFile, reader: Reader, st: _State) -> Iterator[Event]:
    """A segment's events; ``st.expected`` becomes where the next segment must start."""
    before, base = st.problems, seg.base_offset
    batches = nrec = nbytes = valid_end = 0
    first = last = None
    if st.verify and st.expected is not None and (st.expected > base or st.expected < base
                                                   and not st.compacted):
        yield _problem(st, seg.path, 0, base, f"segment starts at offset {base} but the previous "
                       f"segment ends before offset {st.expected} ({_gap(base, st.expected)})")
    entries = st.index.pop(base, {}) if st.index is not None else None
    expect = base
    for item in read_batches(reader):
        if isinstance(item, Stop):
            if st.verify and st.unflushed(base, item.position):
                yield Notice(seg.path, f"{item.reason} (byte {item.position}, past the recovery "
                                       "point: a write in progress, or an unflushed tail that "
                                       "recovery truncates)")
            else:
                yield _problem(st, seg.path, item.position, expect, item.reason)
            expect = None
            break
        pos, h = item.position, item.header
        yield _batch_info(seg.path, item, st)
        batches, nrec, nbytes = batches + 1, nrec + h.record_count, nbytes + h.size
        first, last = h.base_offset if first is None else first, h.last_offset
        if item.crc != h.crc:
            yield _problem(st, seg.path, pos, h.base_offset, f"CRC mismatch: stored 0x{h.crc:08x}, "
                           f"computed 0x{item.crc:08x}")
        elif st.records or st.verify:
            yield from _decode(seg.path, item, st)
        if st.verify and (h.base_offset < expect or h.base_offset > expect and not st.compacted):
            yield _problem(st, seg.path, pos, h.base_offset, f"batch base offset {h.base_offset}, "
                           f"expected {expect} ({_gap(h.base_offset, expect)})")
        elif st.verify and h.base_offset > expect:  # compaction removed records: normal
            yield Notice(seg.path, f"offsets {expect}..{h.base_offset - 1} before byte {pos}: "
                                   "a gap (records removed by compaction)")
        if entries is not None:
            yield from _check_entries(seg.path, pos, h, entries.pop(pos, []), st)
        expect, valid_end = h.next_offset, pos + h.size
        st.txns.end = h.next_offset
    yield from _stray_entries(seg.path, entries or {}, valid_end, st)
    st.expected = expect if st.whole else None
    yield FileSummary(seg.path, reader.size, batches, nrec, nbytes, first, last, st.problems - before)


def _batch_info(path: str, item: Raw, st: _State) -> BatchInfo:
    """The batch's event; a transactional or control batch also moves the
    partition's transaction state (txn_view.TxnTracker)."""
    h = item.header
    if not h.attributes & fmt.TXN_BITS:
        return BatchInfo(path, item.position, h, item.crc == h.crc)
    transactional, marker = st.txns.batch(h, item.data)
    return BatchInfo(path, item.position, h, item.crc == h.crc, transactional, marker)


def _decode(path: str, item: Raw, st: _State) -> Iterator[Event]:
    """Check the records section's layout; yield the records if asked for."""
    if item.data is None:
        yield Notice(path, f"batch at byte {item.position} not decoded: over {inspect_reader.MAX_DECODE} bytes")
        return
    try:
        batch = decode_batch(item.data, verify=False)
        records = batch.records() if st.records else ()
    except CorruptRecordError as exc:
        yield _problem(st, path, item.position, item.header.base_offset,
                       f"malformed records section: {exc.message}")
        return
    for r in records:
        yield RecordInfo(path, item.position, r)


def _check_entries(path: str, pos: int, h: fmt.BatchHeader, offsets: list[int],
                   st: _State) -> Iterator[Problem]:
    for off in offsets:
        if off != h.base_offset:
            yield _problem(st, path, pos, off, f"offset index entry for offset {off} points at the "
                           f"batch with base offset {h.base_offset}")
    if pos == 0 and h.base_offset not in offsets and not st.unflushed(h.base_offset, 0):
        yield _problem(st, path, 0, h.base_offset,
                       "offset index has no entry for the segment's first batch")


def _stray_entries(path: str, entries: dict, valid_end: int, st: _State) -> Iterator[Problem]:
    """Index entries of a segment that matched no batch start."""
    for pos, offsets in sorted(entries.items()):
        where = (" where no batch starts" if pos < valid_end
                 else f", at or past the end of the valid data (byte {valid_end})")
        for off in offsets:
            yield _problem(st, path, pos, off, f"offset index entry points at byte {pos}{where}")


def _unmatched_segments(part: PartitionInput, index: dict) -> Iterator[Problem]:
    """Index rows naming segments that are not in the partition dir (rows of a
    segment a live broker created after the files were listed are not)."""
    last = part.segments[-1].base_offset if part.segments else -1
    for segment, entries in sorted(index.items()):
        if segment > last and os.path.exists(os.path.join(part.directory, segment_name(segment))):
            continue
        for pos, offsets in sorted(entries.items()):
            for off in offsets:
                yield Problem(os.path.join(part.directory, segment_name(segment)), pos, off,
                              "offset index entry points into a segment file that does not exist")


def _problem(st: _State, path: str, pos: int, offset: "int | None", reason: str) -> Problem:
    st.problems += 1
    return Problem(path, pos, offset, reason)


def _gap(found: int, expected: int) -> str:
    return f"gap of {found - expected}" if found > expected else f"overlap of {expected - found}"

