"""Processes of the broker benchmark: a real ``logbroker serve`` on 127.0.0.1
with ``--port 0``, worker processes (``bench.broker.worker``), and what
``/proc`` says about them (CPU seconds, peak RSS).

Only processes started here are stopped, by their PID: SIGTERM, then SIGKILL
after a timeout. Children also get SIGKILL if the bench process dies
(``PR_SET_PDEATHSIG``), so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import time

from bench import ROOT
from logbroker.cli.serve import parse_ready

LOGBROKER = os.path.join(os.path.dirname(sys.executable), "logbroker")
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def spawn(args: list[str], **kwargs) -> subprocess.Popen:
    return subprocess.Popen(args, preexec_fn=_die_with_parent if sys.platform == "linux" else None,
                            **kwargs)


def stop_process(proc: "subprocess.Popen | None", timeout: float = 15.0) -> "int | None":
    """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns the exit code."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass
    return proc.returncode


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of ``proc``'s stdout within ``timeout`` s ('' on EOF or timeout)."""
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return ""
            if sel.select(timeout=min(left, 1.0)):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return proc.stdout.readline()
    finally:
        sel.close()


# -- /proc ---------------------------------------------------------------------------------
def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, all its threads (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14 and 15 of stat(5)


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
    """A ``kB`` field of ``/proc/<pid>/status`` (VmHWM, VmRSS)."""
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


# -- the broker ----------------------------------------------------------------------------
class BrokerServer:
    """``logbroker serve --host 127.0.0.1 --port 0 --data-dir DIR [--flush ...]``."""

    def __init__(self, data_dir: str, flush: str = "fsync", extra_args: tuple = ()) -> None:
        """``extra_args``: more ``logbroker serve`` arguments (e.g. ``--config FILE``)."""
        self.data_dir, self.flush, self.extra_args = data_dir, flush, tuple(extra_args)
        self.log_path = data_dir + ".log"
        self.proc: "subprocess.Popen | None" = None
        self.port = 0
        self.exit_code: "int | None" = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerServer":
        args = [LOGBROKER, "serve", "--data-dir", self.data_dir, "--host", "127.0.0.1",
                "--port", "0", "--log-level", "warning"]
        if self.flush != "fsync":
            args += ["--flush", self.flush]
        args += list(self.extra_args)
        with open(self.log_path, "ab") as log:
            self.proc = spawn(args, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                              text=True)
        line = read_line(self.proc, timeout)
        ready = parse_ready(line)
        if ready is None:
            self.stop()
            raise RuntimeError(f"broker did not start: {line!r}; log:\n{self.log()[-2000:]}")
        host, self.port = ready
        if host != "127.0.0.1":
            self.stop()
            raise RuntimeError(f"broker listens on {host}, not 127.0.0.1")
        return self

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def sample(self) -> dict:
        return {"cpu_s": cpu_seconds(self.pid), "rss_kib": status_kib(self.pid, "VmRSS"),
                "hwm_kib": status_kib(self.pid, "VmHWM"), **system_cpu()}

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> "int | None":
        """SIGTERM (clean shutdown: fsync, checkpoint), SIGKILL after ``timeout`` s."""
        if self.proc is not None:
            self.exit_code = stop_process(self.proc, timeout)
            self.proc = None
        return self.exit_code

    def __enter__(self) -> "BrokerServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# -- workers -------------------------------------------------------------------------------
class WorkerError(RuntimeError):
    pass


class Worker:
    """One ``python -m bench.broker.worker`` process: set up, print READY, wait for "go"
    on stdin, run the timed section, print one JSON line."""

    def __init__(self, spec: dict, log_path: str) -> None:
        self.spec, self.log_path = spec, log_path
        with open(log_path, "ab") as log:
            self.proc = spawn([sys.executable, "-m", "bench.broker.worker", json.dumps(spec)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                              cwd=str(ROOT))

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout: float) -> None:
        line = read_line(self.proc, timeout)
        if line.strip() != "READY":
            self._fail(f"worker {self.spec['mode']} not ready ({line.strip()!r})")

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float) -> dict:
        line = read_line(self.proc, timeout)
        try:
            out = json.loads(line)
        except ValueError:
            self._fail(f"worker {self.spec['mode']} gave no result within {timeout:.0f} s "
                       f"({line.strip()[:200]!r})")
        if "error" in out:
            self._fail(f"worker {self.spec['mode']} failed: {out['error']}")
        return out

    def _fail(self, message: str) -> None:
        stop_process(self.proc, 5)
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                err = fh.read()[-3000:]
        except OSError:
            err = ""
        raise WorkerError(f"{message}\n{err}")

    def stop(self, timeout: float = 15.0) -> None:
        """Let the worker exit by itself (it closes its client after its
        result), else SIGTERM, then SIGKILL."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        stop_process(self.proc, timeout)
