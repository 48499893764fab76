"""Opening a partition log: trust a clean shutdown, recover after a crash.

Clean (the store's marker was present and the checkpoint matches the files):
nothing is read but file sizes; reopen time does not grow with data size.

Unclean: every batch from the recovery point on is checked (length, magic,
CRC, contiguous offsets); the first invalid one and everything after it
(later segments included) is truncated; the index past the recovery point is
rebuilt from the scan. Damage below the recovery point (a flushed segment
shorter or longer than recorded, a recovery point beyond the end of its
file) is never truncated: the log opens offline with an error naming the
file, byte position and offset.
"""

from __future__ import annotations

import logging
import os

from .config import LogConfig
from ..errors import CorruptRecordError
from . import checkpoints as ck
from .files import FileCache
from .index import PartitionIndex
from .log import Log, now_ms
from .metastore import MetaStore
from .segment import DELETED_SUFFIX, Segment, parse_segment_name

log = logging.getLogger(__name__)


class _Offline(Exception):
    pass


def open_log(directory: str, topic: str, partition: int, *, config: LogConfig, meta: MetaStore,
             files: FileCache, clean: bool) -> Log:
    """Open (creating if needed) the log in ``directory``; never raises for
    damaged data: a damaged log comes back with ``offline`` set."""
    pid = meta.partition_id(f"{topic}-{partition}")
    os.makedirs(directory, exist_ok=True)
    bases = []
    for entry in os.listdir(directory):
        if entry.endswith(DELETED_SUFFIX):
            os.unlink(os.path.join(directory, entry))
        elif (base := parse_segment_name(entry)) is not None:
            bases.append(base)
    ckpt = ck.load_checkpoint(meta, pid)
    if not bases:
        bases = [ckpt.log_start_offset if ckpt else 0]
        Segment.create(directory, bases[0], files)
    segments = [Segment(directory, b, files, size=os.stat(os.path.join(directory, f"{b:020d}.log")).st_size)
                for b in sorted(bases)]
    start = max(ckpt.log_start_offset, segments[0].base_offset) if ckpt else segments[0].base_offset
    rp = (ckpt.recovery_point, ckpt.rp_segment, ckpt.rp_position) if ckpt else (start, start, 0)
    lg = Log(topic=topic, partition=partition, directory=directory, pid=pid, config=config,
             meta=meta, files=files, segments=segments, log_start=start, log_end=start,
             high_watermark=ckpt.high_watermark if ckpt else 0, recovery_point=rp,
             epochs=ck.load_epochs(meta, pid), index=PartitionIndex(meta, pid))
    infos = ck.load_segment_infos(meta, pid)
    try:
        if clean and _matches(ckpt, segments, infos):
            _open_clean(lg, ckpt, infos)
        else:
            _recover(lg, ckpt, infos)
    except _Offline as why:
        lg._fail(str(why))
    return lg


def _matches(ckpt, segments: list[Segment], infos: dict) -> bool:
    if ckpt is None or not ckpt.clean or ckpt.active_segment != segments[-1].base_offset:
        return False
    if segments[-1].size != ckpt.active_size:
        return False
    return all(s.base_offset in infos and infos[s.base_offset].size == s.size for s in segments[:-1])


def _open_clean(lg: Log, ckpt: ck.Checkpoint, infos: dict) -> None:
    for seg in lg.segments[:-1]:
        seg.max_timestamp = infos[seg.base_offset].max_timestamp
    lg.active.max_timestamp, lg.active.created_ms = ckpt.active_max_ts, ckpt.active_created_ms
    lg._leo = lg._flushed = ckpt.log_end_offset
    lg._hw = min(ckpt.high_watermark, lg._leo)
    lg.index.load_last_time()
    lg._max_ts_so_far = lg.index.last_time
    if not _index_complete(lg):
        log.warning("%s: offset index incomplete; rebuilding it from segments", lg.name)
        lg._locator.rebuild_index()
    lg._since_index = lg.config.index_interval_bytes
    lg._checkpoint_locked()


def _index_complete(lg: Log) -> bool:
    """Every segment holding data has its first-batch index entry."""
    return all(lg.index.has(s.base_offset) for s in lg.segments if s.size)


