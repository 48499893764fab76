"""The measurements of ``python -m bench.latency`` (bench/latency/__main__.py says
what the bench is): each stage returns the latencies of its timed sends
(nanoseconds, in send order) and what it counted meanwhile.

- floors: loopback TCP ping-pong (``bench.peers.limits``'s blocking echo
  peer) and 1 KiB ``pwrite`` + ``fdatasync`` on a growing or preallocated
  file;
- broker stages: a fresh ``logbroker serve`` per stage; the client runs in
  this process (``bench.broker.worker``'s ``roundtrip_raw`` / ``roundtrip``,
  the asyncio producer, or the sync producer with its response callback
  stamped); the broker's user/system CPU and context switches are read
  from ``/proc`` around the timed sends, the client's CPU with
  ``time.process_time``.

Every loop is bounded by a count and by a deadline; every process started
here is stopped by its PID.
"""

from __future__ import annotations

import asyncio
import glob
import os
import shutil
import subprocess
import time
from dataclasses import dataclass

from bench.broker import worker
from bench.broker.server import BrokerServer
from bench.common.procfs import CLK_TCK
from bench.common.procs import spawn, stop_process
from bench.common.stats import KiB, MiB, percentile_ms
from bench.peers.limits import Peer, blocking_pingpong

VALUE_BYTES, KEY_BYTES = 1024, 16


@dataclass(frozen=True)
class Params:
    rounds: int = 3
    sends: int = 3000  # timed sends per stage per round
    warmup: int = 200
    strace_sends: int = 300
    stage_seconds: float = 120.0  # deadline of one stage's timed sends

    def spec(self, bootstrap: str, topic: str) -> dict:
        """A ``bench.broker.worker`` spec: one 1,024 B value + 16 B key, acks=all."""
        return {"bootstrap": bootstrap, "topic": topic, "value_bytes": VALUE_BYTES,
                "key_bytes": KEY_BYTES, "acks": "all", "sends": self.sends, "warmup": self.warmup,
                "deadline_s": self.stage_seconds}


def percentiles(lat_ns: list[int]) -> dict:
    ordered = sorted(lat_ns)
    return {"p50_ms": percentile_ms(ordered, 0.5), "p99_ms": percentile_ms(ordered, 0.99),
            "n": len(ordered)}


# -- floors --------------------------------------------------------------------------------
def pingpong(p: Params) -> dict:
    """100 B ping-pongs with a blocking echo process over loopback TCP."""
    peer = Peer("blocking")
    try:
        blocking_pingpong(peer.port, p.warmup, p.stage_seconds)
        rtts = blocking_pingpong(peer.port, p.sends, p.stage_seconds)
    finally:
        peer.stop()
    return percentiles(rtts)


def pwrite_fdatasync(path: str, p: Params, preallocate: bool) -> dict:
    """1 KiB ``os.pwrite`` at the end of what was written + ``os.fdatasync``,
    each timed. ``preallocate``: the file is first zero-filled to its final
    size and fsynced, so no write changes the file size (no inode-size
    journal commit per fdatasync)."""
    total = p.warmup + p.sends
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
    lat: list[int] = []
    try:
        if preallocate:
            zeros = bytes(MiB)
            for at in range(0, total * KiB, MiB):
                os.pwrite(fd, zeros[:min(MiB, total * KiB - at)], at)
            os.fsync(fd)
        data, clock = os.urandom(KiB), time.perf_counter_ns
        deadline = time.perf_counter() + p.stage_seconds
        for i in range(total):
            t0 = clock()
            os.pwrite(fd, data, i * KiB)
            os.fdatasync(fd)
            if i >= p.warmup:
                lat.append(clock() - t0)
            if time.perf_counter() > deadline:
                break
    finally:
        os.close(fd)
        os.unlink(path)
    return {**percentiles(lat), "preallocated": preallocate}


