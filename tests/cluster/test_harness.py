"""The cluster test harness (issue 10): a real etcd (the ``etcd`` fixture,
reached through aetcd as the broker does), the fault-injecting ``TcpProxy``,
and tools/cluster.py (``make cluster``) with stand-in brokers."""

from __future__ import annotations

import asyncio
import os
import queue
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.support.fixtures import (ROOT, RawConn, closed_port, cluster_tool, free_port,
                      require_etcd, wait_until)

CLUSTER_PY = os.path.join(ROOT, "tools", "cluster.py")


# -- etcd ----------------------------------------------------------------------------
def etcd_client(etcd):
    import aetcd

    return aetcd.Client(host="127.0.0.1", port=etcd.client_port, timeout=5)


def test_etcd_starts_healthy_and_a_key_round_trips_through_aetcd(etcd):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+", etcd.url) and etcd.client_port != etcd.peer_port
    assert etcd.alive() and etcd.healthy()

    async def run():
        async with etcd_client(etcd) as client:
            assert await client.get(b"/test/k") is None
            await client.put(b"/test/k", b"v1")
            first = await client.get(b"/test/k")
            await client.put(b"/test/k", b"v2")
            second = await client.get(b"/test/k")
            return first, second

    first, second = asyncio.run(run())
    assert first.value == b"v1" and second.value == b"v2"
    assert second.mod_revision > first.mod_revision


def test_etcd_lease_with_ttl_2_expires_and_takes_its_key(etcd):
    async def run():
        async with etcd_client(etcd) as client:
            lease = await client.lease(2)
            granted = time.monotonic()
            await client.put(b"/test/leased", b"x", lease=lease)
            await client.put(b"/test/kept", b"y")
            held = await client.get(b"/test/leased")
            deadline = granted + 10
            while await client.get(b"/test/leased") is not None:
                assert time.monotonic() < deadline, "leased key still there 10 s after the grant"
                await asyncio.sleep(0.05)
            return lease, held, time.monotonic() - granted, await client.get(b"/test/kept")

    lease, held, gone_after, kept = asyncio.run(run())
    assert lease.ttl == 2 and held.value == b"x" and held.lease == lease.id
    assert 1.0 <= gone_after <= 10, gone_after  # the TTL, not an immediate delete
    assert kept is not None and kept.value == b"y"


def test_etcd_stop_ends_its_pid_and_a_restart_keeps_url_and_data(etcd):
    async def put_get(value: "bytes | None"):
        async with etcd_client(etcd) as client:
            if value is not None:
                await client.put(b"/test/durable", value)
            return await client.get(b"/test/durable")

    asyncio.run(put_get(b"kept"))
    url, pid = etcd.url, etcd.proc.pid
    assert etcd.stop() is not None
    assert not etcd.alive() and not cluster_tool().port_open(etcd.client_port)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    etcd.start()
    assert etcd.url == url and etcd.proc.pid != pid
    assert asyncio.run(put_get(None)).value == b"kept"


# -- TcpProxy -------------------------------------------------------------------------------
GREETING = b"hello\n"


class EchoServer(socketserver.ThreadingTCPServer):
    """Says GREETING, then echoes every byte back until EOF; counts what it
    received (so the two directions carry different byte counts)."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        self.received = 0
        self.lock = threading.Lock()

        class Handler(socketserver.BaseRequestHandler):
            def handle(inner) -> None:
                try:
                    inner.request.sendall(GREETING)
                    while data := inner.request.recv(1 << 16):
                        with self.lock:
                            self.received += len(data)
                        inner.request.sendall(data)
                except OSError:
                    pass

        super().__init__(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return "127.0.0.1:%d" % self.server_address[1]

    def close(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def echo():
    server = EchoServer()
    try:
        yield server
    finally:
        server.close()


SOCKETS: list[socket.socket] = []


@pytest.fixture(autouse=True)
def close_sockets():
    """Close the test's connections, also when it failed half way."""
    yield
    while SOCKETS:
        SOCKETS.pop().close()


def connect(proxy, greeted: bool = True, timeout: float = 5.0) -> socket.socket:
    """A connection through ``proxy``; reads the echo server's greeting if ``greeted``."""
    sock = socket.create_connection(("127.0.0.1", proxy.listen_port), timeout=timeout)
    SOCKETS.append(sock)
    if greeted:
        assert recv_exactly(sock, len(GREETING)) == GREETING
    return sock


def recv_exactly(sock: socket.socket, n: int, timeout: float = 5.0) -> bytes:
    sock.settimeout(timeout)
    out = b""
    while len(out) < n:
        data = sock.recv(n - len(out))
        assert data, f"EOF after {len(out)} of {n} bytes"
        out += data
    return out


