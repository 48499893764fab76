"""Processes of the cluster bench: etcd and ``logbroker serve`` brokers on
127.0.0.1, and what ``/proc`` says about their CPU.

A *setup* is one of:

- ``single``: one ``logbroker serve`` without ``--etcd`` (the zero-config
  single node; none of the cluster code is imported);
- ``cluster1``: etcd + one broker (``--broker-id 1 --etcd URL``);
- ``cluster3``: etcd + three brokers (ids 1..3), as ``make cluster`` starts
  them (tools/cluster.py: the same etcd command line, default raft ticks).

Ports are free loopback ports (``--port 0`` for a broker's first start, the
same port on a restart), data dirs live in the bench's work dir. Every
process is started here with ``PR_SET_PDEATHSIG`` (it dies with the bench)
and stopped by its PID: SIGTERM, SIGKILL after a timeout; a broker may be
killed with SIGKILL (the failover trials) and started again on its port and
data dir.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time

from bench import ROOT
from logbroker.cli.serve import parse_ready
from bench.broker.server import (
    CLK_TCK,
    LOGBROKER,
    Worker,
    cpu_seconds,
    read_line,
    spawn,
    stop_process,
    system_cpu,
)

HOST = "127.0.0.1"
SETUPS = ("single", "cluster1", "cluster3")
BROKERS = {"single": 1, "cluster1": 1, "cluster3": 3}


@functools.cache
def cluster_tool():
    """tools/cluster.py as a module (the etcd command line and health check
    of ``make cluster``; it is a script, not a package)."""
    spec = importlib.util.spec_from_file_location("logbroker_cluster_tool", ROOT / "tools" / "cluster.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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


def wait_for(predicate, timeout: float, what: str, interval: float = 0.02):
    """Call ``predicate`` until it returns something truthy (returned); raise
    TimeoutError after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not within {timeout:g} s")
        time.sleep(interval)


def log_tail(path: str, chars: int = 2000) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()[-chars:]
    except OSError:
        return ""


