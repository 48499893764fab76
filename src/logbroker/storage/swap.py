"""The on-disk protocol that replaces sealed segments by their compacted
version, crash-safe at every step (Kafka's .cleaned -> .swap -> .log).

A group of consecutive sealed segments with bases ``b1 < ... < bk``
covering offsets ``[b1, end)`` (``end`` is the base of the segment after
the group) is replaced by one file of base ``b1``:

1. ``<b1>-<end>.cleaned`` is written and fsynced (no lock held; appends and
   fetches go on). A crash now: the loader deletes the ``.cleaned`` file.
2. ``.cleaned`` is renamed ``<b1>-<end>.swap`` and the directory fsynced:
   the commit point. From here a crash is finished by the loader
   (``recover_swaps``): every ``.log`` of base in ``[b1, end)`` goes and the
   ``.swap`` becomes ``<b1>.log``.
3. The LMDB rows of the range (segment summaries, offset index) are
   replaced in one transaction.
4. Each old ``.log`` is renamed ``.log.c<n>.deleted`` (readers that hold it
   keep reading it; it is removed after ``file_delete_delay_ms``, as
   retention's are), then ``.swap`` is renamed ``<b1>.log``; directory
   fsynced.

Steps 2-4 run under the Log's lock (a few renames and one LMDB commit).
``pause_point`` is a test hook: with ``LOGBROKER_TEST_COMPACTION_PAUSE``
naming a step, the process prints ``compaction paused at <step>`` on
stdout and waits there to be killed (the crash tests); unset, it does
nothing.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from dataclasses import dataclass

from . import checkpoints as ck
from .cleaner_state import CleanerState, store_state
from .index import PartitionIndex
from .metastore import PID, PID_U64, MetaStore, delete_prefix
from .segment import Segment, fsync_dir, parse_segment_name, segment_name
from .segments import Segments

log = logging.getLogger(__name__)
CLEANED, SWAP = ".cleaned", ".swap"
PAUSE_ENV = "LOGBROKER_TEST_COMPACTION_PAUSE"
_serial = itertools.count(1)


def pause_point(step: str) -> None:
    """Test hook (see the module docstring); a no-op unless the environment asks."""
    if os.environ.get(PAUSE_ENV) == step:
        print(f"compaction paused at {step}", flush=True)
        threading.Event().wait()


def group_name(base: int, end: int, suffix: str) -> str:
    return f"{base:020d}-{end:020d}{suffix}"


def parse_group_name(name: str) -> "tuple[int, int, str] | None":
    """``(base, end, suffix)`` of a ``.cleaned`` / ``.swap`` name, else None."""
    for suffix in (CLEANED, SWAP):
        if name.endswith(suffix):
            stem = name[:-len(suffix)]
            first, sep, second = stem.partition("-")
            if sep and len(first) == len(second) == 20 and first.isdigit() and second.isdigit():
                return int(first), int(second), suffix
    return None


class CleanedWriter:
    """Step 1: the ``.cleaned`` file of a group, written in pieces. Not
    thread-safe (the compactor owns it); ``abandon`` removes it."""

    def __init__(self, directory: str, base: int, end: int) -> None:
        self.directory, self.base, self.end = directory, base, end
        self.path = os.path.join(directory, group_name(base, end, CLEANED))
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        self.size = 0

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = os.pwrite(self._fd, view, self.size)
            self.size += n
            view = view[n:]

    def finish(self) -> None:
        """fsync and close the file (the end of step 1)."""
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1
        pause_point("cleaned")

    def abandon(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def commit(writer: CleanedWriter) -> str:
    """Step 2: ``.cleaned`` -> ``.swap``, durable; returns the swap path."""
    swap = os.path.join(writer.directory, group_name(writer.base, writer.end, SWAP))
    os.rename(writer.path, swap)
    fsync_dir(writer.directory)
    pause_point("swap")
    return swap


def finish(swap: str, base: int, old: list[Segment]) -> None:
    """Step 4: the old segments renamed ``.deleted`` (each Segment's path
    follows), the swap file renamed ``<base>.log``; durable on return."""
    directory = os.path.dirname(swap)
    pause_point("indexed")
    for seg in old:
        seg.mark_deleted(f".c{next(_serial)}")
    pause_point("renamed")
    os.rename(swap, os.path.join(directory, segment_name(base)))
    fsync_dir(directory)
    pause_point("done")


def recover_swaps(directory: str, entries: list[str]) -> list[tuple[int, int]]:
    """At load, before the segments are listed: delete every ``.cleaned``
    file (step 1 never committed) and finish every ``.swap`` (step 2 did):
    the ``.log`` files of its range are removed and it becomes the segment
    of its base. ``entries``: the directory's listing (the loader's).
    Returns the ``(base, end)`` ranges finished, whose LMDB rows the loader
    must rebuild (the directory changed: list it again)."""
    done = []
    for entry in sorted(entries):
        parsed = parse_group_name(entry)
        if parsed is None:
            continue
        base, end, suffix = parsed
        path = os.path.join(directory, entry)
        if suffix == CLEANED:
            log.warning("%s: removing unfinished compaction output %s", directory, entry)
            os.unlink(path)
            continue
        for other in os.listdir(directory):
            seg_base = parse_segment_name(other)
            if seg_base is not None and base <= seg_base < end:
                os.unlink(os.path.join(directory, other))
        os.rename(path, os.path.join(directory, segment_name(base)))
        log.warning("%s: finished an interrupted compaction swap of offsets [%d, %d)",
                    directory, base, end)
        done.append((base, end))
    if done:
        fsync_dir(directory)
    return done



@dataclass(frozen=True)
class Cleaned:
    """A group's compacted file, written and fsynced (step 1), and what the
    swap needs: the group as read (segments, sizes, the log's cut count),
    the new segment's offset index entries ``(offset, segment, position)``
    and max timestamp (-1 when empty)."""

    group: tuple[Segment, ...]
    sizes: tuple[int, ...]
    writer: CleanedWriter
    entries: tuple[tuple[int, int, int], ...]
    max_timestamp: int


class SwapFailed(Exception):
    """A swap failed after its commit point: the loader finishes it at the
    next start; the partition must serve nothing meanwhile."""


def install(segments: Segments, index: PartitionIndex, meta: MetaStore, pid: int,
            cleaned: "Cleaned | None", state: "CleanerState | None", cuts: int,
            deadline: int) -> bool:
    """Steps 2-4 (the caller holds the Log's lock). False, the file
    abandoned and nothing changed, when the log is no longer as the
    compactor read it (``cuts`` truncations or resets, the group's
    segments and sizes). ``state`` is stored in the same LMDB transaction
    (alone when ``cleaned`` is None). Raises OSError if the commit fails
    (nothing changed) and SwapFailed after it."""
    if cleaned is None:
        if segments.cuts != cuts:
            return False
        with meta.write() as txn:
            store_state(txn, meta, pid, state)
        return True
    group, w = list(cleaned.group), cleaned.writer
    if segments.cuts != cuts or not segments.holds(group, list(cleaned.sizes)):
        w.abandon()
        return False
    try:
        swap = commit(w)
    except OSError:
        w.abandon()
        raise
    try:
        with meta.write() as txn:
            delete_prefix(txn, meta.db("segs"), PID.pack(pid), start=PID_U64.pack(pid, w.base),
                          stop=PID_U64.pack(pid, w.end))
            ck.store_segment_info(txn, meta, pid, w.base,
                                  ck.SegmentInfo(w.size, w.end, cleaned.max_timestamp, -1))
            index.replace_range(txn, w.base, w.end, cleaned.entries)
            if state is not None:
                store_state(txn, meta, pid, state)
        finish(swap, w.base, group)
        new = Segment(w.directory, w.base, group[0].files, size=w.size,
                      max_timestamp=cleaned.max_timestamp)
        segments.replace(group, new, deadline)
    except Exception as exc:  # noqa: BLE001 - past the commit point every failure is fatal
        raise SwapFailed(f"compaction swap of {swap} failed: {exc}") from exc
    return True
