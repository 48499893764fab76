"""What ``/proc`` (Linux) says about a process and the machine: CPU seconds
of a process and of its threads, the machine's busy and stolen CPU, and the
``kB`` fields of a process's status (VmRSS, VmHWM)."""

from __future__ import annotations

import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of a process by thread group: ``main`` (the thread whose id
    is the PID: a broker's event loop) and the others by their kernel name
    (``comm``: the I/O pool and etcd client threads share the process name
    unless their library renames them)."""
    out: dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                head, rest = fh.read().rsplit(")", 1)
        except OSError:
            continue  # the thread ended meanwhile
        fields = rest.split()
        name = "main" if tid == str(pid) else "thread:" + head.split("(", 1)[1]
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def system_cpu() -> dict:
    """Machine-wide CPU seconds from ``/proc/stat``: busy (all but idle and
    iowait) and steal (taken by the hypervisor)."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    steal = fields[7] if len(fields) > 7 else 0
    busy = sum(fields[:8]) - idle - steal  # guest time is already inside user
    return {"busy_s": busy / CLK_TCK, "steal_s": steal / CLK_TCK}


def status_kib(pid: int, key: str) -> int:
    """A ``kB`` field of ``/proc/<pid>/status`` (VmHWM, VmRSS); 0 when absent."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def reset_peak(pid: int) -> bool:
    """Reset VmHWM to the current RSS (``clear_refs`` 5, Linux >= 4.0)."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as fh:
            fh.write("5")
        return True
    except OSError:
        return False
