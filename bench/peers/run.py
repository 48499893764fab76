"""One run of every workload on one system: start it in its own dir, run the
client processes one after another, measure the server around each, stop it.

``run_system(name, work, sizes, deadline)`` returns ``{phase: result}`` with
phases ``W1/produce``, ``W1/consume``, ``W1/window``, ``W2/produce``,
``W2/consume``, ``W2/window``, ``RT/roundtrip``, ``RT1k/roundtrip``,
``scale/produce``, ``scale/consume``. ``W*/window`` is the same workload's
records produced in windows of ``sizes["window"]`` (1,000: send them, wait
for every ack, next; bench/peers/windows.py, and for logbroker the
``window`` key of bench/broker/worker.py's ``produce`` with the Producer's
defaults, acks="all", linger_ms=0) to a fresh topic / stream, after that
workload's consumer. ``RT1k`` is ``RT`` with 1,024 B values. A result is the
client's JSON (``records``, ``seconds``, ``p50_ms``...) plus the server's
``cpu_s``, ``peak_rss_mib``, ``disk_bytes`` and ``disk_before``
(``metrics.Probe.around``), or ``{"error": ...}``. Every client is bounded by
a count and ``deadline`` seconds; every server is stopped by its PID.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from bench.broker.server import BrokerServer, Worker
from bench.peers.clients import run_client
from bench.peers.loops import KEY_BYTES, KEYS
from bench.peers.metrics import Probe
from bench.peers.servers import RabbitServer, start_nats, start_redis


@dataclass(frozen=True)
class System:
    name: str
    durability: str
    fsync: bool  # does an ack wait for fsync?
    client: str  # the client library the runs use


SYSTEMS = {s.name: s for s in (
    System("logbroker", "fsync before ack (default `--flush fsync`)", True, "logbroker.Producer/Consumer"),
    System("logbroker-lazy", "no fsync per ack (`--flush lazy`)", False, "logbroker.Producer/Consumer"),
    System("redis-always", "AOF `appendfsync always` (fsync before reply; no auto-rewrite)", True,
           "redis-py + hiredis"),
    System("redis-everysec", "AOF `appendfsync everysec` (no fsync per ack; no auto-rewrite)", False,
           "redis-py + hiredis"),
    System("nats", "JetStream file store default (no fsync per ack)", False, "nats-py"),
    System("rabbitmq", "RabbitMQ Streams default (no fsync per ack)", False, "rstream"),
)}
PHASES = ("W1/produce", "W1/consume", "W1/window", "W2/produce", "W2/consume", "W2/window",
          "RT/roundtrip", "RT1k/roundtrip", "scale/produce", "scale/consume")
RT_VALUE = {"RT": 100, "RT1k": 1024}  # value bytes of the round-trip workloads


class _Running:
    """A started system: ``probe`` (server process tree + data dir), ``target``
    (how clients reach it) and ``stop()``."""

    def __init__(self, name: str, d: str) -> None:
        self.name, self.d = name, d
        if name.startswith("logbroker"):
            self.server = BrokerServer(d, "lazy" if name.endswith("lazy") else "fsync").start()
            self.probe = Probe(self.server.pid, d)
            self.target = {"bootstrap": self.server.bootstrap}
            return
        if name.startswith("redis-"):
            self.server = start_redis(d, name.split("-", 1)[1])
        elif name == "nats":
            self.server = start_nats(d)
        elif name == "rabbitmq":
            self.server = RabbitServer(d)
        else:
            raise SystemExit(f"unknown system {name!r}; known: {', '.join(SYSTEMS)}")
        self.probe = Probe(self.server.proc.pid, d)
        self.target = {"port": self.server.port}

    def stop(self) -> None:
        self.server.stop()


def _worker(spec: dict, log_path: str, timeout: float) -> dict:
    """A logbroker client run (``bench.broker.worker``): set up, then timed."""
    w = Worker(spec, log_path)
    try:
        w.wait_ready(60)
        w.go()
        return w.result(timeout)
    finally:
        w.stop()


def _guarded(fn: Callable[[], dict]) -> dict:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a failed phase is a row cell, not a crash
        return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}


def _logbroker_phase(r: _Running, phase: str, sizes: dict, deadline: float, logs: str) -> Callable[[], dict]:
    wl, mode = phase.split("/")
    log_path = os.path.join(logs, f"{r.name}-{wl}-{mode}.log")
    if wl in ("W1", "W2"):
        n, vb = sizes[wl]
        spec = {**r.target, "topic": f"peers-{wl.lower()}", "records": n, "value_bytes": vb,
                "key_bytes": KEY_BYTES, "distinct_keys": KEYS, "acks": "all", "linger_ms": 5,
                "batch_size": 1 << 20, "deadline_s": deadline, "partitions": 1, "mode": mode}
        if mode == "window":  # the Producer's defaults; a window at a time
            del spec["batch_size"]
            spec.update(topic=f"peers-{wl.lower()}-window", linger_ms=0, mode="produce",
                        window=sizes.get("window", 1000))
        return lambda: _worker(spec, log_path, deadline + 30)
    if wl in RT_VALUE:
        spec = {**r.target, "topic": f"peers-{wl.lower()}", "mode": "roundtrip", "value_bytes": RT_VALUE[wl],
                "key_bytes": KEY_BYTES, "acks": "all", "sends": sizes[wl], "warmup": 100,
                "deadline_s": deadline}
        return lambda: _worker(spec, log_path, deadline + 30)
    return _scale(r, "logbroker", mode, sizes, deadline)


def _scale(r: _Running, system: str, mode: str, sizes: dict, deadline: float) -> Callable[[], dict]:
    topics, per = sizes["scale"]
    spec = {**r.target, "system": system, "mode": f"scale_{mode}", "topics": topics, "prefix": "scale",
            "records_per_topic": per, "value_bytes": 100, "deadline_s": deadline}
    return lambda: run_client(spec, deadline + 30)


def _peer_phase(r: _Running, phase: str, sizes: dict, deadline: float) -> Callable[[], dict]:
    system = "redis" if r.name.startswith("redis-") else r.name
    wl, mode = phase.split("/")
    if wl in ("W1", "W2"):
        n, vb = sizes[wl]
        spec = {**r.target, "system": system, "stream": f"peers{wl.lower()}", "records": n,
                "value_bytes": vb, "deadline_s": deadline, "mode": mode}
        if mode == "window":
            spec.update(stream=f"peers{wl.lower()}win", window=sizes.get("window", 1000))
        return lambda: run_client(spec, deadline + 30)
    if wl in RT_VALUE:
        spec = {**r.target, "system": system, "stream": f"peers{wl.lower()}", "mode": "roundtrip",
                "value_bytes": RT_VALUE[wl], "sends": sizes[wl], "deadline_s": deadline}
        return lambda: run_client(spec, deadline + 30)
    return _scale(r, system, mode, sizes, deadline)


def run_system(name: str, work: str, sizes: dict, deadline: float, log=print) -> dict:
    """Every phase on a fresh ``name`` in ``work/name``; see the module docstring."""
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    try:
        r = _Running(name, d)
    except Exception as exc:  # noqa: BLE001
        err = {"error": f"start: {type(exc).__name__}: {str(exc)[:300]}"}
        return {p: err for p in PHASES}
    out: dict = {}
    try:
        for phase in PHASES:
            fn = (_logbroker_phase(r, phase, sizes, deadline, work) if name.startswith("logbroker")
                  else _peer_phase(r, phase, sizes, deadline))
            out[phase] = _guarded(lambda: r.probe.around(fn))
            res = out[phase]
            if "error" in res or "records" not in res:
                log(f"   {name} {phase}: {res.get('error', res)}")
    finally:
        r.stop()
    return out
