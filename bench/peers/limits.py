"""Physical limits of this machine, the floor under the peer benchmark: what the
disk under test and loopback TCP give with nothing but the kernel in the way.

Contract: ``measure(workdir, quick, log) -> dict``. ``workdir`` is an existing
directory on the disk under test; every file written there is removed before
returning. ``log(msg)`` reports progress. ``quick`` does about 1 % of the work
(a few seconds in all); the full run stays well under a minute. Every loop is
bounded by a count and by a deadline; sockets use 127.0.0.1 only; the peer
processes started here (``spawn``: they die with us) are stopped by their PID
before returning. The dict has exactly these keys:

  seq_write_fsync_64k, seq_write_fsync_1m  sequential writes of a new file,
      fdatasync after every chunk: {"mb_per_s", "bytes", "seconds", "chunks"}
  append_4k_fdatasync  4 KiB os.write to an O_APPEND file + os.fdatasync, each
      timed: {"p50_ms", "p99_ms", "n"}
  tcp_blocking, tcp_asyncio  1 MiB buffers streamed to a sink process
      ({"gb_per_s", "bytes", "seconds"}) and 100-byte ping-pongs with an echo
      process ({"rtt_p50_ms", "rtt_p99_ms", "pings"}); TCP_NODELAY; blocking
      sockets on both ends, or asyncio on both ends
  sendfile  os.sendfile of a page-cached file to a sink process, median pass:
      {"gb_per_s", "bytes", "passes", "min_gb_per_s", "max_gb_per_s"}

``rows(lim)`` turns that dict into (name, figure) pairs for a markdown table.
Run ``python -m bench.peers.limits [--quick]`` to print the JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import json
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from bench import ROOT
from bench.common import harness
from bench.common.procs import read_line, spawn, stop_process
from bench.common.stats import GiB, KiB, MiB, bounded, percentile_ms
from bench.storage.append import Appender  # its "raw" target: os.write + os.fdatasync
from bench.storage.common import remove

READY = "limits peer listening on "
SINK, ECHO = b"S", b"E"  # first byte a client sends: what the peer does with the rest
PING_BYTES = 100
IO_TIMEOUT = 30.0  # SO_SNDTIMEO / SO_RCVTIMEO on every blocking socket
PEER_SECONDS = 300.0  # a peer process exits on its own after this
PEER_MAX_CONNECTIONS = 64
PEER_MAX_RECVS = 50_000_000
PREP_SECONDS = 30.0  # writing and reading the sendfile source


@dataclass(frozen=True)
class Budget:
    seq_64k_bytes: int = 256 * MiB
    seq_1m_bytes: int = 1 * GiB
    disk_seconds: float = 5.0  # per disk measurement
    append_ops: int = 5000
    tcp_bytes: int = 32 * GiB  # the deadline ends it first: ~2 s of streaming
    pings: int = 10_000
    tcp_seconds: float = 2.0  # per TCP measurement, and for all sendfile passes
    sendfile_bytes: int = 256 * MiB
    sendfile_passes: int = 20


FULL = Budget()
QUICK = Budget(seq_64k_bytes=640 * KiB, seq_1m_bytes=3 * MiB, disk_seconds=0.1, append_ops=20,
               tcp_bytes=20 * MiB, pings=100, tcp_seconds=0.05, sendfile_bytes=4 * MiB, sendfile_passes=5)


# -- disk ----------------------------------------------------------------------------------
def seq_write_fsync(path: str, chunk: int, max_bytes: int, seconds: float) -> dict:
    """A new file (O_EXCL, nothing preallocated), ``chunk`` bytes per os.write,
    os.fdatasync after each."""
    appender = Appender("raw", [os.urandom(chunk)], path)
    try:
        appender.slice(max(1, max_bytes // chunk), seconds)
    finally:
        done = appender.close()  # also removes the file
    return {"mb_per_s": done["bytes"] / done["seconds"] / 1e6, "bytes": done["bytes"],
            "seconds": done["seconds"], "chunks": done["calls"]}


def append_fdatasync_latency(path: str, size: int, max_ops: int, seconds: float) -> dict:
    """``size``-byte appends to an O_APPEND file, each os.write + os.fdatasync timed."""
    appender = Appender("raw", [os.urandom(size)], path)
    fcntl.fcntl(appender.fd, fcntl.F_SETFL, fcntl.fcntl(appender.fd, fcntl.F_GETFL) | os.O_APPEND)
    lat: list[int] = []

    def timed(i: int) -> int:
        t0 = time.perf_counter_ns()
        n = appender.step(i)
        lat.append(time.perf_counter_ns() - t0)
        return n

    try:
        bounded(timed, max_ops, seconds)
    finally:
        appender.close()
    lat.sort()
    return {"p50_ms": percentile_ms(lat, 0.50), "p99_ms": percentile_ms(lat, 0.99), "n": len(lat)}


# -- peer processes (python bench/peers/limits.py --peer blocking|asyncio) -----------------
def _io_timeouts(sock: socket.socket) -> socket.socket:
    """Blocking fd (no poll before each call) with kernel send/receive timeouts."""
    sock.settimeout(None)
    timeval = struct.pack("ll", int(IO_TIMEOUT), 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _serve_blocking(deadline: float) -> None:
    """One connection at a time: SINK counts what arrives (recv_into a reused
    buffer) and answers the count on EOF; ECHO sends back what arrives."""
    buf = bytearray(MiB)
    view = memoryview(buf)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        _io_timeouts(listener)
        print(READY + str(listener.getsockname()[1]), flush=True)
        for _ in range(PEER_MAX_CONNECTIONS):
            conn, _addr = listener.accept()
            with _io_timeouts(conn):
                mode, total = conn.recv(1), 0
                for _ in range(PEER_MAX_RECVS):
                    n = conn.recv_into(buf)
                    if not n or time.monotonic() > deadline:
                        break
                    if mode == ECHO:
                        conn.sendall(view[:n])
                    total += n
                if mode == SINK:
                    conn.sendall(total.to_bytes(8, "big"))
            if time.monotonic() > deadline:
                return


class _AioPeer(asyncio.BufferedProtocol):
    """The asyncio twin of ``_serve_blocking``, one instance per connection."""

    def __init__(self) -> None:
        self.buf = bytearray(MiB)
        self.mode: bytes | None = None
        self.total = 0

    def connection_made(self, transport) -> None:
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def get_buffer(self, sizehint: int) -> bytearray:
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        data = memoryview(self.buf)[:nbytes]
        if self.mode is None:
            self.mode, data = bytes(data[:1]), data[1:]
        if self.mode == ECHO:
            self.transport.write(bytes(data))  # a copy: the buffer is reused
        self.total += len(data)

    def eof_received(self) -> bool:
        if self.mode == SINK:
            self.transport.write(self.total.to_bytes(8, "big"))
        return False  # close once written


async def _serve_asyncio(seconds: float) -> None:
    server = await asyncio.get_running_loop().create_server(_AioPeer, "127.0.0.1", 0)
    async with server:
        print(READY + str(server.sockets[0].getsockname()[1]), flush=True)
        await asyncio.sleep(seconds)


class Peer:
    """A peer process (blocking or asyncio), stopped by its PID."""

    def __init__(self, kind: str) -> None:
        self.proc = spawn([sys.executable, "-m", "bench.peers.limits", "--peer", kind], cwd=str(ROOT),
                          stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        line = read_line(self.proc, IO_TIMEOUT)
        if not line.startswith(READY):
            self.stop()
            raise RuntimeError(f"{kind} peer did not start: {line!r}")
        self.port = int(line[len(READY):])

    def stop(self) -> None:
        stop_process(self.proc, 5)


# -- TCP, blocking client ------------------------------------------------------------------
def _connect(port: int, mode: bytes) -> socket.socket:
    sock = _io_timeouts(socket.create_connection(("127.0.0.1", port), timeout=IO_TIMEOUT))
    sock.sendall(mode)
    return sock


def _recv_exactly(sock: socket.socket, view: memoryview) -> None:
    got = 0
    for _ in range(len(view)):  # every call brings at least one byte
        if got == len(view):
            return
        n = sock.recv_into(view[got:])
        if not n:
            raise ConnectionError("peer closed the connection")
        got += n


def _sink_count(sock: socket.socket) -> int:
    """Half-close and read the sink's 8-byte count of what it received."""
    sock.shutdown(socket.SHUT_WR)
    count = bytearray(8)
    _recv_exactly(sock, memoryview(count))
    return int.from_bytes(count, "big")


