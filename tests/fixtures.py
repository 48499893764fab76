"""Helpers shared by the tests (no tests here): stores and crash simulation, batch
and record samples, protocol message samples, real broker processes, raw wire
connections, client polling helpers, a Spark test data set.

Brokers are real ``logbroker serve`` processes on 127.0.0.1, stopped by PID; waits
are bounded (deadlines, never sleeps as synchronisation).
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import subprocess
import sys
import time

from logbroker.protocol import messages as m
from logbroker.protocol.codec import FrameReader, decode, encode_bytes
from logbroker.records import build_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store


# -- stores ---------------------------------------------------------------
def open_store(path, **log_settings) -> Store:
    return Store.open(str(path), StorageConfig(log=LogConfig(**log_settings), map_size=64 << 20))


def crash(store: Store) -> None:
    """Abandon ``store`` as a killed process would: nothing flushed or
    checkpointed, the clean marker not written (the page cache survives, as
    it does when only the process dies)."""
    store.files.close_all()
    store.meta.close()
    os.close(store._lock_fd)


def batch(values, ts: int = 1_000_000, key: "bytes | None" = None) -> bytes:
    """One batch of ``values`` (bytes) all stamped with timestamp ``ts``."""
    return build_batch([(v, key, (), ts) for v in values])


def values_of(log, start: int = 0) -> list[bytes]:
    """Every record value of ``log`` from ``start`` to its end, in offset order."""
    from logbroker.records import decode_batch, scan_batches

    out, offset = [], max(start, log.log_start_offset)
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        assert data, f"read at {offset} returned nothing before the end {log.log_end_offset}"
        for pos, header in scan_batches(data):
            for rec in decode_batch(data[pos:pos + header.size]).records():
                if rec.offset >= offset:
                    out.append(rec.value)
            offset = header.next_offset
    return out


# -- record and message samples -------------------------------------------
T0 = 1_700_000_000_000  # a fixed "now" in ms

RECORDS = [  # (value, key, headers, timestamp_ms)
    (b"v0", b"k0", [("trace", b"abc")], T0),
    (None, b"k1", [], T0 + 5),
    (b"", None, [("h\u00e9ader-\u2603", None), ("dup", b"1"), ("dup", b"")], T0 - 3),
    (b"\x00\xff" * 10, b"", [("", b"x")], T0 + (1 << 31) - 1),
    (b"last", None, [], T0 - (1 << 31)),
]

B1 = build_batch([(b"hello", b"k1", (), T0), (b"world", None, (), T0 + 5)])
B2 = build_batch([(b"x" * 300, None, (("h", b"v"),), T0)], producer_id=42, producer_epoch=3,
                 base_sequence=10)

SAMPLES = [
    m.Handshake(client_id="app-1", min_version=1, max_version=3),
    m.HandshakeResponse(version=1, broker_id=7, server="logbroker 0.1.0"),
    m.Metadata(topics=("orders", "clicks"), auto_create=True),
    m.Metadata(),
    m.MetadataResponse(brokers=((0, "127.0.0.1", 9555),),
                       topics=(("orders", 0, "", 4), ("nope", 3, "unknown topic 'nope'", 0)),
                       controller=2, partitions=(("orders", 0, 1, 4, (1, 2, 3), (1, 3)),
                                                 ("orders", 1, -1, 7, (2, 3, 1), ()))),
    m.ReplicaFetch(replica_id=2, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20,
                   parts=(("orders", 0, 120, 4, 1 << 20),)),
    m.ReplicaFetchResponse(parts=(("orders", 0, 0, "", 118, 0, 130, 100, len(B1)),
                                  ("orders", 1, 74, "fenced", -1, -1, -1, -1, 0)), payload=(B1, b"")),
    m.OffsetForLeaderEpoch(replica_id=3, parts=(("orders", 0, 5, 4),)),
    m.OffsetForLeaderEpochResponse(parts=(("orders", 0, 0, "", 4, 118), ("orders", 1, 6, "no", -1, -1))),
    m.DescribeCluster(topics=("orders",)),
    m.DescribeClusterResponse(cluster="prod", controller=1,
                              brokers=((1, "127.0.0.1", 9555, True), (2, "127.0.0.2", 9556, False)),
                              partitions=(("orders", 0, 1, 4, (1, 2, 3), (1, 3), 1),)),
    m.ElectLeaders(topics=None),
    m.ElectLeadersResponse(parts=(("orders", 0, 0, "", 1),)),
    m.CreateTopics(topics=(("orders", 4, {"retention_ms": 3_600_000, "flush": "lazy"}),
                           ("plain", 1, {}))),
    m.CreateTopicsResponse(topics=(("orders", 0, ""), ("plain", 36, "exists"))),
    m.DeleteTopics(topics=("orders",)),
    m.DeleteTopicsResponse(topics=(("orders", 0, ""),)),
    m.DescribeTopics(topics=None),
    m.DescribeTopicsResponse(topics=(("orders", 0, "", {"segment_bytes": 1 << 30, "partitions": 2},
                                      ((0, 0, 120, 118, 40960, 1, 0, ""),
                                       (1, 0, 9, 9, 512, 1, 57, "orders-1: CRC error at byte 0"))),)),
    m.Produce(acks=1, timeout_ms=5000, producer_id=42, producer_epoch=3,
              parts=(("orders", 0, len(B1)), ("orders", 1, len(B2))), payload=(B1, B2)),
    m.ProduceResponse(parts=(("orders", 0, 0, "", 1200, 0), ("orders", 1, 45, "gap", -1, -1))),
    m.Fetch(max_wait_ms=250, min_bytes=1024, max_bytes=1 << 20,
            parts=(("orders", 0, 1200, 65536), ("orders", 1, 0, 65536))),
    m.FetchResponse(parts=(("orders", 0, 0, "", 1300, 0, len(B1)),
                           ("orders", 1, 1, "out of range", 90, 10, 0)), payload=(B1, b"")),
    m.ListOffsets(parts=(("orders", 0, m.EARLIEST), ("orders", 0, m.LATEST), ("orders", 1, T0))),
    m.ListOffsetsResponse(parts=(("orders", 0, 0, "", 0, -1), ("orders", 1, 0, "", 17, T0 + 3))),
    m.CommitOffsets(group="billing", offsets=(("orders", 0, 1200, "host-3"),)),
    m.CommitOffsetsResponse(parts=(("orders", 0, 0, ""),)),
    m.FetchOffsets(group="billing", parts=(("orders", 0),)),
    m.FetchOffsets(group="billing", parts=None),
    m.FetchOffsetsResponse(parts=(("orders", 0, 1200, "host-3", T0),)),
    m.ListGroups(),
    m.ListGroupsResponse(groups=("billing", "audit")),
    m.DescribeGroups(groups=("billing",)),
    m.DescribeGroupsResponse(groups=(("billing", 0, "", (("orders", 0, 1200, 1300, 100, T0, 5000),)),
                                     ("nope", 69, "unknown group 'nope'", ()))),
    m.InitProducerId(),
    m.InitProducerIdResponse(producer_id=(T0 << 8) + 1, producer_epoch=0),
    m.DeleteGroups(groups=("billing", "nope")),
    m.DeleteGroupsResponse(groups=(("billing", 0, ""), ("nope", 24, "unknown group 'nope'"))),
    m.FetchResponse(error=42, message="Fetch: parts: expected a list"),
]


def fill(path, topic="orders", partitions=2, batches=40, per=10, **settings):
    """``batches`` batches per partition of ``per`` records: value b"p-i", key
    b"k<i%3>", one header, timestamp T0 + batch index * 1000."""
    settings.setdefault("segment_bytes", 4096)
    settings.setdefault("index_interval_bytes", 512)
    s = open_store(path, **settings)
    s.create_topic(topic, partitions)
    for p in range(partitions):
        lg = s.get_log(topic, p)
        for b in range(batches):
            recs = [(b"%d-%d" % (p, b * per + j), b"k%d" % ((b * per + j) % 3), (("h", b"%d" % j),),
                     T0 + b * 1000) for j in range(per)]
            lg.append([build_batch(recs)])
        lg.set_high_watermark(lg.log_end_offset)
    return s


# -- clients ----------------------------------------------------------------
FAST = dict(request_timeout_ms=5_000, connect_timeout_ms=2_000)


def consume(consumer, n: int, timeout: float = 15.0) -> list:
    """Poll until ``n`` records arrived (more are kept) or ``timeout`` passed."""
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


async def aconsume(consumer, n: int, timeout: float = 15.0) -> list:
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += await consumer.poll(min(1.0, max(deadline - time.monotonic(), 0)))
    return out


def wait_until(predicate, timeout: float = 10.0, what: str = "condition"):
    """Call ``predicate`` until it returns something truthy; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s")
        time.sleep(0.01)


