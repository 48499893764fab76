"""CPU seconds used by this process and all its descendants (Linux ``/proc``):
for a Spark query run in ``local`` mode, the driver, the JVM and every Python
worker. On a shared machine wall times stretch with other load; CPU seconds
stretch far less, so the benchmark reports both.

Counts user + system time of the live processes of the tree plus what their
exited children were charged (``cutime``/``cstime``). A process that exits
between two readings (a Python worker Spark does not reuse) is counted in its
parent's ``cutime`` at the second reading; a worker reused across queries
is counted once per reading, so differences of two readings are the CPU of
what ran in between.
"""

from __future__ import annotations

import os

_TICK = os.sysconf("SC_CLK_TCK")


def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, user + system + children's user + system ticks)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:  # exited while listed
            continue
        out[int(name)] = (int(fields[1]), sum(int(x) for x in fields[11:15]))
    return out


def tree_cpu_seconds(root: "int | None" = None) -> float:
    """CPU seconds of ``root`` (default: this process) and its descendants so far."""
    stats = _stats()
    tree = {root or os.getpid()}
    grew = True
    while grew:
        grew = False
        for pid, (ppid, _) in stats.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return sum(stats[p][1] for p in tree if p in stats) / _TICK
