"""One ``syncfs(2)`` for many logs: the durability of a group commit that
touches many partitions at once (issue 32; docs/architecture.md decision 103).

An fdatasync per partition costs what the partitions touched number: on
this machine 1,000 files with 100 B appended each took 62 ms on 16 threads,
10,000 took 525 ms; one ``syncfs`` of their filesystem took 5.5 and 46 ms
(ext4 writes the dirty pages back and commits its journal once). So when a
group commit has many logs to make durable in one turn, ``SharedSync.flush``
takes each log's ``flush_target`` (what is written so far), issues one
``syncfs`` on the data dir's filesystem, then tells each log that its
target is durable (``Log.flushed_by_barrier``): the same recovery point,
HW and failure handling as its own fsync, in the same order (the point is
taken before the barrier; nothing is marked durable before it returns).

``syncfs`` reports a write-back error of the filesystem since the data dir
was opened (Linux >= 5.8), not which file had it: then every log of the
batch handles it as its fsync failing. A log whose directory is on another
filesystem is not covered (``covers``). Without ``syncfs`` (not Linux)
``available`` is False and the group commit fsyncs each log.
"""

from __future__ import annotations

import ctypes
import os


def load_syncfs():
    """libc's ``syncfs(fd)`` (errno kept), or None where there is none."""
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes, fn.restype = [ctypes.c_int], ctypes.c_int
    return fn


class SharedSync:
    def __init__(self, directory: str) -> None:
        self._syncfs = load_syncfs()
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        self._dev = os.fstat(self._fd).st_dev
        self.syncs = 0  # barriers issued (the metrics' and the tests' count)

    @property
    def available(self) -> bool:
        return self._syncfs is not None

    def covers(self, lg) -> bool:
        """Whether ``lg``'s files are on the data dir's filesystem (asked once
        per log, kept by the log: ``Log.on_device``)."""
        return lg.on_device(self._dev)

    def flush(self, logs) -> list:
        """Make everything written to ``logs`` so far durable with one
        barrier (blocking: a worker thread's job); ``[(log, error | None)]``."""
        targets = [(lg, lg.flush_target()) for lg in logs]
        exc = None
        try:
            self.sync()
        except OSError as failed:
            exc = failed
        out = []
        for lg, target in targets:
            try:
                lg.flushed_by_barrier(target, exc)
                out.append((lg, None))
            except Exception as failed:  # noqa: BLE001 - each log's own outcome
                out.append((lg, failed))
        return out

    def sync(self) -> None:
        """One ``syncfs`` of the filesystem (blocking); raises OSError."""
        self.syncs += 1
        if self._syncfs(self._fd) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"syncfs: {os.strerror(err)}")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
