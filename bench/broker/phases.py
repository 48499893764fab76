"""Parameters and phases of the broker benchmark (``python -m bench.broker``).

A *run* starts one fresh ``logbroker serve`` (fsync or lazy flush policy) on
a fresh data dir and runs its phases one after another, each in its own
client process (bench/broker/worker.py): W1 produce, W1 consume, W2 produce,
W2 consume, the single-record round trip, and (fsync runs) the fetch probe:
fill a topic with small segments, then read its sealed segments with a raw
protocol reader and with ``logbroker.Consumer``. Around each phase's timed
section the broker's CPU time (``/proc/<pid>/stat``) is sampled, its peak
RSS (``VmHWM``) reset and read, and the machine's busy CPU time
(``/proc/stat``) taken, so that the CPU used meanwhile by other processes on
the machine (other sessions) is on record as a noise gauge.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from bench.broker.profiling import Profiler
from bench.broker.server import BrokerServer, Worker
from bench.common.procfs import reset_peak
from bench.common.stats import MiB

SECTIONS = ("w1", "w2", "roundtrip", "fetch")


@dataclass(frozen=True)
class Params:
    repeats: int = 5  # durable (fsync) runs
    lazy_repeats: int = 3  # --flush lazy runs, interleaved with the durable ones
    w1_records: int = 200_000
    w1_value_bytes: int = 1024
    w2_records: int = 1_000_000
    w2_value_bytes: int = 100
    key_bytes: int = 16
    distinct_keys: int = 1024
    partitions: int = 1
    acks: str = "all"
    linger_ms: float = 5
    batch_size: int = 1 * MiB
    rtt_sends: int = 10_000
    rtt_warmup: int = 200
    rtt_value_bytes: int = 100
    fetch_bytes: int = 320 * MiB  # produced as 1 KiB records, then read back
    fetch_segment_bytes: int = 64 * MiB
    fetch_max_bytes: int = 16 * MiB  # the Consumer's defaults (fetch_max_bytes, max_partition_fetch_bytes)
    fetch_part_bytes: int = 8 * MiB
    fetch_min_seconds: float = 1.0
    fetch_max_passes: int = 100
    phase_timeout_s: float = 120.0  # per phase (setup and timed section each)


QUICK = Params(repeats=1, lazy_repeats=1, w1_records=2_000, w2_records=10_000, rtt_sends=100,
               rtt_warmup=10, fetch_bytes=int(3.2 * MiB), fetch_segment_bytes=1 * MiB,
               fetch_min_seconds=0.05, fetch_max_passes=3, phase_timeout_s=60.0)

WORKLOADS = {"W1": ("w1_records", "w1_value_bytes"), "W2": ("w2_records", "w2_value_bytes")}


def phase_names(p: Params, sections: tuple, flush: str) -> list[str]:
    names = []
    for wl in ("W1", "W2"):
        if wl.lower() in sections:
            names += [f"{wl}.produce", f"{wl}.consume"]
    if "roundtrip" in sections:
        names += ["roundtrip.raw", "roundtrip"]
    if "fetch" in sections and flush == "fsync":
        names += ["fetch.fill", "fetch.raw", "fetch.consumer"]
    return names


class Run:
    """One broker, one data dir, its phases in order."""

    def __init__(self, p: Params, flush: str, workdir: str, tick, profiler: "Profiler | None") -> None:
        self.p, self.flush, self.tick, self.profiler = p, flush, tick, profiler
        self.dir = tempfile.mkdtemp(prefix=f"run-{flush}-", dir=workdir)
        self.server = BrokerServer(os.path.join(self.dir, "data"), flush)
        self.phases: dict[str, dict] = {}

    def phase(self, name: str, spec: dict) -> dict:
        p, server = self.p, self.server
        spec = {**spec, "bootstrap": server.bootstrap, "deadline_s": p.phase_timeout_s}
        if self.profiler and self.profiler.cprofile:
            spec["profile"] = self.profiler.path(self.flush, name, "client", "prof")
        worker = Worker(spec, os.path.join(self.dir, f"{name}.log"))
        spies = []
        try:
            worker.wait_ready(p.phase_timeout_s)
            if self.profiler:
                spies = self.profiler.start(self.flush, name, server.pid, worker.pid)
            reset = reset_peak(server.pid)
            before = server.sample()
            worker.go()
            out = worker.result(p.phase_timeout_s + 30)
            after = server.sample()
        finally:
            if self.profiler:
                self.profiler.stop(spies)
            worker.stop()
        seconds = out["seconds"]
        out["records_per_s"] = out["records"] / seconds
        out["mb_per_s"] = out["bytes"] / seconds / 1e6
        broker_cpu = after["cpu_s"] - before["cpu_s"]
        out["broker"] = {"cpu_s": broker_cpu,
                         "peak_rss_mib": after["hwm_kib"] / 1024, "rss_mib": after["rss_kib"] / 1024,
                         "peak_is_phase": reset}
        # CPU used meanwhile by everything else on the machine (other sessions): the noise gauge
        out["machine"] = {"other_cpu_s": max(after["busy_s"] - before["busy_s"] - broker_cpu - out["cpu_s"], 0.0),
                          "steal_s": after["steal_s"] - before["steal_s"]}
        if not server.alive():
            raise RuntimeError(f"the broker died during {name}:\n{server.log()[-2000:]}")
        self.phases[name] = out
        self.tick()
        return out

    def workload(self, wl: str) -> None:
        p = self.p
        records, value_bytes = (getattr(p, a) for a in WORKLOADS[wl])
        topic = wl.lower()
        base = {"topic": topic, "partitions": p.partitions, "records": records}
        made = self.phase(f"{wl}.produce", {
            **base, "mode": "produce", "value_bytes": value_bytes, "key_bytes": p.key_bytes,
            "distinct_keys": p.distinct_keys, "acks": p.acks, "linger_ms": p.linger_ms,
            "batch_size": p.batch_size})
        if p.partitions == 1 and made["last_offset"] != records - 1:
            raise RuntimeError(f"{wl}: last offset {made['last_offset']}, expected {records - 1}")
        got = self.phase(f"{wl}.consume", {**base, "mode": "consume"})
        expected = records * (value_bytes + p.key_bytes)
        if got["records"] != records or got["bytes"] != expected:
            raise RuntimeError(f"{wl}: consumed {got['records']} records / {got['bytes']} bytes, "
                               f"expected {records} / {expected}")

    def roundtrip(self) -> None:
        """The raw-socket floor, then the client, on the same broker; the client's
        overhead is the difference of their percentiles in this run."""
        p = self.p
        base = {"sends": p.rtt_sends, "warmup": p.rtt_warmup, "value_bytes": p.rtt_value_bytes,
                "key_bytes": p.key_bytes, "acks": p.acks}
        raw = self.phase("roundtrip.raw", {**base, "mode": "roundtrip_raw", "topic": "rtt-raw"})
        client = self.phase("roundtrip", {**base, "mode": "roundtrip", "topic": "rtt"})
        for q in ("p50", "p99", "mean"):
            client[f"overhead_{q}_ms"] = client[f"{q}_ms"] - raw[f"{q}_ms"]

    def fetch(self) -> None:
        p = self.p
        records = p.fetch_bytes // (p.w1_value_bytes + p.key_bytes)
        self.phase("fetch.fill", {
            "mode": "produce", "topic": "sealed", "partitions": 1, "records": records,
            "configs": {"segment_bytes": p.fetch_segment_bytes}, "value_bytes": p.w1_value_bytes,
            "key_bytes": p.key_bytes, "distinct_keys": p.distinct_keys, "acks": p.acks,
            "linger_ms": p.linger_ms, "batch_size": p.batch_size})
        end, sealed_bytes, segments = sealed_extent(os.path.join(self.server.data_dir, "sealed-0"))
        base = {"topic": "sealed", "partition": 0, "end_offset": end}
        raw = self.phase("fetch.raw", {
            **base, "mode": "fetch_raw", "fetch_max_bytes": p.fetch_max_bytes,
            "part_max_bytes": p.fetch_part_bytes, "min_seconds": p.fetch_min_seconds,
            "max_passes": p.fetch_max_passes,
            "max_fetches_per_pass": 4 * (sealed_bytes // p.fetch_part_bytes + segments) + 16})
        raw["gb_per_s"] = raw["bytes"] / raw["seconds_measured"] / 1e9
        raw["sealed_bytes"], raw["sealed_segments"], raw["end_offset"] = sealed_bytes, segments, end
        raw["broker"]["cpu_s_per_gb"] = raw["broker"]["cpu_s"] / (raw["bytes"] / 1e9)
        got = self.phase("fetch.consumer", {**base, "mode": "fetch_consumer"})
        if got["records"] != end:
            raise RuntimeError(f"fetch.consumer read {got['records']} records, expected {end}")
        got["gb_per_s"] = got["bytes"] / got["seconds"] / 1e9

    def run(self, sections: tuple) -> dict:
        pid, calibration = None, calibrate()
        try:
            self.server.start(self.p.phase_timeout_s)
            pid = self.server.pid
            for wl in ("W1", "W2"):
                if wl.lower() in sections:
                    self.workload(wl)
            if "roundtrip" in sections:
                self.roundtrip()
            if "fetch" in sections and self.flush == "fsync":
                self.fetch()
        finally:
            code = self.server.stop()
            shutil.rmtree(self.dir, ignore_errors=True)
        return {"flush": self.flush, "broker_pid": pid, "broker_exit_code": code,
                "calibration_ms": calibration, "phases": self.phases}


def calibrate(rounds: int = 3) -> float:
    """ms for a fixed pure-Python loop (best of ``rounds``): a gauge of how fast
    this shared VM's CPU was around a run (noisy neighbours slow it down)."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        sum(i * i for i in range(300_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def sealed_extent(partition_dir: str) -> tuple[int, int, int]:
    """(end offset, bytes, count) of the sealed segments of a partition dir: all
    segments but the last (active) one, from ``<20-digit base offset>.log`` names."""
    logs = sorted(f for f in os.listdir(partition_dir) if f.endswith(".log"))
    if len(logs) < 2:
        raise RuntimeError(f"{partition_dir}: {len(logs)} segment(s), no sealed data to fetch")
    sealed = logs[:-1]
    size = sum(os.path.getsize(os.path.join(partition_dir, f)) for f in sealed)
    return int(logs[-1][:-4]), size, len(sealed)
