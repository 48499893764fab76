"""Processes of the benchmarks and the tests: real ``logbroker serve`` and
``etcd`` processes on 127.0.0.1, free loopback ports, bounded waits for a
ready line or a condition, and stopping by PID. The one copy of these
helpers: the benches import it as ``bench.common.procs`` (``python -m
bench.<name>`` from the checkout root), the tests through
``tests.support.fixtures`` (pytest puts the checkout root on ``sys.path``).

Only processes started here are stopped, each by its own PID: SIGTERM and a
bounded wait, SIGKILL after it (``stop_process``), or SIGKILL at once, a
crash (``kill_process``). With ``die_with_parent`` a child also gets SIGKILL
when the thread that started it ends (``PR_SET_PDEATHSIG``), so an
interrupted bench leaves nothing behind; the tests start brokers from worker
threads too and leave it off. Every wait is bounded.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time

from bench import ROOT
from logbroker.cli.serve import parse_ready

HOST = "127.0.0.1"
LOGBROKER = os.path.join(os.path.dirname(sys.executable), "logbroker")  # the venv's console script


# -- waits and ports -----------------------------------------------------------------------
class WaitTimeout(AssertionError, TimeoutError):
    """``wait_until`` gave up: an AssertionError for a test, a TimeoutError for a bench."""


def wait_until(predicate, timeout: float = 10.0, what: str = "condition", interval: float = 0.01):
    """Call ``predicate`` every ``interval`` s until it returns something truthy
    (returned); raise WaitTimeout after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{what} not reached within {timeout:g} s")
        time.sleep(interval)


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports nobody listens on (bound together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((HOST, 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def log_tail(path: str, chars: int = 2000) -> str:
    """The last ``chars`` characters of a log file ('' when it cannot be read)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-chars:]
    except OSError:
        return ""


# -- any process ---------------------------------------------------------------------------
def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def spawn(args: list[str], *, die_with_parent: bool = True, **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)``; with ``die_with_parent`` (Linux) the
    child gets SIGKILL when the thread that started it ends."""
    hook = _die_with_parent if die_with_parent and sys.platform == "linux" else None
    return subprocess.Popen(args, preexec_fn=hook, **kwargs)


def read_line(proc: subprocess.Popen, timeout: float) -> str:
    """One line of ``proc``'s stdout within ``timeout`` s ('' on EOF, on timeout,
    or once the process has exited without writing one). A line that the
    previous ``readline`` already buffered is not seen: read it with
    ``readline``."""
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
                return proc.stdout.readline() if sel.select(timeout=0) else ""
    finally:
        sel.close()


def _close_pipes(proc: subprocess.Popen) -> None:
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            try:
                stream.close()
            except OSError:
                pass


def stop_process(proc: "subprocess.Popen | None", timeout: float = 15.0, *,
                 raise_on_hang: bool = False) -> "int | None":
    """SIGTERM to ``proc``'s PID, wait up to ``timeout`` s, then SIGKILL; its
    pipes closed. Returns the exit code (None for no process). With
    ``raise_on_hang`` a process that needed the SIGKILL raises
    ``subprocess.TimeoutExpired`` (after it is gone)."""
    if proc is None:
        return None
    try:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=timeout)
                if raise_on_hang:
                    raise
    finally:
        _close_pipes(proc)
    return proc.returncode


def kill_process(proc: "subprocess.Popen | None") -> None:
    """SIGKILL to ``proc``'s PID (a crash: nothing flushed), reaped, pipes closed."""
    if proc is not None:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        _close_pipes(proc)


# -- the broker ----------------------------------------------------------------------------
class BrokerProcess:
    """``logbroker serve --data-dir DIR --host 127.0.0.1 --port PORT [extra...]
    [--config DIR.toml]``: ``port`` 0 (a free one) until it is ready, then the
    ``host`` and ``port`` it listens on, kept for a restart on the same data dir. Its stderr
    goes to ``DIR.log``; stdout is a pipe for the ready line. ``config``: a
    dict written as ``DIR.toml`` (a dict value: a table, e.g. ``{"storage": {...}}``). ``raise_on_hang``: ``stop`` raises when
    the broker needed a SIGKILL (a test fails on a shutdown that hangs)."""

    def __init__(self, data_dir, *extra: str, config: "dict | None" = None,
                 die_with_parent: bool = False, raise_on_hang: bool = True) -> None:
        self.data_dir = str(data_dir)
        self.extra = list(extra)
        self.die_with_parent, self.raise_on_hang = die_with_parent, raise_on_hang
        self.host, self.port = HOST, 0
        self.proc: "subprocess.Popen | None" = None
        self.exit_code: "int | None" = None  # of the last stop()
        self.config_path = None
        if config:
            self.config_path = self.data_dir + ".toml"
            tables = {k: v for k, v in config.items() if isinstance(v, dict)}
            with open(self.config_path, "w") as fh:
                for name, table in [(None, config), *tables.items()]:
                    if name is not None:
                        fh.write(f"[{name}]\n")
                    for key, value in table.items():
                        if not isinstance(value, dict):
                            fh.write(f"{key} = {value!r}\n".replace("'", '"')
                                     .replace("True", "true").replace("False", "false"))
        self.log_path = self.data_dir + ".log"

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    address = bootstrap

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        return self.launch().wait_ready(timeout)

    def launch(self) -> "BrokerProcess":
        """Start the process without waiting for it (``wait_ready`` does):
        several brokers start side by side, as ``make cluster`` starts them."""
        args = [LOGBROKER, "serve", "--data-dir", self.data_dir, "--host", HOST,
                "--port", str(self.port), *self.extra]
        if self.config_path:
            args += ["--config", self.config_path]
        with open(self.log_path, "ab") as log:
            self.proc = spawn(args, die_with_parent=self.die_with_parent, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=log, text=True)
        return self

    def wait_ready(self, timeout: float = 30.0) -> "BrokerProcess":
        """Wait (bounded) for the launched broker's ready line: its port. A
        cluster broker prints it once registered in etcd."""
        line = read_line(self.proc, timeout)
        ready = parse_ready(line)
        if ready is None:
            self.kill()
            raise RuntimeError(f"broker did not start: {line!r}; {self.log_path}:\n"
                               f"{log_tail(self.log_path, 8000)}")
        self.host, self.port = ready
        return self

    def log(self) -> str:
        return log_tail(self.log_path, 1 << 30)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a clean shutdown: fsync, checkpoint) and wait; SIGKILL after
        ``timeout`` s. The exit code: 0 after a clean shutdown; without a
        running process, the last stop's (0 if none)."""
        if self.proc is not None:
            proc, self.proc = self.proc, None
            try:
                stop_process(proc, timeout, raise_on_hang=self.raise_on_hang)
            finally:
                self.exit_code = proc.returncode
        return self.exit_code or 0

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or checkpointed by the broker."""
        kill_process(self.proc)
        self.proc = None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


# -- etcd ----------------------------------------------------------------------------------
@functools.cache
def cluster_tool():
    """tools/cluster.py as a module (a script, not a package): the etcd command
    line, ``spawn`` and the bounded waits are the same for ``make cluster``,
    the benches and the tests."""
    spec = importlib.util.spec_from_file_location("logbroker_cluster_tool",
                                                  os.path.join(ROOT, "tools", "cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class EtcdProcess:
    """A real one-member ``etcd`` on two free 127.0.0.1 ports (client, peer),
    its data in ``data_dir`` and its output in ``data_dir + ".log"``;
    ``fast`` raft ticks (10 ms heartbeat, 100 ms election: lease TTLs down to
    1 s) or etcd's defaults (as ``make cluster``). ``start`` waits (bounded)
    until ``/health`` says true; a restart after ``stop``/``kill`` keeps the
    ports and the data, so brokers find it at the same ``url``. Stopped by
    PID; ``close`` also deletes the data (etcd preallocates a 64 MB WAL)."""

    def __init__(self, data_dir, *, name: str = "test", fast: bool = True,
                 die_with_parent: bool = False) -> None:
        self.data_dir = str(data_dir)
        self.log_path = self.data_dir + ".log"
        self.name, self.fast, self.die_with_parent = name, fast, die_with_parent
        self.client_port = self.peer_port = 0
        self.proc: "subprocess.Popen | None" = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.client_port}"

    @property
    def address(self) -> tuple[str, int]:
        return (HOST, self.client_port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> "EtcdProcess":
        tool = cluster_tool()
        binary = shutil.which("etcd") or "etcd"
        fresh = self.client_port == 0
        for attempt in range(3 if fresh else 1):
            if fresh:
                self.client_port, self.peer_port = free_ports(2)
            self.proc = tool.spawn(tool.etcd_command(self.data_dir, self.client_port, self.peer_port,
                                                     name=self.name, fast=self.fast, etcd=binary),
                                   self.log_path, env=tool.etcd_env(),
                                   die_with_parent=self.die_with_parent)
            try:
                tool.wait_until_up(self.healthy, self.proc, "etcd", self.log_path, timeout)
                return self
            except tool.StartError as exc:
                self.kill()
                taken = "address already in use" in tool.log_tail(self.log_path, 5)
                if not (fresh and taken and attempt < 2):  # a port taken since free_ports: again
                    raise RuntimeError(str(exc)) from None
        raise AssertionError("unreachable")

    def healthy(self) -> bool:
        return self.client_port != 0 and cluster_tool().etcd_healthy(self.url)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> "int | None":
        """SIGTERM to its own PID and wait (SIGKILL after ``timeout`` s): the exit status."""
        if self.proc is None:
            return None
        try:
            return cluster_tool().stop_all([self.proc], timeout)[0]
        finally:
            self.proc = None

    def kill(self) -> None:
        """SIGKILL to its own PID: a crash."""
        kill_process(self.proc)
        self.proc = None

    def close(self) -> None:
        """Kill it and delete its data dir (the log stays)."""
        self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log(self) -> str:
        return log_tail(self.log_path, 1 << 30)

    def __enter__(self) -> "EtcdProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()