def test_proxy_forwards_both_ways_counts_bytes_and_passes_eof(tcp_proxy, echo):
    proxy = tcp_proxy(echo.address)
    payload = os.urandom(300_000)  # several 64 KiB reads each way
    with connect(proxy) as conn:
        sender = threading.Thread(target=conn.sendall, args=(payload,))
        sender.start()
        assert recv_exactly(conn, len(payload)) == payload
        sender.join(timeout=10)
        conn.shutdown(socket.SHUT_WR)
        assert conn.recv(1) == b""  # our EOF reached the echo server, its EOF came back
    wait_until(lambda: proxy.bytes_to_client == len(GREETING) + len(payload), 5, "bytes_to_client")
    assert proxy.bytes_to_target == len(payload) == echo.received
    assert proxy.accepted == 1
    wait_until(lambda: proxy.connections == 0, 5, "the proxied connection to end")


def test_proxy_reset_closes_connections_and_refuses_new_ones_until_healed(tcp_proxy, echo):
    proxy = tcp_proxy(echo.address)
    with pytest.raises(ValueError):
        proxy.cut("partition")
    with connect(proxy) as conn:
        conn.sendall(b"ping")
        assert recv_exactly(conn, 4) == b"ping"
        proxy.cut("reset")
        assert proxy.mode == "reset"
        with pytest.raises(ConnectionResetError):
            conn.recv(1)
    with pytest.raises(ConnectionRefusedError):
        connect(proxy, greeted=False)
    proxy.heal()
    with connect(proxy) as conn:  # the same port again
        conn.sendall(b"again")
        assert recv_exactly(conn, 5) == b"again"
    assert proxy.accepted == 2 and echo.received == 9


def test_proxy_blackhole_stalls_both_ways_then_heal_delivers(tcp_proxy, echo):
    proxy = tcp_proxy(echo.address)
    old = connect(proxy)
    old.sendall(b"ping")
    assert recv_exactly(old, 4) == b"ping"
    proxy.cut("blackhole")
    old.sendall(b"during")
    old.settimeout(0.5)
    with pytest.raises(TimeoutError):
        old.recv(1)
    old.sendall(b"+more")  # still open: no error, no reset
    assert old.getpeername()[1] == proxy.listen_port
    new = connect(proxy, greeted=False)  # accepted, held: no greeting yet
    new.sendall(b"new")
    new.settimeout(0.5)
    with pytest.raises(TimeoutError):
        new.recv(1)
    assert proxy.bytes_to_target == 4 == echo.received and proxy.bytes_to_client == 10
    assert proxy.accepted == 2
    proxy.heal()
    assert recv_exactly(old, 11) == b"during+more"
    assert recv_exactly(new, 9) == GREETING + b"new"
    old.close()
    new.close()
    wait_until(lambda: proxy.bytes_to_client == 30, 5, "bytes_to_client")
    assert proxy.bytes_to_target == 18 == echo.received


def test_proxy_resets_clients_of_a_dead_target_and_can_be_retargeted(tcp_proxy, echo):
    proxy = tcp_proxy(f"127.0.0.1:{closed_port()}")
    with pytest.raises(ConnectionResetError):  # the RST may beat connect() home
        with connect(proxy, greeted=False) as conn:
            conn.recv(1)
    assert proxy.accepted == 1 and proxy.bytes_to_target == 0
    proxy.target = echo.address
    with connect(proxy) as conn:
        conn.sendall(b"up")
        assert recv_exactly(conn, 2) == b"up"


def test_proxy_in_front_of_etcd_cuts_and_restores_grpc(etcd, tcp_proxy):
    """How a broker is cut from etcd: aetcd through a proxy times out in a
    blackhole, fails fast on a reset, and works again after heal (gRPC
    reconnects with its backoff, about 1 s, after a reset)."""
    import aetcd

    proxy = tcp_proxy(etcd.address)

    async def run():
        async with aetcd.Client(host="127.0.0.1", port=proxy.listen_port, timeout=1) as client:
            await client.put(b"/test/k", b"v")
            assert (await client.get(b"/test/k")).value == b"v"
            assert proxy.bytes_to_target > 0 and proxy.bytes_to_client > 0
            proxy.cut("blackhole")
            with pytest.raises(aetcd.exceptions.ConnectionTimeoutError):
                await client.get(b"/test/k")
            proxy.heal()
            assert (await client.get(b"/test/k")).value == b"v"
            proxy.cut("reset")
            with pytest.raises(aetcd.exceptions.ConnectionFailedError):
                await client.get(b"/test/k")
            proxy.heal()
            deadline = time.monotonic() + 10
            while True:
                try:
                    return (await client.get(b"/test/k")).value
                except aetcd.exceptions.ConnectionFailedError:
                    assert time.monotonic() < deadline, "etcd not reachable 10 s after heal"
                    await asyncio.sleep(0.1)

    assert asyncio.run(run()) == b"v"


