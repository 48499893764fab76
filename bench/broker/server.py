"""The broker benchmark's processes: a real ``logbroker serve`` on 127.0.0.1
with ``--port 0`` (``BrokerServer``, a ``bench.common.procs.BrokerProcess``)
and worker processes (``bench.broker.worker``); what ``/proc`` says about
them is in ``bench.common.procfs``.

Only processes started here are stopped, by their PID: SIGTERM, then SIGKILL
after a timeout. Children also get SIGKILL if the bench process dies
(``PR_SET_PDEATHSIG``), so an interrupted run leaves nothing behind.
"""

from __future__ import annotations

import json
import subprocess
import sys

from bench import ROOT
from bench.common.procfs import cpu_seconds, status_kib, system_cpu
from bench.common.procs import HOST, BrokerProcess, log_tail, read_line, spawn, stop_process


# -- the broker ----------------------------------------------------------------------------
class BrokerServer(BrokerProcess):
    """``logbroker serve --host 127.0.0.1 --port 0 --data-dir DIR --log-level warning
    [--flush ...]``; ``stop`` (also on leaving a ``with``) SIGKILLs a broker that
    hangs and reports its exit code."""

    def __init__(self, data_dir: str, flush: str = "fsync", extra_args: tuple = ()) -> None:
        """``extra_args``: more ``logbroker serve`` arguments (e.g. ``--config FILE``)."""
        super().__init__(data_dir, "--log-level", "warning",
                         *(["--flush", flush] if flush != "fsync" else []), *extra_args,
                         die_with_parent=True, raise_on_hang=False)
        self.flush, self.extra_args = flush, tuple(extra_args)

    def start(self, timeout: float = 30.0) -> "BrokerServer":
        super().start(timeout)
        if self.host != HOST:
            self.stop()
            raise RuntimeError(f"broker listens on {self.host}, not {HOST}")
        return self

    def sample(self) -> dict:
        return {"cpu_s": cpu_seconds(self.pid), "rss_kib": status_kib(self.pid, "VmRSS"),
                "hwm_kib": status_kib(self.pid, "VmHWM"), **system_cpu()}

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
        raise WorkerError(f"{message}\n{log_tail(self.log_path, 3000)}")

    def stop(self, timeout: float = 15.0) -> None:
        """Let the worker exit by itself (it closes its client after its
        result), else SIGTERM, then SIGKILL."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        stop_process(self.proc, timeout)