def _recover(lg: Log, ckpt: "ck.Checkpoint | None", infos: dict) -> None:
    first = _check_below_recovery_point(lg, ckpt, infos)
    rp_offset, rp_segment, rp_position = lg._rp
    lg.index.truncate(rp_offset if ckpt else 0)
    lg.index.load_last_time()
    expected = rp_offset if ckpt else lg.segments[0].base_offset
    scanned, max_ts = [], lg.index.last_time
    for i in range(first, len(lg.segments)):
        seg = lg.segments[i]
        pos = rp_position if (ckpt and seg.base_offset == rp_segment) else 0
        if pos == 0 and seg.base_offset != expected:
            _drop_from(lg, i, expected, f"{seg.path} starts at {seg.base_offset}, expected {expected}")
            break
        since = lg.config.index_interval_bytes
        problem = None
        try:
            for bpos, header in seg.scan(pos, seg.size, verify=True):
                if header.base_offset != expected:
                    raise CorruptRecordError(f"batch at offset {header.base_offset}, expected "
                                             f"{expected}", position=bpos)
                max_ts = max(max_ts, header.max_timestamp)
                seg.max_timestamp = max(seg.max_timestamp, header.max_timestamp)
                if not lg.epochs or header.leader_epoch > lg.epochs[-1][0]:  # stored by _finish
                    lg.epochs.append((header.leader_epoch, header.base_offset))
                if since >= lg.config.index_interval_bytes or bpos == 0:
                    lg.index.add(expected, seg.base_offset, bpos, max_ts)
                    since = 0
                since += header.size
                expected = header.next_offset
                pos = bpos + header.size
            if pos < seg.size:
                problem = (pos, "incomplete batch at the end")
        except CorruptRecordError as exc:
            problem = (exc.position, exc.message)
        scanned.append(seg)
        if problem is not None:
            if ckpt is None and i < len(lg.segments) - 1:
                raise _Offline(f"{seg.path} byte {problem[0]} (offset {expected}): {problem[1]}; "
                               "no checkpoint tells whether it was flushed, so nothing is truncated")
            _cut(lg, i, *problem)
            break
    _finish(lg, ckpt, infos, scanned, expected)


def _check_below_recovery_point(lg: Log, ckpt, infos: dict) -> int:
    """Index of the segment where scanning starts; raises _Offline on damage."""
    if ckpt is None:
        return 0
    bases = [s.base_offset for s in lg.segments]
    if ckpt.rp_segment not in bases:
        if ckpt.rp_segment < bases[0] and ckpt.rp_position == 0:
            lg._rp = (bases[0], bases[0], 0)
            return 0
        raise _Offline(f"segment {ckpt.rp_segment:020d}.log holding the recovery point "
                       f"(offset {ckpt.recovery_point}) is missing")
    i = bases.index(ckpt.rp_segment)
    for seg in lg.segments[:i]:
        info = infos.get(seg.base_offset)
        if info is not None and info.size != seg.size:
            raise _Offline(f"{seg.path} is {seg.size} bytes but {info.size} were flushed "
                           f"(byte {min(seg.size, info.size)}, offset up to {info.next_offset})")
    seg = lg.segments[i]
    if seg.size < ckpt.rp_position:
        raise _Offline(f"{seg.path} is {seg.size} bytes, shorter than its flushed length "
                       f"{ckpt.rp_position} (byte {seg.size}, offset {ckpt.recovery_point})")
    return i


def _cut(lg: Log, i: int, position: int, why: str) -> None:
    seg = lg.segments[i]
    dropped = seg.size - position + sum(s.size for s in lg.segments[i + 1:])
    log.warning("%s: recovery truncates %s at byte %d (%s); %d bytes dropped, %d later segment(s)",
                lg.name, seg.path, position, why, dropped, len(lg.segments) - i - 1)
    for later in lg.segments[i + 1:]:
        later.remove()
    del lg.segments[i + 1:]
    seg.truncate(position)


def _drop_from(lg: Log, i: int, expected: int, why: str) -> None:
    """Remove segments i.. (they do not continue the log); keep one segment."""
    log.warning("%s: recovery drops %d segment(s) from %s: %s", lg.name, len(lg.segments) - i,
                lg.segments[i].path, why)
    for later in lg.segments[i:]:
        later.remove()
    del lg.segments[i:]
    if not lg.segments:
        lg.segments.append(Segment.create(lg.directory, expected, lg.files))


def _finish(lg: Log, ckpt, infos: dict, scanned: list[Segment], end: int) -> None:
    for seg in scanned:
        seg.flush()
    for seg in lg.segments[:-1]:
        if seg in scanned or seg.base_offset not in infos:
            nxt = lg.segments[lg.segments.index(seg) + 1].base_offset
            if seg not in scanned:
                seg.max_timestamp = max((h.max_timestamp for _, h in seg.scan(0, seg.size, verify=False)),
                                        default=-1)
            lg._new_infos[seg.base_offset] = ck.SegmentInfo(seg.size, nxt, seg.max_timestamp, -1)
        else:
            seg.max_timestamp = infos[seg.base_offset].max_timestamp
    if end < lg._log_start:  # the log start outlived the data (Kafka: truncateFullyAndStartAt)
        log.warning("%s: log end %d below log start %d after recovery; restarting empty at %d",
                    lg.name, end, lg._log_start, lg._log_start)
        for seg in lg.segments:
            seg.remove()
        lg.segments = [Segment.create(lg.directory, lg._log_start, lg.files)]
        lg.index.clear()
        end = lg._log_start
    lg._leo = lg._flushed = end
    lg._rp = (end, lg.active.base_offset, lg.active.size)
    lg._hw = end if lg.auto_hw else min(ckpt.high_watermark if ckpt else 0, end)
    lg.epochs = [(e, s) for e, s in lg.epochs if s < end]
    lg._store_epochs()
    if lg.active.size and lg.active.created_ms < 0:
        lg.active.created_ms = now_ms()
    if ckpt is None or not _index_complete(lg):
        lg._locator.rebuild_index()
    lg._max_ts_so_far = max(lg.index.last_time, *(s.max_timestamp for s in lg.segments))
    lg._since_index = lg.config.index_interval_bytes
    lg._checkpoint_locked()
