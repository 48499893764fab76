#!/usr/bin/env python3
"""A logbroker cluster on this machine: one etcd and N brokers on 127.0.0.1.

    python tools/cluster.py [--brokers 3] [--base-port 9555] [--data-dir ./data/cluster]
                            [--config broker.toml]

starts ``etcd`` (client port 2379, peer port 2380, data in DATA_DIR/etcd) and
brokers 1..N (``logbroker serve --broker-id I --port BASE_PORT+I-1 --data-dir
DATA_DIR/broker-I --etcd http://127.0.0.1:2379``, and ``--config FILE`` when
given: settings every broker shares, e.g. auth), each with its output in
DATA_DIR/<name>.log; prints every process's address, PID and log file; waits
until all are up (etcd answers /health, a broker's port accepts
connections); then runs until Ctrl-C or SIGTERM, which stop the brokers
(SIGTERM, by PID, all at once) and then etcd. A process that exits on its own
(``kill -9`` a broker to watch a failover) is reported and the others keep
running. Data survives a restart; ``rm -rf DATA_DIR`` starts afresh.

The children run in their own session (a terminal's Ctrl-C reaches only this
script, which stops them in order) and get SIGTERM if this script dies.

Standard library only: ``make cluster`` runs it, and bench/common/procs.py (the
benches' and the tests' etcd) starts etcd with ``etcd_command`` and
``wait_until_up`` from here.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

HOST = "127.0.0.1"


class StartError(Exception):
    """A process did not come up (the message says why and where its log is)."""


# -- etcd ------------------------------------------------------------------------------
def etcd_command(data_dir: str, client_port: int, peer_port: int, *, name: str = "logbroker",
                 fast: bool = False, etcd: str = "etcd") -> list[str]:
    """The command line of a one-member etcd on 127.0.0.1. ``fast``: 10 ms
    raft ticks (heartbeat 10 ms, election 100 ms) for tests: the member
    elects itself at once and lease TTLs down to 1 s are honoured (etcd's
    minimum TTL is 1.5 election timeouts, 2 s with the defaults)."""
    client, peer = f"http://{HOST}:{client_port}", f"http://{HOST}:{peer_port}"
    args = [etcd, "--name", name, "--data-dir", str(data_dir),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"{name}={peer}", "--initial-cluster-state", "new",
            "--logger", "zap", "--log-outputs", "stderr", "--log-level", "warn"]
    if fast:
        args += ["--heartbeat-interval", "10", "--election-timeout", "100"]
    return args


def etcd_env() -> dict[str, str]:
    """This environment without ETCD_* variables (etcd reads every flag from
    them too, and a flag given twice is an error)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("ETCD_")}


def etcd_healthy(url: str, timeout: float = 1.0) -> bool:
    """True when etcd at ``url`` answers ``/health`` with health "true"
    (it has a leader and serves reads)."""
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=timeout) as resp:
            return json.loads(resp.read()).get("health") == "true"
    except (OSError, ValueError, urllib.error.URLError):
        return False


# -- processes ---------------------------------------------------------------------------
def port_open(port: int, host: str = HOST, timeout: float = 0.5) -> bool:
    """True when something accepts TCP connections on host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def log_tail(path: str, lines: int = 20) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return "".join(fh.readlines()[-lines:])
    except OSError:
        return ""


def wait_until_up(check, proc: subprocess.Popen, what: str, log_path: str, timeout: float,
                  cancelled: "threading.Event | None" = None) -> float:
    """Poll ``check()`` until it is true; the seconds that took. Raises
    StartError if ``proc`` exits first, after ``timeout`` seconds, or when
    ``cancelled`` is set."""
    start = time.monotonic()
    deadline = start + timeout
    while not check():
        if proc.poll() is not None:
            raise StartError(f"{what} (pid {proc.pid}) exited ({describe(proc.returncode)}) "
                             f"before it was up; {log_path}:\n{log_tail(log_path)}")
        if time.monotonic() >= deadline:
            raise StartError(f"{what} (pid {proc.pid}) not up within {timeout:g} s; "
                             f"{log_path}:\n{log_tail(log_path)}")
        if cancelled is not None and cancelled.is_set():
            raise StartError(f"stopped while waiting for {what}")
        time.sleep(0.05)  # polling interval; the deadline above bounds the wait
    return time.monotonic() - start


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """preexec_fn: SIGTERM when the parent dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def spawn(args: list[str], log_path: str, env: "dict | None" = None,
          die_with_parent: bool = False) -> subprocess.Popen:
    """Start ``args`` in its own session, stdout and stderr appended to ``log_path``."""
    with open(log_path, "ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} {' '.join(args)}\n".encode())
        log.flush()
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                start_new_session=True,
                                preexec_fn=_die_with_parent if die_with_parent else None)


