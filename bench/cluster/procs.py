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

import json
import os
import signal
import subprocess
import sys
import time

from bench import ROOT
from bench.broker.profiling import find_py_spy
from bench.broker.server import Worker
from bench.common.procfs import cpu_seconds, system_cpu, thread_cpu
from bench.common.procs import BrokerProcess, EtcdProcess, log_tail, spawn, wait_until

SETUPS = ("single", "cluster1", "cluster3")
BROKERS = {"single": 1, "cluster1": 1, "cluster3": 3}


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
    tool = find_py_spy()
    if tool is None:
        return "py-spy not installed: no stacks (pip install py-spy)"
    try:
        out = subprocess.run([tool, "dump", "--pid", str(pid)], capture_output=True, text=True, timeout=30)
        return out.stdout + out.stderr
    except (OSError, subprocess.SubprocessError) as exc:
        return f"py-spy dump failed: {exc}"


# -- processes -----------------------------------------------------------------------------
def etcd(data_dir: str) -> EtcdProcess:
    """A one-member etcd on two free loopback ports, data in ``data_dir``;
    default raft ticks, like ``make cluster``."""
    return EtcdProcess(data_dir, name="logbroker", fast=False, die_with_parent=True)


def broker(broker_id: int, data_dir: str, etcd_url: "str | None") -> BrokerProcess:
    """``logbroker serve --host 127.0.0.1 --port P --data-dir D --log-level warning
    [--broker-id I --etcd URL]``; ``wait_ready`` waits for its ready line (a
    cluster broker prints it once registered in etcd)."""
    cluster = ["--broker-id", str(broker_id), "--etcd", etcd_url] if etcd_url else []
    return BrokerProcess(data_dir, "--log-level", "warning", *cluster, die_with_parent=True,
                         raise_on_hang=False)


class Setup:
    """One setup's processes (``SETUPS``), in ``workdir/<name>``."""

    def __init__(self, kind: str, workdir: str) -> None:
        if kind not in SETUPS:
            raise ValueError(kind)
        self.kind = kind
        self.dir = os.path.join(workdir, kind)
        os.makedirs(self.dir, exist_ok=True)
        self.etcd = None if kind == "single" else etcd(os.path.join(self.dir, "etcd"))
        self.brokers: dict[int, BrokerProcess] = {}
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
                self.brokers[i] = broker(i, os.path.join(self.dir, f"broker-{i}"), url)
                self.brokers[i].launch()
            for b in self.brokers.values():
                b.wait_ready(timeout)
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

            wait_until(registered, timeout, "every broker registered", 0.05)

    def restart(self, i: int, timeout: float = 60.0) -> None:
        """Start broker ``i`` again on its port and data dir (after a kill)."""
        b = self.brokers[i]
        b.launch()
        b.wait_ready(timeout)

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