# -- tools/cluster.py (make cluster) --------------------------------------------------------
def test_cluster_py_help_and_usage_errors():
    run = subprocess.run([sys.executable, CLUSTER_PY, "--help"], capture_output=True, text=True,
                         timeout=30)
    assert run.returncode == 0, run.stderr
    for option in ("--brokers", "--base-port", "--data-dir", "--etcd-port"):
        assert option in run.stdout
    bad = subprocess.run([sys.executable, CLUSTER_PY, "--brokers", "0"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "--brokers" in bad.stderr


def _options(args: list[str]) -> dict[str, str]:
    return {a: b for a, b in zip(args, args[1:]) if a.startswith("--")}


def test_the_readme_cluster_commands_are_what_cluster_py_runs():
    text = Path(ROOT, "README.md").read_text(encoding="utf-8")
    section = text[text.index("## A 3-broker cluster on one machine"):]
    block = section[section.index("```sh\netcd") + 6:]
    block = block[:block.index("```")].replace("\\\n", " ")
    lines = [line.split() for line in block.splitlines() if line.strip()]
    cluster = cluster_tool().Cluster()
    assert [line[0] for line in lines] == ["etcd", "logbroker", "logbroker", "logbroker"]
    assert os.path.basename(cluster.members[1].args[0]) == "logbroker"
    etcd_args = _options(cluster.members[0].args)
    assert _options(lines[0]).items() <= etcd_args.items() and len(_options(lines[0])) >= 7
    for line, member in zip(lines[1:], cluster.members[1:]):
        expected = _options(member.args)
        del expected["--host"]  # the default
        assert _options(line) == expected and line[1] == "serve"


def test_cluster_py_refuses_ports_in_use_and_starts_nothing(tmp_path):
    require_etcd()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        run = subprocess.run([sys.executable, CLUSTER_PY, "--etcd-port", str(port),
                              "--data-dir", str(tmp_path / "c")], capture_output=True, text=True,
                             timeout=30)
    assert run.returncode == 1 and "already in use" in run.stderr
    assert str(port) in re.search(r"port\(s\) ([\d, ]+) on", run.stderr)[1].split(", ")
    assert run.stdout == "" and not (tmp_path / "c").exists()


STUB_BROKER = """\
import argparse, signal, socket, sys
p = argparse.ArgumentParser()
for name in ("serve",):
    p.add_argument(name)
for opt in ("--broker-id", "--host", "--port", "--data-dir", "--etcd"):
    p.add_argument(opt, required=True)
a = p.parse_args()
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((a.host, int(a.port)))
s.listen()
print("stub broker", a.broker_id, "listening", flush=True)
while True:
    s.accept()[0].close()
"""


def consecutive_free_ports(n: int) -> int:
    """A base port with ``n`` free ports from it (bounded search)."""
    for _ in range(50):
        base = free_port()
        socks = [socket.socket() for _ in range(n)]
        try:
            for i, s in enumerate(socks):
                s.bind(("127.0.0.1", base + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise AssertionError(f"no {n} consecutive free ports")


class ClusterPy:
    """tools/cluster.py running on free ports (``base``: broker 1's port),
    read until it says the cluster is up; stopped (SIGTERM, then SIGKILL) and
    its etcd data deleted on exit."""

    def __init__(self, tmp_path, logbroker: "str | None" = None, brokers: int = 3) -> None:
        require_etcd()
        self.brokers = brokers
        self.base = consecutive_free_ports(brokers)
        self.etcd_port, peer_port = closed_port(), closed_port()
        self.data = tmp_path / "cluster"
        args = [sys.executable, CLUSTER_PY, "--brokers", str(brokers), "--base-port", str(self.base),
                "--etcd-port", str(self.etcd_port), "--etcd-peer-port", str(peer_port),
                "--data-dir", str(self.data), "--timeout", "30"]
        self.proc = subprocess.Popen(args + (["--logbroker", logbroker] if logbroker else []),
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.pids: dict[str, int] = {}
        self.lines: list[str] = []
        # a reader thread: lines written together reach a queue one by one (a
        # select on the pipe cannot see a line its previous readline buffered)
        self._queue: "queue.Queue[str]" = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._queue.put(line)
        self._queue.put("")  # EOF

    def __enter__(self) -> "ClusterPy":
        try:
            while not (self.lines and self.lines[-1].startswith("cluster up")):
                line = self.readline(60)
                assert line, f"cluster.py ended or hung: {self.lines}"
                got = re.match(r"(etcd|broker \d+)\s+(\S+)\s+pid (\d+)\s+log (\S+)$", line)
                if got:
                    self.pids[got[1]] = int(got[3])
                    assert os.path.exists(got[4])
        except BaseException:
            self.__exit__()
            raise
        return self

    def readline(self, timeout: float) -> str:
        """The next line ('' on EOF or after ``timeout`` s)."""
        try:
            line = self._queue.get(timeout=timeout).rstrip("\n")
        except queue.Empty:
            line = ""
        self.lines.append(line)
        return line

    def stop(self) -> str:
        """SIGTERM; its exit status must be 0; the rest of its output."""
        self.proc.send_signal(signal.SIGTERM)
        # the tool's own bound: the brokers, then etcd, each 30 s to exit and 10 s once
        # killed (tools/cluster.py stop_all); its output then names whoever was slow
        assert self.proc.wait(timeout=2 * (30 + 10) + 10) == 0
        self._reader.join(30)
        rest = []
        while not self._queue.empty():
            rest.append(self._queue.get_nowait())
        return "".join(rest)

    def __exit__(self, *exc) -> None:
        if self.proc.poll() is None:  # a failed test: it stops its children on SIGTERM,
            self.proc.send_signal(signal.SIGTERM)  # and they get SIGTERM if it dies
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)
        self._reader.join(30)
        self.proc.stdout.close()
        shutil.rmtree(self.data / "etcd", ignore_errors=True)


def test_cluster_py_starts_etcd_and_brokers_reports_exits_and_stops_all_by_pid(tmp_path):
    """tools/cluster.py with stand-in brokers: their arguments, readiness, a
    kill -9 reported while the rest keeps running, SIGTERM stopping all."""
    stub = tmp_path / "stub-broker"
    stub.write_text(f"#!{sys.executable}\n{STUB_BROKER}")
    stub.chmod(0o755)
    with ClusterPy(tmp_path, str(stub)) as c:
        base, data, pids = c.base, c.data, c.pids
        assert list(pids) == ["etcd", "broker 1", "broker 2", "broker 3"], c.lines
        bootstrap = f"127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}"
        assert f"LOGBROKER_BOOTSTRAP={bootstrap} " in c.lines[-1]
        assert cluster_tool().etcd_healthy(f"http://127.0.0.1:{c.etcd_port}")
        for i in (1, 2, 3):
            assert cluster_tool().port_open(base + i - 1)
            log = (data / f"broker-{i}.log").read_text()
            assert (f"serve --broker-id {i} --host 127.0.0.1 --port {base + i - 1} --data-dir "
                    f"{data}/broker-{i} --etcd http://127.0.0.1:{c.etcd_port}") in log
            assert f"stub broker {i} listening" in log

        os.kill(pids["broker 2"], signal.SIGKILL)
        line = c.readline(10)
        assert line.startswith(f"broker 2 (pid {pids['broker 2']}) exited (ended by SIGKILL)"), line
        assert c.proc.poll() is None and cluster_tool().port_open(base)

        out = c.stop()
        for name in ("broker 1", "broker 3"):
            assert f"stopped {name} (pid {pids[name]}): exit status 0" in out, out
        assert "stopped broker 2" not in out
        assert f"stopped etcd (pid {pids['etcd']})" in out, out
        for pid in pids.values():
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)


def test_cluster_py_runs_a_real_cluster(tmp_path):
    """make cluster's script with the real ``logbroker serve --etcd``: every
    broker registered at its address, one controller, a clean stop."""
    from logbroker.protocol import messages as m

    with ClusterPy(tmp_path) as c:
        conn = RawConn(c.base + 2)
        wait_until(lambda: len(conn.call(m.DescribeCluster(topics=())).brokers) == 3, 15,
                   "three brokers registered")
        described = conn.call(m.DescribeCluster(topics=()))
        assert sorted(b[:3] for b in described.brokers) == [
            (i, "127.0.0.1", c.base + i - 1) for i in (1, 2, 3)]
        assert described.controller in (1, 2, 3)
        conn.close()
        out = c.stop()
        for i in (1, 2, 3):
            assert f"stopped broker {i} (pid {c.pids[f'broker {i}']}): exit status 0" in out, out