class ClusterWorker(Worker):
    """``python -m bench.cluster.worker`` (bench/cluster/worker.py): the broker
    bench's worker protocol (READY, ``go``, one JSON line); ``tell`` writes
    more lines to its stdin (the failover trial's ``kill <t>``)."""

    def __init__(self, spec: dict, log_path: str) -> None:  # not super().__init__: another module
        self.spec, self.log_path = spec, log_path
        with open(log_path, "ab") as log:
            self.proc = spawn([sys.executable, "-m", "bench.cluster.worker", json.dumps(spec)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True,
                              cwd=str(ROOT))

    def tell(self, line: str) -> None:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()


# -- /proc ---------------------------------------------------------------------------------
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


def sample(pids: dict[str, int]) -> dict:
    """CPU seconds of each named process (and of its threads) and the machine's."""
    procs = {}
    for name, pid in pids.items():
        try:
            procs[name] = {"cpu_s": cpu_seconds(pid), "threads": thread_cpu(pid)}
        except OSError:
            procs[name] = {"cpu_s": None, "threads": {}}
    return {"t": time.monotonic(), "procs": procs, **system_cpu()}


def cpu_delta(before: dict, after: dict) -> dict:
    """Per process: CPU seconds used between two samples, and by thread group."""
    out = {}
    for name, b in before["procs"].items():
        a = after["procs"].get(name)
        if a is None or a["cpu_s"] is None or b["cpu_s"] is None:
            continue
        threads = {t: round(a["threads"].get(t, 0.0) - b["threads"].get(t, 0.0), 3)
                   for t in set(a["threads"]) | set(b["threads"])}
        out[name] = {"cpu_s": round(a["cpu_s"] - b["cpu_s"], 3),
                     "threads": {t: v for t, v in threads.items() if v > 0}}
    return out


def py_spy_dump(pid: int) -> str:
    """``py-spy dump`` of a process's Python threads (bounded), or why not."""
    from bench.broker.profiling import find_py_spy

    tool = find_py_spy()
    if tool is None:
        return "py-spy not installed: no stacks (pip install py-spy)"
    try:
        out = subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
        return out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"py-spy dump failed: {exc}"


# -- processes -----------------------------------------------------------------------------
class Etcd:
    """A one-member etcd on two free loopback ports, data in ``data_dir``;
    default raft ticks, like ``make cluster``."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.log_path = data_dir + ".log"
        self.port = 0
        self.proc: "subprocess.Popen | None" = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self, timeout: float = 30.0) -> "Etcd":
        tool = cluster_tool()
        for attempt in range(3):
            self.port, peer = free_ports(2)
            with open(self.log_path, "ab") as log:
                self.proc = spawn(tool.etcd_command(self.data_dir, self.port, peer),
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=tool.etcd_env())
            try:
                wait_for(lambda: tool.etcd_healthy(self.url, 0.5) or self.proc.poll() is not None, timeout,
                         "etcd healthy")
            except TimeoutError:
                pass
            if self.proc.poll() is None and tool.etcd_healthy(self.url, 0.5):
                return self
            self.stop()
            if "address already in use" not in log_tail(self.log_path) or attempt == 2:
                raise RuntimeError(f"etcd did not start; {self.log_path}:\n{log_tail(self.log_path)}")
        raise AssertionError("unreachable")

    def stop(self, timeout: float = 15.0) -> None:
        stop_process(self.proc, timeout)
        self.proc = None


class Broker:
    """``logbroker serve --host 127.0.0.1 --port P --data-dir D [--broker-id I --etcd URL]``."""

    def __init__(self, broker_id: int, data_dir: str, etcd_url: "str | None") -> None:
        self.id, self.data_dir, self.etcd_url = broker_id, data_dir, etcd_url
        self.log_path = data_dir + ".log"
        self.port = 0
        self.proc: "subprocess.Popen | None" = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def launch(self) -> None:
        args = [LOGBROKER, "serve", "--data-dir", self.data_dir, "--host", HOST, "--port", str(self.port),
                "--log-level", "warning"]
        if self.etcd_url:
            args += ["--broker-id", str(self.id), "--etcd", self.etcd_url]
        with open(self.log_path, "ab") as log:
            self.proc = spawn(args, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, text=True)

    def ready(self, timeout: float) -> None:
        """Wait for the ``logbroker listening on`` line (a cluster broker prints
        it once registered in etcd)."""
        line = read_line(self.proc, timeout)
        ready = parse_ready(line)
        if ready is None:
            self.kill()
            raise RuntimeError(f"broker {self.id} did not start: {line!r}; {self.log_path}:\n"
                               f"{log_tail(self.log_path)}")
        self.port = ready[1]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL to its PID (a crash: nothing flushed, its lease left to expire)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
            stop_process(self.proc)  # closes its pipes
            self.proc = None

    def stop(self, timeout: float = 30.0) -> "int | None":
        code = stop_process(self.proc, timeout)
        self.proc = None
        return code


class Setup:
    """One setup's processes (``SETUPS``), in ``workdir/<name>``."""

    def __init__(self, kind: str, workdir: str) -> None:
        if kind not in SETUPS:
            raise ValueError(kind)
        self.kind = kind
        self.dir = os.path.join(workdir, kind)
        os.makedirs(self.dir, exist_ok=True)
        self.etcd = None if kind == "single" else Etcd(os.path.join(self.dir, "etcd"))
        self.brokers: dict[int, Broker] = {}
        self.exit_codes: dict[str, "int | None"] = {}
        self.hung: dict[str, str] = {}  # broker -> its threads' stacks when it did not stop in time
        self.start_s = self.stop_s = 0.0

    @property
    def clustered(self) -> bool:
        return self.etcd is not None

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def live_bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values() if b.alive())

    def pids(self) -> dict[str, int]:
        out = {f"broker-{i}": b.pid for i, b in self.brokers.items() if b.alive()}
        if self.etcd is not None and self.etcd.proc is not None:
            out["etcd"] = self.etcd.pid
        return out

    def start(self, timeout: float = 60.0) -> "Setup":
        began = time.monotonic()
        try:
            if self.etcd is not None:
                self.etcd.start(timeout)
            url = self.etcd.url if self.etcd is not None else None
            for i in range(1, BROKERS[self.kind] + 1):
                self.brokers[i] = Broker(i, os.path.join(self.dir, f"broker-{i}"), url)
                self.brokers[i].launch()
            for b in self.brokers.values():
                b.ready(timeout)
            if self.clustered:
                self.wait_registered(timeout)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - began
        return self

    def log_tails(self, chars: int = 3000) -> str:
        """The end of every process's log (for an error message: the work dir goes)."""
        logs = [(f"broker {i}", b.log_path) for i, b in self.brokers.items()]
        logs += [("etcd", self.etcd.log_path)] if self.etcd is not None else []
        return "\n".join(f"--- {name} ({path}):\n{log_tail(path, chars)}" for name, path in logs)

    def wait_registered(self, timeout: float) -> None:
        """Until a broker's metadata lists every live broker and a controller."""
        from logbroker import Admin

        want = {i for i, b in self.brokers.items() if b.alive()}
        with Admin(self.live_bootstrap(), request_timeout_ms=5_000) as admin:
            def registered() -> bool:
                desc = admin.describe_cluster()
                return {b.id for b in desc.brokers if b.live} >= want and desc.controller >= 0

            wait_for(registered, timeout, "every broker registered", 0.05)

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """Start broker ``i`` again on its port and data dir (after a kill)."""
        b = self.brokers[i]
        b.launch()
        b.ready(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """The brokers (SIGTERM by PID, all at once), then etcd; exit codes kept.
        A broker still running ``timeout`` s after its SIGTERM has its stacks
        dumped (``py-spy dump``, if installed) into ``hung`` and gets SIGKILL."""
        began = time.monotonic()
        for b in self.brokers.values():
            if b.alive():
                b.proc.send_signal(signal.SIGTERM)  # once: a second one could end a clean exit
        for i, b in self.brokers.items():
            if b.proc is not None:
                try:
                    b.proc.wait(timeout=max(timeout - (time.monotonic() - began), 0.1))
                except subprocess.TimeoutExpired:
                    self.hung[f"broker-{i}"] = py_spy_dump(b.pid)  # where its shutdown hangs
                    os.kill(b.pid, signal.SIGKILL)
                self.exit_codes[f"broker-{i}"] = b.stop(timeout)
        self.stop_s = time.monotonic() - began
        if self.etcd is not None and self.etcd.proc is not None:
            self.etcd.stop()