# -- the broker's side, from /proc ---------------------------------------------------------
def broker_counters(pid: int) -> dict:
    """utime and stime (seconds, all threads) and the voluntary + involuntary
    context switches summed over the process's threads."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    ctx = threads = 0
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            with open(status) as fh:
                for line in fh:
                    if line.startswith(("voluntary_ctxt_switches:", "nonvoluntary_ctxt_switches:")):
                        ctx += int(line.split()[1])
            threads += 1
        except OSError:  # a thread that just ended
            pass
    return {"user_s": int(fields[11]) / CLK_TCK, "sys_s": int(fields[12]) / CLK_TCK, "ctx": ctx,
            "threads": threads}


def per_send(before: dict, after: dict, sends: int) -> dict:
    return {"user_us": (after["user_s"] - before["user_s"]) / sends * 1e6,
            "sys_us": (after["sys_s"] - before["sys_s"]) / sends * 1e6,
            "ctx": (after["ctx"] - before["ctx"]) / sends, "threads": after["threads"]}


# -- clients: each ``client(spec) -> (timed(deadline) -> {"lat": [...], ...}, close)`` --------
def worker_client(mode: str):
    """``bench.broker.worker``'s ``roundtrip_raw`` or ``roundtrip`` (warm-up
    included; it times each send and gives the percentiles)."""
    def client(spec: dict):
        timed, close = worker.MODES[mode](spec)

        def run(deadline: worker.Deadline) -> dict:
            out = timed(deadline)
            return {"lat": None, "p50_ms": out["p50_ms"], "p99_ms": out["p99_ms"], "n": out["records"]}

        return run, close
    return client


def aio_client(spec: dict):
    """``logbroker.aio.Producer``: ``await (await producer.send(...))`` per
    record, on an event loop of its own in this thread."""
    from logbroker.aio import Producer as AioProducer

    worker.ensure_topic(spec)
    loop = asyncio.new_event_loop()
    topic, value = spec["topic"], b"v" * spec["value_bytes"]
    key = worker.make_keys(1, spec["key_bytes"])[0]

    async def start() -> AioProducer:
        producer = AioProducer(spec["bootstrap"], acks="all", linger_ms=0, request_timeout_ms=10_000,
                               delivery_timeout_ms=20_000)
        for _ in range(spec["warmup"]):
            await (await producer.send(topic, value, key=key))
        return producer

    try:
        producer = loop.run_until_complete(start())
    except BaseException:
        loop.close()
        raise

    async def sends(deadline: worker.Deadline) -> list[int]:
        clock, lat, send = time.perf_counter_ns, [], producer.send
        for _ in range(spec["sends"]):
            t0 = clock()
            await (await send(topic, value, key=key))
            lat.append(clock() - t0)
            deadline.check()
        return lat

    def close() -> None:
        try:
            loop.run_until_complete(producer.close(timeout=5))
        finally:
            loop.close()

    return (lambda deadline: {"lat": loop.run_until_complete(sends(deadline))}), close


def split_client(spec: dict):
    """The sync producer with its response callback stamped: per send, the
    ``send()`` call, send() return -> the response callback's start, the
    callback, and the callback's end -> ``result()`` returning. Wraps this
    producer instance's ``sender._on_response`` (looked up per request by
    ``partial(self._on_response, ...)`` when the request is sent)."""
    from logbroker import Producer

    worker.ensure_topic(spec)
    topic, value = spec["topic"], b"v" * spec["value_bytes"]
    key = worker.make_keys(1, spec["key_bytes"])[0]
    producer = Producer(spec["bootstrap"], acks="all", linger_ms=0)
    sender, clock = producer._core.sender, time.perf_counter_ns
    original = sender._on_response
    starts: list[int] = []
    ends: list[int] = []

    def on_response(*args) -> None:
        starts.append(clock())
        try:
            original(*args)
        finally:
            ends.append(clock())

    sender._on_response = on_response  # the bench's own instance only
    send = producer.send
    for _ in range(spec["warmup"]):
        send(topic, value, key=key).result(timeout=10)

    def timed(deadline: worker.Deadline) -> dict:
        for _ in range(1000):  # the warm-up's last callback may still be ending
            if len(ends) == len(starts):
                break
            time.sleep(0.001)
        starts.clear()
        ends.clear()
        calls, returns, lat = [], [], []
        for _ in range(spec["sends"]):
            t0 = clock()
            handle = send(topic, value, key=key)
            t1 = clock()
            handle.result(timeout=10)
            t3 = clock()
            calls.append((t0, t1))
            returns.append(t3)
            lat.append(t3 - t0)
            deadline.check()
        for _ in range(1000):  # bounded wait for the last callback's end stamp
            if len(ends) >= len(calls):
                break
            time.sleep(0.001)
        if len(starts) != len(calls) or len(ends) != len(calls):
            raise RuntimeError(f"split: {len(starts)} callback starts and {len(ends)} ends for "
                               f"{len(calls)} sends (one request per send expected)")
        parts = {"send_call": [t1 - t0 for t0, t1 in calls],
                 "to_callback": [s - t1 for (_, t1), s in zip(calls, starts)],
                 "callback": [e - s for s, e in zip(starts, ends)],
                 "to_result": [t3 - e for e, t3 in zip(ends, returns)]}
        return {"lat": lat, "split": {name: split_stats(v) for name, v in parts.items()}}

    return timed, producer.close


def split_stats(values_ns: list[int]) -> dict:
    """p50 and p99 of signed nanoseconds, in ms (a hand-off may be negative:
    the caller can run before the callback's last instructions)."""
    ordered = sorted(values_ns)
    return {"p50_ms": percentile_ms(ordered, 0.5), "p99_ms": percentile_ms(ordered, 0.99),
            "negative": sum(v < 0 for v in ordered)}


CLIENTS = {"raw": worker_client("roundtrip_raw"), "sync": worker_client("roundtrip"),
           "aio": aio_client, "split": split_client}


def broker_stage(workdir: str, name: str, flush: str, client: str, p: Params) -> dict:
    """A fresh ``flush`` broker, ``client``'s warm-up, then its timed sends
    with the broker's and this process's CPU counted around them."""
    data = os.path.join(workdir, name)
    server = BrokerServer(data, flush).start()
    pid = server.pid
    try:
        timed, close = CLIENTS[client](p.spec(server.bootstrap, "lat"))
        try:
            deadline = worker.Deadline(p.stage_seconds, name)
            before, cpu0 = broker_counters(server.pid), time.process_time()
            out = timed(deadline)
            cpu, after = time.process_time() - cpu0, broker_counters(server.pid)
        finally:
            close()
        if not server.alive():
            raise RuntimeError(f"the broker died during {name}:\n{server.log()[-2000:]}")
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)
    lat = out.pop("lat")
    stats = percentiles(lat) if lat is not None else {k: out.pop(k) for k in ("p50_ms", "p99_ms", "n")}
    n = stats["n"]
    return {**stats, **out, "flush": flush, "client": client, "client_cpu_us": cpu / n * 1e6,
            "broker": per_send(before, after, n), "broker_pid": pid,
            "broker_exit_code": server.exit_code}


