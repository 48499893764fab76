"""One segment file: ``<20-digit base offset>.log``, a run of record batches.

A segment only knows bytes and positions; the Log above it knows offsets.
Writes go to the end with ``pwritev`` (stamped header + untouched rest of
each batch, no payload copy); reads are ``pread``s; ``flush`` is fdatasync.
Descriptors come from the shared ``FileCache``.
"""

from __future__ import annotations

import os
from typing import Iterator, Sequence

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.walker import scan_file
from .files import FileCache

SUFFIX = ".log"
DELETED_SUFFIX = ".deleted"
_IOV_MAX = 1024
SCAN_CHUNK = 4 << 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SUFFIX}"


def parse_segment_name(name: str) -> "int | None":
    """Base offset of a segment file name, or None if it is not one."""
    stem = name[:-len(SUFFIX)] if name.endswith(SUFFIX) else ""
    return int(stem) if len(stem) == 20 and stem.isdigit() else None


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Segment:
    """A segment file plus what the log knows of it.

    ``size`` is the byte length of valid data (the file is never longer after
    recovery); ``max_timestamp`` is the largest batch max timestamp seen
    (-1 when unknown or empty); ``created_ms`` the wall-clock time of its first
    append (-1 while empty), used to roll on age. ``generation`` counts
    the ``truncate`` calls: bytes below ``size`` change only through one, so
    a reader that remembers what it saw of this segment (kafka/slice_kinds.py)
    compares it; it is bumped before the cut.
    """

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = (
        "base_offset", "created_ms", "directory", "entry_synced", "files", "generation",
        "max_timestamp", "path", "size", "__weakref__"
    )

    def __init__(self, directory: str, base_offset: int, files: FileCache, size: int = 0,
                 max_timestamp: int = -1, created_ms: int = -1) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.path = os.path.join(directory, segment_name(base_offset))
        self.files = files
        self.size = size
        self.max_timestamp = max_timestamp
        self.created_ms = created_ms
        self.generation = 0
        self.entry_synced = True  # False: the directory's entry of this file is not yet durable

    def __repr__(self) -> str:
        return f"Segment({self.path!r}, size={self.size})"

    @classmethod
    def create(cls, directory: str, base_offset: int, files: FileCache, *,
               sync: bool = True) -> "Segment":
        """Create an empty segment file (fails if it exists) and fsync the dir
        (``sync=False``: a new partition's, recorded in LMDB instead)."""
        path = os.path.join(directory, segment_name(base_offset))
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644))
        if sync:
            fsync_dir(directory)
        seg = cls(directory, base_offset, files)
        seg.entry_synced = sync  # else synced by the first flush
        return seg

    def file_size(self) -> int:
        return os.stat(self.path).st_size

    def write(self, buffers: Sequence, nbytes: int) -> None:
        """Append ``buffers`` (bytes-like, ``nbytes`` in all) at ``size``."""
        with self.files.fd(self, self.path) as fd:
            pwritev_all(fd, buffers, self.size, self.size + nbytes)
        self.size += nbytes

    def read(self, position: int, size: int) -> bytes:
        """Up to ``size`` bytes from ``position`` (fewer only at end of file)."""
        with self.files.fd(self, self.path) as fd:
            out = os.pread(fd, size, position)
            while len(out) < size:
                more = os.pread(fd, size - len(out), position + len(out))
                if not more:
                    break
                out += more
            return out

    def flush(self) -> None:
        """fdatasync; the first flush of a segment created unsynced also
        makes its directory entry durable (one fsync of the directory)."""
        with self.files.fd(self, self.path) as fd:
            os.fdatasync(fd)
        if not self.entry_synced:
            fsync_dir(self.directory)
            self.entry_synced = True

    def truncate(self, size: int) -> None:
        """Cut the file to ``size`` bytes and make that durable."""
        self.generation += 1
        with self.files.fd(self, self.path) as fd:
            os.ftruncate(fd, size)
            os.fsync(fd)
        self.size = size

    def discard_after(self, size: int) -> None:
        """Best effort: cut bytes a failed write left past ``size`` (no fsync;
        recovery drops such a tail anyway)."""
        try:
            with self.files.fd(self, self.path) as fd:
                os.ftruncate(fd, size)
        except OSError:
            pass

    def mark_deleted(self, tag: str = "") -> None:
        """Rename to ``<name><tag>.deleted`` (open descriptors keep working;
        a ``tag`` keeps two generations of one base apart: compaction)."""
        new = self.path + tag + DELETED_SUFFIX
        os.rename(self.path, new)
        self.path = new

    def remove(self) -> None:
        self.files.forget(self)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        self.files.forget(self)

    def scan(self, position: int = 0, end: "int | None" = None, *, verify: bool = True,
             chunk: int = SCAN_CHUNK) -> Iterator[tuple[int, fmt.BatchHeader]]:
        """Yield ``(position, header)`` of batches from ``position`` to ``end``
        (default: the file's size), as ``records.walker.scan_file`` walks them:
        silent stop at an incomplete tail, ``CorruptRecordError`` (naming this
        file; ``position`` relative to it) at an invalid batch."""
        end = self.file_size() if end is None else end
        try:
            for pos, header, _ in scan_file(self.read, position, end, verify=verify, window=chunk):
                yield pos, header
        except CorruptRecordError as exc:
            raise CorruptRecordError(f"{self.path} at byte {exc.position}: {exc.message}",
                                     position=exc.position) from None


def pwritev_all(fd: int, buffers: Sequence, pos: int, end: int) -> None:
    """Write ``buffers`` (``end - pos`` bytes) at ``pos``: one ``pwritev`` in
    the common case (no copy of the list), more past ``IOV_MAX`` buffers or
    after a short write. Raises OSError (what was written stays written)."""
    bufs = buffers
    while pos < end:
        chunk = bufs if len(bufs) <= _IOV_MAX else bufs[:_IOV_MAX]
        written = os.pwritev(fd, chunk, pos)
        pos += written
        if pos < end:
            bufs = _advance(list(chunk), written) + list(bufs[len(chunk):])


def _advance(chunk: list, written: int) -> list:
    """The part of ``chunk`` not yet written after a short ``pwritev``."""
    for i, buf in enumerate(chunk):
        n = len(memoryview(buf).cast("B")) if not isinstance(buf, (bytes, bytearray)) else len(buf)
        if written < n:
            return [memoryview(buf).cast("B")[written:]] + chunk[i + 1:]
        written -= n
    return []
