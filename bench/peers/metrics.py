"""What a server costs while a workload runs: CPU seconds and peak RSS of its
process tree (``/proc``), and bytes on disk under its data dir.

``Probe(pid, data_dir)`` covers the process and its descendants found at each
call (RabbitMQ's start script runs ``beam.smp`` as a child); CPU counts
reaped children too. ``around(fn)``
runs ``fn()`` and returns its result with ``cpu_s`` (server CPU used while it
ran), ``peak_rss_mib`` (the sum of the tree's VmHWM, reset first) and
``disk_bytes`` (allocated bytes under the data dir afterwards) added.
"""

from __future__ import annotations

import os
from typing import Callable

from bench.common.procfs import CLK_TCK, reset_peak, status_kib


def descendants(pid: int) -> list[int]:
    """``pid`` and every live descendant (``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo and len(out) < 10_000:
        p = todo.pop()
        out.append(p)
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                with open(f"/proc/{p}/task/{t}/children") as fh:
                    todo.extend(int(x) for x in fh.read().split())
            except OSError:
                pass
    return out


def cpu_with_reaped(pid: int) -> float:
    """utime + stime of ``pid`` plus cutime + cstime (its reaped children), so
    the tree's sum does not drop when a child (Redis's AOF rewrite) exits."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / CLK_TCK  # stat(5) fields 14-17


def disk_bytes(path: str) -> int:
    """Allocated bytes (``st_blocks * 512``) of every file under ``path``."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                pass
    return total


class Probe:
    def __init__(self, pid: int, data_dir: str) -> None:
        self.pid, self.data_dir = pid, data_dir

    def _each(self, fn: Callable[[int], float]) -> float:
        total = 0.0
        for p in descendants(self.pid):
            try:
                total += fn(p)
            except (OSError, ValueError, IndexError):
                pass  # exited between the listing and the read
        return total

    def cpu_s(self) -> float:
        return self._each(cpu_with_reaped)

    def peak_rss_mib(self) -> float:
        return self._each(lambda p: status_kib(p, "VmHWM")) / 1024

    def reset_peaks(self) -> None:
        self._each(lambda p: float(reset_peak(p)))

    def disk(self) -> int:
        return disk_bytes(self.data_dir)

    def around(self, fn: Callable[[], dict]) -> dict:
        self.reset_peaks()
        cpu0, disk0 = self.cpu_s(), self.disk()
        out = dict(fn())
        out.update(cpu_s=self.cpu_s() - cpu0, peak_rss_mib=self.peak_rss_mib(),
                   disk_bytes=self.disk(), disk_before=disk0)
        return out