# -- broker processes and raw connections ----------------------------------
LOGBROKER = os.path.join(os.path.dirname(sys.executable), "logbroker")


class BrokerProcess:
    def __init__(self, data_dir, *extra: str, config: "dict | None" = None) -> None:
        self.data_dir = str(data_dir)
        self.extra = list(extra)
        self.port = 0
        self.proc: "subprocess.Popen | None" = None
        self.config_path = None
        if config:
            self.config_path = os.path.join(self.data_dir + ".toml")
            with open(self.config_path, "w") as fh:
                for key, value in config.items():
                    fh.write(f"{key} = {value!r}\n".replace("'", '"').replace("True", "true")
                             .replace("False", "false"))
        self.log_path = self.data_dir + ".log"

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        args = [LOGBROKER, "serve", "--data-dir", self.data_dir, "--host", "127.0.0.1",
                "--port", str(self.port), *self.extra]
        if self.config_path:
            args += ["--config", self.config_path]
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        line = _readline(self.proc, timeout)
        if not line.startswith("logbroker listening on "):
            self.kill()
            raise RuntimeError(f"broker did not start: {line!r}; log:\n{self.log()}")
        self.port = int(line.rsplit(":", 1)[1])
        return self

    def log(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as fh:
                return fh.read()
        except OSError:
            return ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait: the exit code (0 after a clean shutdown)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            self._close()

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or checkpointed by the broker."""
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=30)
            self._close()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _close(self) -> None:
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        self.proc = None

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.kill()


def _readline(proc: subprocess.Popen, timeout: float) -> str:
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if sel.select(timeout=max(0.0, deadline - time.monotonic())):
                return proc.stdout.readline()
            if proc.poll() is not None:
                return ""
        return ""
    finally:
        sel.close()


OPEN: list["RawConn"] = []  # closed by the close_raw_conns fixture in conftest.py


class RawConn:
    def __init__(self, port: int, timeout: float = 10.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        OPEN.append(self)
        self.reader = FrameReader()
        self.cid = 0

    def send(self, msg, cid: "int | None" = None) -> int:
        if cid is None:
            self.cid += 1
            cid = self.cid
        self.sock.sendall(encode_bytes(msg, cid))
        return cid

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 10.0):
        """The next response Envelope, or None when the broker closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.reader.next_frame()
            if frame is not None:
                return decode(frame)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no response in time")
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(1 << 20)
            except ConnectionResetError:
                return None
            if not data:
                return None
            self.reader.receive_data(data)

    def call(self, msg, timeout: float = 10.0):
        cid = self.send(msg)
        env = self.recv(timeout)
        assert env is not None and env.cid == cid, env
        return env.message

    def closed_by_peer(self, timeout: float = 10.0) -> bool:
        """True once the broker closes the connection (bounded wait)."""
        try:
            return self.recv(timeout) is None
        except (TimeoutError, OSError):
            return False

    def close(self) -> None:
        self.sock.close()


# -- the CLI (helper of issue 9: CLI and unreachable broker) -----------------------------------
CLI_ERROR_NAME = r"(?:[A-Z][A-Z0-9_]*)"  # error: NAME: ... (a registry name, USAGE, OS_ERROR)


def closed_port() -> int:
    """A loopback port nobody listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(*args: str, bootstrap: "str | None" = None, stdin: "bytes | None" = None,
            timeout: float = 60) -> subprocess.CompletedProcess:
    """The real ``logbroker`` executable (bounded by ``timeout`` s)."""
    env = dict(os.environ)
    env.pop("LOGBROKER_DEBUG", None)
    if bootstrap is not None:
        env["LOGBROKER_BOOTSTRAP"] = bootstrap
    return subprocess.run([LOGBROKER, *args], input=stdin, capture_output=True, env=env,
                          timeout=timeout)


def cli_ok(result) -> str:
    """stdout of a run that must have succeeded."""
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert b"Traceback" not in result.stderr
    return result.stdout.decode()


def cli_error(result, name: str) -> str:
    """The message of a run that must have failed with exactly one
    ``error: NAME: message`` line on stderr."""
    err = result.stderr.decode(errors="replace")
    assert result.returncode not in (0, None), err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {name}: "), err
    return lines[0][len(f"error: {name}: "):]


def invoke_cli(args, stdin: "bytes | None" = None, bootstrap: "str | None" = None,
               timeout: "float | None" = None):
    """The CLI in this process (click's CliRunner): a ``click.testing.Result``
    with ``exit_code``, ``stdout``, ``stderr`` and ``exception`` (a
    ``SystemExit`` for every normal exit). ``bootstrap``/``timeout``: the
    defaults of -b and --timeout (LOGBROKER_BOOTSTRAP, LOGBROKER_TIMEOUT)."""
    from click.testing import CliRunner

    from logbroker.cli.main import main

    env = {"LOGBROKER_BOOTSTRAP": bootstrap, "LOGBROKER_DEBUG": None,
           "LOGBROKER_TIMEOUT": None if timeout is None else str(timeout)}
    return CliRunner().invoke(main, list(args), input=stdin, env=env, catch_exceptions=True)


def invoked_error(result, name: str) -> str:
    """``cli_error`` for an in-process ``invoke_cli`` result."""
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        repr(result.exception)
    lines = result.stderr.splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {name}: "), result.stderr
    return lines[0][len(f"error: {name}: "):]


# -- broker memory (issue 9 helper: the broker's edge) ---------------------------------
def broker_rss(broker: BrokerProcess) -> int:
    """The broker process's resident set size in bytes (Linux /proc)."""
    with open(f"/proc/{broker.proc.pid}/status") as fh:
        return next(int(line.split()[1]) << 10 for line in fh if line.startswith("VmRSS:"))


def raise_nofile(needed: int) -> None:
    """Raise this process's soft open-file limit to ``needed`` (brokers started
    afterwards inherit it); skips the test when the hard limit is lower."""
    import pytest
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= needed:
        return
    if hard != resource.RLIM_INFINITY and hard < needed:
        pytest.skip(f"open-file hard limit {hard} < {needed}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def broker_unread_bytes(broker: BrokerProcess, conn: RawConn) -> int:
    """Bytes ``conn`` sent that the broker has not read from its socket yet
    (the receive queue in /proc/net/tcp); -1 when the socket is not found."""
    want = (broker.port, conn.sock.getsockname()[1])
    with open("/proc/net/tcp") as fh:
        for line in list(fh)[1:]:
            fields = line.split()
            local, remote = (int(a.split(":")[1], 16) for a in fields[1:3])
            if (local, remote) == want:
                return int(fields[4].split(":")[1], 16)
    return -1


def invoked_ok(result) -> str:
    """stdout of an ``invoke_cli`` run that must have succeeded."""
    assert result.exit_code == 0 and (result.exception is None or isinstance(
        result.exception, SystemExit)), (result.stderr, repr(result.exception))
    return result.stdout


# -- cluster (issue 10): etcd and a fault-injecting TCP proxy ----------------------------------
# How a cluster test wires them: broker i listens on its own port but
# advertises proxy i's address (--advertised-address), so every client and
# every peer reaches broker i only through proxy i; broker i reaches etcd
# through its own proxy to the one etcd. Cutting proxy i isolates broker i
# from clients and peers, cutting its etcd proxy isolates it from etcd.
# (the section's own imports)
import asyncio
import errno
import functools
import shutil
import struct
import threading

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.cache
def cluster_tool():
    """tools/cluster.py as a module: the etcd command line, ``spawn`` and the
    bounded waits are the same for ``make cluster`` and the tests."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("logbroker_cluster_tool",
                                                  os.path.join(ROOT, "tools", "cluster.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports nobody listens on (bound together, then released)."""
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def require_etcd() -> str:
    """The path of ``etcd``; skips the test when it is not installed (fails
    instead with LOGBROKER_ETCD_REQUIRED=1)."""
    import pytest

    path = shutil.which("etcd")
    if path is None:
        why = "etcd not installed: run 'sudo tools/install-etcd.sh' (make test does as root)"
        if os.environ.get("LOGBROKER_ETCD_REQUIRED") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return path


class EtcdProcess:
    """A real one-member ``etcd`` on two free 127.0.0.1 ports (client, peer),
    its data in ``data_dir`` and its output in ``data_dir + ".log"``;
    ``fast`` raft ticks (10 ms heartbeat, 100 ms election: lease TTLs down to
    1 s). ``start`` waits (bounded) until ``/health`` says true; a restart
    after ``stop``/``kill`` keeps the ports and the data, so brokers find it
    at the same ``url``. Stopped by PID; ``close`` also deletes the data
    (etcd preallocates a 64 MB WAL)."""

    def __init__(self, data_dir, *, name: str = "test", fast: bool = True) -> None:
        self.data_dir = str(data_dir)
        self.log_path = self.data_dir + ".log"
        self.name, self.fast = name, fast
        self.client_port = self.peer_port = 0
        self.proc: "subprocess.Popen | None" = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.client_port}"

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", self.client_port)

    def start(self, timeout: float = 30.0) -> "EtcdProcess":
        tool = cluster_tool()
        binary = shutil.which("etcd") or "etcd"
        fresh = self.client_port == 0
        for attempt in range(3 if fresh else 1):
            if fresh:
                self.client_port, self.peer_port = free_ports(2)
            self.proc = tool.spawn(tool.etcd_command(self.data_dir, self.client_port, self.peer_port,
                                                     name=self.name, fast=self.fast, etcd=binary),
                                   self.log_path, env=tool.etcd_env())
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
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=30)
            self.proc = None

    def close(self) -> None:
        """Kill it and delete its data dir (the log stays)."""
        self.kill()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def log(self) -> str:
        return cluster_tool().log_tail(self.log_path, 1 << 30)

    def __enter__(self) -> "EtcdProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


class _ProxyConn:
    __slots__ = ("client", "upstream", "task", "rst")

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: "socket.socket | None" = None
        self.task: "asyncio.Task | None" = None
        self.rst = False  # close with RST (SO_LINGER 0) instead of FIN


class _Reset(Exception):
    """A side of a proxied connection failed: reset the other side too."""


class TcpProxy:
    """A fault-injecting TCP proxy on 127.0.0.1:``listen_port`` (0: a free
    port) to ``target`` ("host:port" or (host, port); settable, for new
    connections, e.g. after the target restarted on another port). It runs
    its own asyncio loop in a daemon thread; every method returns once the
    change is in effect.

    - ``cut("blackhole")``: a network partition. Existing connections stall
      (nothing is forwarded either way; the sockets stay open); new
      connections are accepted and held unconnected. ``heal()`` resumes: what
      was held is delivered, as TCP's retransmissions would after a short
      partition.
    - ``cut("reset")``: existing connections are closed with RST on both
      sides, and new connections are refused (the listening socket stops
      listening but keeps its port, so ``heal()`` listens on it again).
    - A target that refuses a connection: the client's side is reset.

    ``bytes_to_target`` / ``bytes_to_client`` count the bytes forwarded
    each way, ``accepted`` the connections accepted."""

    def __init__(self, target=None, listen_port: int = 0) -> None:
        self.target = target
        self.mode: "str | None" = None  # None: forwarding
        self.bytes_to_target = self.bytes_to_client = self.accepted = 0
        self._conns: set[_ProxyConn] = set()
        self._listener = self._bind(listen_port)
        self.listen_port: int = self._listener.getsockname()[1]
        self._listening = True
        self._accepting: "asyncio.Task | None" = None
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"TcpProxy-{self.listen_port}",
                                        daemon=True)
        self._thread.start()
        self._call(self._begin())

    @property
    def target(self) -> "tuple[str, int] | None":
        return self._target

    @target.setter
    def target(self, value) -> None:
        if isinstance(value, str):
            host, _, port = value.rpartition(":")
            value = (host, int(port))
        self._target = None if value is None else (value[0], int(value[1]))

    @property
    def address(self) -> str:
        """"127.0.0.1:PORT", what a broker behind this proxy advertises."""
        return f"127.0.0.1:{self.listen_port}"

    @property
    def connections(self) -> int:
        return len(self._conns)

    def cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "reset"):
            raise ValueError(f"cut mode must be 'blackhole' or 'reset', not {mode!r}")
        self._call(self._set_mode(mode))

    def heal(self) -> None:
        self._call(self._set_mode(None))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._listener.close()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the loop's side -------------------------------------------------------------------
    @staticmethod
    def _bind(port: int) -> socket.socket:
        # An explicit port (not 0), so that shutdown() of the listener keeps it
        # bound: Linux releases a port that bind() picked itself.
        for _ in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port or free_port()))
            except OSError as exc:
                s.close()
                if port or exc.errno != errno.EADDRINUSE:
                    raise
                continue
            s.listen(128)
            s.setblocking(False)
            return s
        raise OSError(errno.EADDRINUSE, "no free port for the proxy")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coro, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _begin(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            client, _ = await loop.sock_accept(self._listener)
            client.setblocking(False)
            self.accepted += 1
            conn = _ProxyConn(client)
            self._conns.add(conn)
            conn.task = loop.create_task(self._serve(conn))

    async def _serve(self, conn: _ProxyConn) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._flowing.wait()  # blackhole: held, not connected yet
            conn.upstream = socket.socket()
            conn.upstream.setblocking(False)
            try:
                if self._target is None:
                    raise OSError(errno.ECONNREFUSED, "no target")
                await loop.sock_connect(conn.upstream, self._target)
            except OSError:
                conn.rst = True
                return
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(self._pump(conn.client, conn.upstream, "bytes_to_target"))
                    tg.create_task(self._pump(conn.upstream, conn.client, "bytes_to_client"))
            except* _Reset:
                conn.rst = True
        finally:
            self._conns.discard(conn)
            for s in (conn.client, conn.upstream):
                if s is not None:
                    if conn.rst:
                        try:
                            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                        except OSError:
                            pass
                    s.close()

    async def _pump(self, src: socket.socket, dst: socket.socket, counter: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(src, 1 << 16)
            except OSError:
                raise _Reset() from None
            await self._flowing.wait()  # blackhole: hold what was read
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                await loop.sock_sendall(dst, data)
            except OSError:
                raise _Reset() from None
            setattr(self, counter, getattr(self, counter) + len(data))

    async def _set_mode(self, mode: "str | None") -> None:
        self.mode = mode
        if mode == "reset":
            await self._stop_listening()
            await self._end_conns(rst=True)
        elif not self._listening:
            self._listener.listen(128)
            self._listening = True
            self._accepting = asyncio.get_running_loop().create_task(self._accept())
        if mode is None:
            self._flowing.set()
        else:
            self._flowing.clear()

    async def _stop_listening(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
            self._accepting = None
        if self._listening:
            # Linux: shutdown() of a listening socket stops listening (new
            # connections are refused) and keeps the port bound.
            self._listener.shutdown(socket.SHUT_RD)
            self._listening = False

    async def _end_conns(self, rst: bool) -> None:
        tasks = []
        for conn in list(self._conns):
            conn.rst = conn.rst or rst
            conn.task.cancel()
            tasks.append(conn.task)
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _shutdown(self) -> None:
        await self._stop_listening()
        await self._end_conns(rst=False)
# -- a cluster of real brokers (issue 10) -------------------------------------------------------
class Cluster:
    """``n`` real brokers (ids 1..n) joined through a real etcd at ``etcd_url``;
    each in ``base/broker-<id>``. Talks to them with raw protocol connections
    (RawConn); every wait is bounded."""

    def __init__(self, base, etcd_url: str, n: int = 3, config: "dict | None" = None,
                 extra: tuple = (), proxied: bool = False) -> None:
        """``proxied``: every client and peer reaches broker i only through
        ``front[i]`` (its advertised address) and broker i reaches etcd only
        through ``etcd_link[i]`` (TcpProxy), so ``isolate(i)`` can partition
        it; the harness itself talks to each broker's own port directly."""
        cfg = {"session_timeout_ms": 2000, "replica_lag_time_max_ms": 3000, **(config or {})}
        self.front: dict[int, TcpProxy] = {}
        self.etcd_link: dict[int, TcpProxy] = {}
        self.brokers: dict[int, BrokerProcess] = {}
        for i in range(1, n + 1):
            args = ["--broker-id", str(i)]
            port = 0
            if proxied:
                port = free_port()
                self.front[i] = TcpProxy(("127.0.0.1", port))
                self.etcd_link[i] = TcpProxy(etcd_url.removeprefix("http://"))
                args += ["--etcd", f"http://{self.etcd_link[i].address}",
                         "--advertised-address", self.front[i].address]
            else:
                args += ["--etcd", etcd_url]
            b = BrokerProcess(os.path.join(str(base), f"broker-{i}"), *args, *extra, config=cfg)
            b.port = port
            self.brokers[i] = b
        self._conns: dict[int, tuple[int, RawConn]] = {}

    def isolate(self, i: int, mode: str = "blackhole") -> None:
        """Cut broker i off from etcd, its peers and (proxied) clients."""
        self.front[i].cut(mode)
        self.etcd_link[i].cut(mode)

    def heal(self, i: int) -> None:
        self.front[i].heal()
        self.etcd_link[i].heal()

    def start(self) -> "Cluster":
        for b in self.brokers.values():
            b.start()
        wait_until(lambda: len(self.metadata().brokers) == len(self.brokers), 15,
                   "every broker registered")
        return self

    def close(self) -> None:
        for b in self.brokers.values():
            b.kill()
        for proxy in (*self.front.values(), *self.etcd_link.values()):
            proxy.close()

    @property
    def bootstrap(self) -> str:
        """The brokers' advertised addresses (through the proxies when proxied)."""
        if self.front:
            return ",".join(p.address for p in self.front.values())
        return ",".join(b.bootstrap for b in self.brokers.values() if b.port)

    def live(self) -> list[int]:
        return [i for i, b in self.brokers.items() if b.alive()]

    def conn(self, i: int) -> RawConn:
        b = self.brokers[i]
        held = self._conns.get(i)
        if held is None or held[0] != id(b.proc):
            if held is not None:
                held[1].close()
            self._conns[i] = (id(b.proc), RawConn(b.port))
        return self._conns[i][1]

    def call(self, i: int, msg, timeout: float = 10.0):
        try:
            return self.conn(i).call(msg, timeout)
        except (OSError, AssertionError, TimeoutError):
            self._conns.pop(i, None)
            raise

    def metadata(self, topics=None, via: "int | None" = None) -> m.MetadataResponse:
        for i in ([via] if via is not None else self.live()):
            try:
                return self.call(i, m.Metadata(topics=topics))
            except (OSError, AssertionError, TimeoutError):
                continue
        raise AssertionError("no broker answers Metadata")

    def state(self, topic: str, partition: int = 0, via: "int | None" = None) -> tuple:
        """(leader, leader_epoch, replicas, isr) as a broker sees it."""
        for t, p, leader, epoch, replicas, isr in self.metadata([topic], via).partitions:
            if (t, p) == (topic, partition):
                return leader, epoch, replicas, isr
        raise AssertionError(f"no state for {topic}-{partition}")

    def wait_state(self, topic: str, partition: int, pred, timeout: float = 15.0,
                   what: str = "partition state", via: "int | None" = None) -> tuple:
        box = []

        def check():
            try:
                st = self.state(topic, partition, via)
            except AssertionError:
                return False
            box[:] = [st]
            return pred(*st)
        wait_until(check, timeout, what)
        return box[0]

    def create(self, topic: str, partitions: int = 1, **configs) -> None:
        resp = self.call(self.live()[0], m.CreateTopics(topics=((topic, partitions, configs),)))
        assert resp.topics[0][1] == 0, resp
        for p in range(partitions):
            self.wait_state(topic, p, lambda leader, e, r, isr: leader >= 0 and len(isr) == len(r))

    def produce(self, i: int, topic: str, partition: int, values, acks: int = -1,
                timeout_ms: int = 5000) -> tuple:
        """(error, message, base_offset) of one batch of ``values`` sent to broker ``i``."""
        data = batch(values)
        resp = self.call(i, m.Produce(acks=acks, timeout_ms=timeout_ms,
                                      parts=((topic, partition, len(data)),), payload=(data,)),
                         timeout_ms / 1000 + 10)
        _, _, code, message, base, _ = resp.parts[0]
        return code, message, base

    def read_all(self, i: int, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
        """Every (offset, value) below broker ``i``'s HW, read from it over Fetch."""
        from logbroker.records import decode_batch, scan_batches

        out, offset = [], 0
        while True:
            resp = self.call(i, m.Fetch(max_wait_ms=0, parts=((topic, partition, offset, 1 << 20),)))
            part, data = resp.parts[0], bytes(resp.payload[0])
            assert part[2] == 0, part
            if not data:
                return out
            for pos, header in scan_batches(data):
                for rec in decode_batch(data[pos:pos + header.size]).records():
                    if rec.offset >= offset:
                        out.append((rec.offset, rec.value))
                offset = header.next_offset


def segment_bytes(data_dir, topic: str, partition: int) -> dict[str, bytes]:
    """Every segment file of one partition in a data dir, by name."""
    d = os.path.join(str(data_dir), f"{topic}-{partition}")
    out = {}
    for n in sorted(os.listdir(d)):
        if n.endswith(".log"):
            with open(os.path.join(d, n), "rb") as fh:
                out[n] = fh.read()
    return out