# -- syscalls per durable send (strace -c) --------------------------------------------------
def syscalls(workdir: str, p: Params) -> dict:
    """``strace -c -f -p <broker>`` around ``strace_sends`` raw-socket sends
    to a fresh fsync broker (warmed up before strace attaches; strace's
    timing is not used). Returns every syscall's calls per send, or
    ``{"skipped": why}``."""
    strace = shutil.which("strace")
    if strace is None:
        return {"skipped": "strace is not on PATH"}
    data = os.path.join(workdir, "strace")
    server = BrokerServer(data, "fsync").start()
    try:
        timed, close = worker.MODES["roundtrip_raw"]({**p.spec(server.bootstrap, "lat"),
                                                      "sends": p.strace_sends})
        try:
            return _traced(strace, server.pid, data, timed, p)
        finally:
            close()
    finally:
        server.stop()
        shutil.rmtree(data, ignore_errors=True)


def _traced(strace: str, pid: int, data: str, timed, p: Params) -> dict:
    table, errors = data + ".strace", data + ".strace-err"
    with open(errors, "w") as err:
        tracer = spawn([strace, "-c", "-f", "-o", table, "-p", str(pid)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 10
        while "attached" not in _read(errors) and tracer.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if "attached" not in _read(errors):
            return {"skipped": f"strace did not attach: {_read(errors).strip()[-300:]!r}"}
        out = timed(worker.Deadline(p.stage_seconds, "strace"))
    finally:
        stop_process(tracer, 10)  # SIGTERM: strace detaches and writes its table
    counts = parse_strace_c(_read(table))
    if not counts:
        return {"skipped": f"no strace -c table ({_read(errors).strip()[-300:]!r})"}
    sends = out["records"]
    return {"sends": sends, "per_send": {name: calls / sends for name, calls in
                                         sorted(counts.items(), key=lambda kv: -kv[1])}}


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def parse_strace_c(text: str) -> dict[str, int]:
    """``{syscall: calls}`` from ``strace -c``'s table (% time, seconds,
    usecs/call, calls, [errors,] syscall), without the total line."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 5 or cols[-1] == "total":
            continue
        try:
            float(cols[0])
            calls = int(cols[3])
        except ValueError:
            continue
        counts[cols[-1]] = counts.get(cols[-1], 0) + calls
    return counts