def _rate(received: int, sent: int, seconds: float) -> dict:
    if received != sent:
        raise RuntimeError(f"sink received {received} bytes of {sent}")
    return {"gb_per_s": received / seconds / 1e9, "bytes": received, "seconds": seconds}


def blocking_stream(port: int, max_bytes: int, seconds: float) -> dict:
    chunk = bytes(MiB)
    with _connect(port, SINK) as sock:
        start = time.perf_counter()
        sent = bounded(lambda i: sock.sendall(chunk) or len(chunk), max(1, max_bytes // MiB), seconds)[1]
        return _rate(_sink_count(sock), sent, time.perf_counter() - start)


def blocking_pingpong(port: int, max_pings: int, seconds: float) -> list[int]:
    ping, pong, rtts = bytes(PING_BYTES), memoryview(bytearray(PING_BYTES)), []
    with _connect(port, ECHO) as sock:
        def one(i: int) -> int:
            t0 = time.perf_counter_ns()
            sock.sendall(ping)
            _recv_exactly(sock, pong)
            rtts.append(time.perf_counter_ns() - t0)
            return PING_BYTES
        bounded(one, max_pings, seconds)
    return rtts


def _tcp_result(stream: dict, rtts: list[int]) -> dict:
    rtts.sort()
    return {**stream, "rtt_p50_ms": percentile_ms(rtts, 0.50), "rtt_p99_ms": percentile_ms(rtts, 0.99), "pings": len(rtts)}


# -- TCP, asyncio client -------------------------------------------------------------------
async def _aio_connect(port: int, mode: bytes):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    writer.write(mode)
    return reader, writer


async def _aio_stream(port: int, max_bytes: int, seconds: float) -> dict:
    chunk, sent = bytes(MiB), 0
    reader, writer = await _aio_connect(port, SINK)
    try:
        start = time.perf_counter()
        for _ in range(max(1, max_bytes // MiB)):
            writer.write(chunk)
            await writer.drain()
            sent += len(chunk)
            if time.perf_counter() - start >= seconds:
                break
        writer.write_eof()
        received = int.from_bytes(await reader.readexactly(8), "big")
        return _rate(received, sent, time.perf_counter() - start)
    finally:
        writer.close()


async def _aio_pingpong(port: int, max_pings: int, seconds: float) -> list[int]:
    ping, rtts = bytes(PING_BYTES), []
    reader, writer = await _aio_connect(port, ECHO)
    try:
        deadline = time.perf_counter() + seconds
        for _ in range(max_pings):
            t0 = time.perf_counter_ns()
            writer.write(ping)
            await reader.readexactly(PING_BYTES)
            rtts.append(time.perf_counter_ns() - t0)
            if time.perf_counter() >= deadline:
                break
        return rtts
    finally:
        writer.close()


def asyncio_tcp(port: int, b: Budget) -> dict:
    async def both() -> dict:
        stream = await _aio_stream(port, b.tcp_bytes, b.tcp_seconds)
        return _tcp_result(stream, await _aio_pingpong(port, b.pings, b.tcp_seconds))
    return asyncio.run(asyncio.wait_for(both(), 2 * b.tcp_seconds + 2 * IO_TIMEOUT))


# -- sendfile ------------------------------------------------------------------------------
def _page_cached_file(path: str, size: int) -> int:
    """Write ``size`` bytes (1 MiB chunks, no fsync), read them back once. Returns the size."""
    chunk = os.urandom(MiB)
    with open(path, "wb") as fh:
        size = bounded(lambda i: fh.write(chunk), max(1, size // MiB), PREP_SECONDS)[1]
    buf = bytearray(MiB)
    with open(path, "rb", buffering=0) as fh:
        bounded(lambda i: fh.readinto(buf), size // MiB + 1, PREP_SECONDS)
    return size


def _sendfile_pass(port: int, fd: int, size: int) -> float:
    with _connect(port, SINK) as sock:
        start, offset = time.perf_counter(), 0
        for _ in range(size):  # every call moves at least one byte
            if offset >= size:
                break
            n = os.sendfile(sock.fileno(), fd, offset, size - offset)
            if not n:
                raise RuntimeError("sendfile: unexpected end of file")
            offset += n
        return _rate(_sink_count(sock), size, time.perf_counter() - start)["gb_per_s"]


def sendfile_rate(path: str, port: int, b: Budget) -> dict:
    try:
        size = _page_cached_file(path, b.sendfile_bytes)
        rates: list[float] = []
        with open(path, "rb") as fh:
            bounded(lambda i: rates.append(_sendfile_pass(port, fh.fileno(), size)) or size,
                    b.sendfile_passes, b.tcp_seconds)
    finally:
        remove(path)
    return {"gb_per_s": statistics.median(rates), "bytes": size, "passes": len(rates),
            "min_gb_per_s": min(rates), "max_gb_per_s": max(rates)}


# -- the whole thing -----------------------------------------------------------------------
def measure(workdir: str, quick: bool, log) -> dict:
    b = QUICK if quick else FULL
    out: dict = {}
    log("limits: sequential write + fdatasync per 64 KiB")
    out["seq_write_fsync_64k"] = seq_write_fsync(os.path.join(workdir, "limits-seq-64k"), 64 * KiB,
                                                 b.seq_64k_bytes, b.disk_seconds)
    log("limits: sequential write + fdatasync per 1 MiB")
    out["seq_write_fsync_1m"] = seq_write_fsync(os.path.join(workdir, "limits-seq-1m"), MiB,
                                                b.seq_1m_bytes, b.disk_seconds)
    log("limits: 4 KiB append + fdatasync latency")
    out["append_4k_fdatasync"] = append_fdatasync_latency(os.path.join(workdir, "limits-append-4k"),
                                                          4 * KiB, b.append_ops, b.disk_seconds)
    peer = Peer("blocking")
    try:
        log("limits: loopback TCP, blocking sockets")
        stream = blocking_stream(peer.port, b.tcp_bytes, b.tcp_seconds)
        out["tcp_blocking"] = _tcp_result(stream, blocking_pingpong(peer.port, b.pings, b.tcp_seconds))
        log("limits: sendfile to loopback TCP")
        sendfile = sendfile_rate(os.path.join(workdir, "limits-sendfile"), peer.port, b)
    finally:
        peer.stop()
    peer = Peer("asyncio")
    try:
        log("limits: loopback TCP, asyncio on both ends")
        out["tcp_asyncio"] = asyncio_tcp(peer.port, b)
    finally:
        peer.stop()
    out["sendfile"] = sendfile
    return out


def rows(lim: dict) -> list[tuple[str, str]]:
    seq64, seq1m, app = lim["seq_write_fsync_64k"], lim["seq_write_fsync_1m"], lim["append_4k_fdatasync"]
    out = [("sequential write, fdatasync per 64 KiB", f"{seq64['mb_per_s']:,.0f} MB/s"),
           ("sequential write, fdatasync per 1 MiB", f"{seq1m['mb_per_s']:,.0f} MB/s"),
           ("4 KiB append + fdatasync, p50 / p99", f"{app['p50_ms']:.2f} / {app['p99_ms']:.2f} ms")]
    for key, name in (("tcp_blocking", "blocking sockets"), ("tcp_asyncio", "asyncio both ends")):
        tcp = lim[key]
        out += [(f"loopback TCP stream, {name}", f"{tcp['gb_per_s']:.2f} GB/s"),
                (f"loopback TCP 100 B ping-pong, {name}, p50 / p99",
                 f"{tcp['rtt_p50_ms'] * 1e3:.0f} / {tcp['rtt_p99_ms'] * 1e3:.0f} µs")]
    out.append(("sendfile (page cache) to loopback TCP", f"{lim['sendfile']['gb_per_s']:.2f} GB/s"))
    return out


def main(argv: "list[str] | None" = None) -> int:
    ap = harness.parser("peers.limits", __doc__, "a short measurement (a smoke test)", workdir=False,
                        report=False)
    ap.add_argument("--peer", choices=("blocking", "asyncio"), help=argparse.SUPPRESS)
    args = harness.parse(ap, argv)
    if args.peer:
        if args.peer == "asyncio":
            asyncio.run(_serve_asyncio(PEER_SECONDS))
        else:
            _serve_blocking(time.monotonic() + PEER_SECONDS)
        return 0
    build = ROOT / "build"
    build.mkdir(exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="limits-", dir=build)
    try:
        start = time.perf_counter()
        lim = measure(workdir, quick=args.quick, log=print)
        print(json.dumps(lim, indent=2))
        for name, figure in rows(lim):
            print(f"| {name} | {figure} |")
        print(f"wall time {time.perf_counter() - start:.1f} s")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