def stop_all(procs: list[subprocess.Popen], timeout: float = 30.0) -> list["int | None"]:
    """SIGTERM to each of ``procs`` still running (by PID), wait for all up to
    ``timeout`` s, then SIGKILL what is left; the exit statuses."""
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    codes: list["int | None"] = []
    for proc in procs:
        try:
            codes.append(proc.wait(timeout=max(0.0, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
            codes.append(None)
    return codes


# -- the cluster ---------------------------------------------------------------------------
class Member:
    def __init__(self, name: str, address: str, args: list[str], log_path: str, check,
                 env: "dict | None" = None) -> None:
        self.name, self.address, self.args, self.log_path = name, address, args, log_path
        self.check, self.env = check, env
        self.proc: "subprocess.Popen | None" = None
        self.reported = False  # its unexpected exit was reported


class Cluster:
    def __init__(self, brokers: int = 3, base_port: int = 9555, data_dir: str = "./data/cluster",
                 etcd_port: int = 2379, etcd_peer_port: int = 2380, logbroker: "str | None" = None,
                 etcd: str = "etcd", out=sys.stdout, config: "str | None" = None,
                 first_id: int = 1, extra=None) -> None:
        """Brokers ``first_id``..``first_id + brokers - 1``; ``extra(i)``: more
        ``serve`` arguments of broker ``i`` (its own config file, say)."""
        logbroker = logbroker or default_logbroker()
        self.data_dir = data_dir
        self.out = out
        self.etcd_url = f"http://{HOST}:{etcd_port}"
        etcd_dir = os.path.join(data_dir, "etcd")
        self.members = [Member("etcd", self.etcd_url,
                               etcd_command(etcd_dir, etcd_port, etcd_peer_port, etcd=etcd),
                               os.path.join(data_dir, "etcd.log"),
                               lambda: etcd_healthy(self.etcd_url), env=etcd_env())]
        for i in range(first_id, first_id + brokers):
            port = base_port + i - first_id
            self.members.append(Member(
                f"broker {i}", f"{HOST}:{port}",
                [logbroker, "serve", "--broker-id", str(i), "--host", HOST, "--port", str(port),
                 "--data-dir", os.path.join(data_dir, f"broker-{i}"), "--etcd", self.etcd_url,
                 *(["--config", config] if config else []), *(extra(i) if extra else [])],
                os.path.join(data_dir, f"broker-{i}.log"), lambda port=port: port_open(port)))
        self.ports = [etcd_port, etcd_peer_port] + [base_port + i for i in range(brokers)]

    @property
    def bootstrap(self) -> str:
        return ",".join(m.address for m in self.members[1:])

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def start(self, timeout: float = 60.0, cancelled: "threading.Event | None" = None) -> None:
        """Start etcd, wait until it is healthy, start the brokers, wait until
        each accepts connections (``timeout`` s for each wait)."""
        busy = [p for p in self.ports if port_open(p)]
        if busy:
            raise StartError(f"port(s) {', '.join(map(str, busy))} on {HOST} already in use "
                             "(another cluster running?)")
        os.makedirs(self.data_dir, exist_ok=True)
        began = time.monotonic()
        etcd, brokers = self.members[0], self.members[1:]
        self._launch(etcd)
        wait_until_up(etcd.check, etcd.proc, "etcd", etcd.log_path, timeout, cancelled)
        for member in brokers:
            self._launch(member)
        for member in brokers:
            wait_until_up(member.check, member.proc, member.name, member.log_path, timeout,
                          cancelled)
        self.say("etcd is open (plain http, no authentication) on 127.0.0.1 only: fine for "
                 "development; secure it for anything else (docs/cluster.md, 'Securing etcd')")
        self.say(f"cluster up in {time.monotonic() - began:.1f} s; for clients: "
                 f"export LOGBROKER_BOOTSTRAP={self.bootstrap} (or -b); Ctrl-C stops it")

    def _launch(self, member: Member) -> None:
        member.proc = spawn(member.args, member.log_path, member.env, die_with_parent=True)
        self.say(f"{member.name:<9} {member.address:<22} pid {member.proc.pid:<8} "
                 f"log {member.log_path}")

    def running(self) -> list[Member]:
        return [m for m in self.members if m.proc is not None and m.proc.poll() is None]

    def report_exits(self) -> None:
        for m in self.members:
            if m.proc is not None and m.proc.poll() is not None and not m.reported:
                m.reported = True
                self.say(f"{m.name} (pid {m.proc.pid}) exited ({describe(m.proc.returncode)}); "
                         f"log {m.log_path}")

    def stop(self, timeout: float = 30.0) -> None:
        """The brokers (all at once), then etcd: SIGTERM by PID, SIGKILL after ``timeout`` s."""
        for group in (self.members[1:], self.members[:1]):
            started = [m for m in group if m.proc is not None]
            live = [m for m in started if m.proc.poll() is None]
            for m, code in zip(started, stop_all([m.proc for m in started], timeout)):
                if m in live:
                    self.say(f"stopped {m.name} (pid {m.proc.pid}): "
                             + (f"killed after {timeout:g} s" if code is None else describe(code)))


def describe(code: int) -> str:
    """``exit status N`` or ``ended by SIGNAME`` (a negative Popen returncode)."""
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"ended by {signal.Signals(-code).name}"
    except ValueError:
        return f"ended by signal {-code}"


def default_logbroker() -> str:
    """The ``logbroker`` beside this Python (the venv's), else the one on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "logbroker")
    return beside if os.access(beside, os.X_OK) else (shutil.which("logbroker") or "logbroker")


def main(argv: "list[str] | None" = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools/cluster.py",
        description="Start etcd and N logbroker brokers on 127.0.0.1 (make cluster) and stop "
                    "them all on Ctrl-C or SIGTERM.")
    parser.add_argument("--brokers", type=int, default=3, metavar="N",
                        help="how many brokers, ids 1..N (default 3)")
    parser.add_argument("--base-port", type=int, default=9555, metavar="PORT",
                        help="broker I listens on PORT+I-1 (default 9555)")
    parser.add_argument("--data-dir", default="./data/cluster", metavar="DIR",
                        help="DIR/etcd, DIR/broker-I and the logs DIR/*.log (default ./data/cluster)")
    parser.add_argument("--etcd-port", type=int, default=2379, metavar="PORT",
                        help="etcd's client port (default 2379)")
    parser.add_argument("--etcd-peer-port", type=int, default=2380, metavar="PORT",
                        help="etcd's peer port (default 2380)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long each process may take to come up (default 60)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="a TOML config every broker reads (e.g. auth_required, "
                             "inter_broker_user: docs/security.md)")
    parser.add_argument("--logbroker", default=None, metavar="PATH",
                        help="the logbroker executable (default: the one beside this Python)")
    args = parser.parse_args(argv)
    if args.brokers < 1:
        parser.error("--brokers must be at least 1")
    if not 1 <= args.base_port <= 65536 - args.brokers:
        parser.error("--base-port: the brokers' ports must lie in 1..65535")
    etcd = shutil.which("etcd")
    if etcd is None:
        print("error: etcd not found on PATH: run 'sudo tools/install-etcd.sh' "
              "(make cluster does as root)", file=sys.stderr)
        return 1

    stopping = threading.Event()

    def on_signal(signum, frame) -> None:
        stopping.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    cluster = Cluster(args.brokers, args.base_port, args.data_dir, args.etcd_port,
                      args.etcd_peer_port, args.logbroker, etcd, config=args.config)
    status = 0
    try:
        cluster.start(args.timeout, cancelled=stopping)
        while not stopping.wait(0.2):
            cluster.report_exits()
            if not cluster.running():
                cluster.say("every process has exited")
                status = 1
                break
    except StartError as exc:
        print(f"error: {exc}", file=sys.stderr)
        cluster.report_exits()
        status = 0 if stopping.is_set() else 1
    finally:
        cluster.stop()
    return status


if __name__ == "__main__":
    sys.exit(main())
