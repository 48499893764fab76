"""Parameters and the throughput/latency phases of the cluster bench.

A *round* starts each setup in turn (``single``, ``cluster1``, ``cluster3``;
the order reverses every other round) and, in each, runs for each of its
*configs* (``single``: one; ``cluster1``: a topic with replication_factor
1; ``cluster3``: replication_factor 1 and 3, in alternating order) the
phases W1 produce, W1 consume, W2 produce, W2 consume and the single-record
round trip, each in its own client process (bench/broker/worker.py, the
broker bench's worker: the same producer, consumer and round trip), then
deletes the config's topics and stops the setup. Around each phase's timed
section the CPU time of every process of the setup (each broker, etcd) and
the machine's busy time are sampled, and each broker's role for the topic
(which partitions it leads, which it follows) is noted.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from bench.broker.server import WorkerError
from bench.cluster.procs import ClusterWorker, Setup, cpu_delta, sample
from bench.common.stats import MiB

SECTIONS = ("throughput", "roundtrip", "failover")
# config -> (setup, replication factor of its topics)
CONFIGS = {"single": ("single", 1), "c1-rf1": ("cluster1", 1), "c3-rf1": ("cluster3", 1),
           "c3-rf3": ("cluster3", 3)}
LABELS = {"single": "single node, no etcd", "c1-rf1": "etcd + 1 broker, RF=1",
          "c3-rf1": "etcd + 3 brokers, RF=1", "c3-rf3": "etcd + 3 brokers, RF=3"}


@dataclass(frozen=True)
class Params:
    rounds: int = 5
    setups: tuple = ("single", "cluster1", "cluster3")
    w1_records: int = 100_000
    w1_value_bytes: int = 1024
    w1_partitions: int = 1
    w2_records: int = 500_000
    w2_value_bytes: int = 100
    w2_partitions: int = 3
    key_bytes: int = 16
    distinct_keys: int = 1024
    linger_ms: float = 5
    batch_size: int = 1 * MiB
    # The consumers' prefetch_bytes (default 32 MiB): large enough to hold a whole workload, as in
    # the runs of docs/benchmarks.md, which worked around a stall of consumers of several leaders
    # on a full buffer (fixed since, fbb3be3); 0: the Consumer's default
    consumer_prefetch_bytes: int = 256 * MiB
    rtt_sends: int = 2_000
    rtt_warmup: int = 100
    rtt_value_bytes: int = 100
    failover_trials: int = 7
    failover_interval_ms: float = 2.0  # the steady producer: one record every ...
    failover_value_bytes: int = 100
    failover_lead_s: float = 1.0  # producing before the kill (plus 0-0.5 s at random)
    failover_after_s: float = 0.3  # producing after the first ack of a post-kill record
    failover_limit_s: float = 30.0  # a trial fails if no post-kill ack within this
    failover_poll_ms: float = 20.0
    phase_timeout_s: float = 120.0
    seed: int = 10


QUICK = Params(rounds=1, w1_records=2_000, w2_records=10_000, rtt_sends=100, rtt_warmup=10, failover_trials=1,
               failover_lead_s=0.5, phase_timeout_s=60.0)

WORKLOADS = {"W1": ("w1_records", "w1_value_bytes", "w1_partitions"),
             "W2": ("w2_records", "w2_value_bytes", "w2_partitions")}


def setup_order(p: Params, round_no: int) -> list[str]:
    return list(p.setups) if round_no % 2 == 0 else list(reversed(p.setups))


def configs_of(setup: str, round_no: int) -> list[str]:
    names = [c for c, (s, _) in CONFIGS.items() if s == setup]
    return names if round_no % 2 == 0 else list(reversed(names))


def phase_count(p: Params, sections: tuple) -> int:
    per_config = 4 * ("throughput" in sections) + ("roundtrip" in sections)
    configs = sum(len(configs_of(s, 0)) for s in p.setups)
    return p.rounds * configs * per_config


def roles(setup: Setup, topic: str) -> dict:
    """broker id -> {"leads": [partitions], "follows": [partitions]} for ``topic``."""
    out = {i: {"leads": [], "follows": []} for i in setup.brokers}
    if not setup.clustered:
        out[1]["leads"] = ["all"]
        return out
    from logbroker import Admin

    with Admin(setup.bootstrap, request_timeout_ms=5_000) as admin:
        for part in admin.describe_cluster([topic]).partitions:
            for b in part.replicas:
                out.setdefault(b, {"leads": [], "follows": []})[
                    "leads" if b == part.leader else "follows"].append(part.partition)
    return out


class Round:
    """One setup's configs and phases within a round."""

    def __init__(self, p: Params, setup: Setup, round_no: int, tick, log=None) -> None:
        self.p, self.setup, self.round_no, self.tick = p, setup, round_no, tick
        self.log = log or (lambda msg: None)
        self.phases: list[dict] = []

    def phase(self, config: str, name: str, spec: dict) -> dict:
        p, setup = self.p, self.setup
        spec = {**spec, "bootstrap": setup.bootstrap, "deadline_s": p.phase_timeout_s}
        worker = ClusterWorker(spec, os.path.join(setup.dir, f"r{self.round_no}-{config}-{name}.log"))
        try:
            worker.wait_ready(p.phase_timeout_s)
            who = roles(setup, spec["topic"])
            before = sample(setup.pids())
            worker.go()
            out = worker.result(p.phase_timeout_s + 30)
            after = sample(setup.pids())
        except WorkerError as exc:
            raise WorkerError(f"round {self.round_no + 1} {config} {name}: {exc}\n{setup.log_tails()}") from None
        finally:
            worker.stop()
        dead = [i for i, b in setup.brokers.items() if not b.alive()] + (
            ["etcd"] if setup.etcd is not None and setup.etcd.proc.poll() is not None else [])
        if dead:
            raise RuntimeError(f"{config} {name}: process(es) {dead} died; logs in {setup.dir}")
        seconds = out["seconds"]
        cpu = cpu_delta(before, after)
        ours = sum(v["cpu_s"] for v in cpu.values()) + out["cpu_s"]
        wall = after["t"] - before["t"]
        out.update(config=config, phase=name, round=self.round_no, roles={str(k): v for k, v in who.items()},
                   cpu=cpu, records_per_s=out["records"] / seconds, mb_per_s=out["bytes"] / seconds / 1e6,
                   machine={"busy_cores": (after["busy_s"] - before["busy_s"]) / wall,
                            "ours_cores": ours / wall,
                            "other_cores": max(after["busy_s"] - before["busy_s"] - ours, 0.0) / wall,
                            "steal_s": after["steal_s"] - before["steal_s"]})
        self.phases.append(out)
        self.tick()
        return out

    def workload(self, config: str, wl: str, rf: int) -> None:
        p = self.p
        records, value_bytes, partitions = (getattr(p, a) for a in WORKLOADS[wl])
        topic = f"{wl.lower()}-{config}-r{self.round_no}"
        configs = {"replication_factor": rf} if self.setup.clustered else None
        base = {"topic": topic, "partitions": partitions, "records": records}
        made = self.phase(config, f"{wl}.produce", {
            **base, "mode": "produce", "configs": configs, "value_bytes": value_bytes, "key_bytes": p.key_bytes,
            "distinct_keys": p.distinct_keys, "acks": "all", "linger_ms": p.linger_ms, "batch_size": p.batch_size})
        if partitions == 1 and made["last_offset"] != records - 1:
            raise RuntimeError(f"{config} {wl}: last offset {made['last_offset']}, expected {records - 1}")
        got = self.phase(config, f"{wl}.consume", {**base, "mode": "consume",
                                                     "prefetch_bytes": p.consumer_prefetch_bytes})
        expected = records * (value_bytes + p.key_bytes)
        if got["records"] != records or got["bytes"] != expected:
            raise RuntimeError(f"{config} {wl}: consumed {got['records']} records / {got['bytes']} bytes, "
                               f"expected {records} / {expected}")

    def roundtrip(self, config: str, rf: int) -> None:
        p = self.p
        self.phase(config, "roundtrip", {
            "mode": "roundtrip", "topic": f"rtt-{config}-r{self.round_no}", "sends": p.rtt_sends,
            "warmup": p.rtt_warmup, "value_bytes": p.rtt_value_bytes, "key_bytes": p.key_bytes, "acks": "all",
            "configs": {"replication_factor": rf} if self.setup.clustered else None})

    def drop_topics(self, config: str) -> None:
        """Delete the config's topics (bounded disk use over many rounds)."""
        from logbroker import Admin

        with Admin(self.setup.bootstrap, request_timeout_ms=30_000) as admin:
            names = [t for t in admin.list_topics() if f"-{config}-r{self.round_no}" in t]
            if names:
                admin.delete_topics(names, raise_errors=False)

    def run(self, sections: tuple) -> list[dict]:
        for config in configs_of(self.setup.kind, self.round_no):
            rf = CONFIGS[config][1]
            if "throughput" in sections:
                for wl in ("W1", "W2"):
                    self.workload(config, wl, rf)
            if "roundtrip" in sections:
                self.roundtrip(config, rf)
            self.drop_topics(config)
            self.log(f"round {self.round_no + 1} {config}: " + ", ".join(
                f"{ph['phase']} " + (f"p50 {ph['p50_ms']:.2f} ms" if "p50_ms" in ph else f"{ph['records_per_s']:,.0f}/s")
                for ph in self.phases if ph["config"] == config))
        return self.phases


def run_round(p: Params, workdir: str, round_no: int, sections: tuple, tick, log=None) -> dict:
    """Every setup of one round, started and stopped in turn."""
    out = {"round": round_no, "phases": [], "setups": {}}
    for kind in setup_order(p, round_no):
        setup = Setup(kind, os.path.join(workdir, f"round-{round_no}"))
        pids = {}
        try:
            setup.start(p.phase_timeout_s)
            pids = setup.pids()
            out["phases"] += Round(p, setup, round_no, tick, log).run(sections)
        finally:
            setup.stop()
        out["setups"][kind] = {"start_s": setup.start_s, "stop_s": setup.stop_s, "pids": pids,
                               "exit_codes": setup.exit_codes, "hung": setup.hung}
        if setup.hung and log:
            log(f"round {round_no + 1} {kind}: {', '.join(setup.hung)} did not stop within 30 s of SIGTERM "
                "(stacks in the JSON output, setups.hung)")
    return out
