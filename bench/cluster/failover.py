"""Failover trials: kill -9 of a partition's leader under a steady acks=all
producer, on etcd + 3 brokers with default settings (session_timeout_ms
2000, default etcd raft ticks).

One trial:

1. the topic ``failover`` (1 partition, replication_factor 3,
   min_insync_replicas 2 by default) has its preferred leader back as
   leader and all three replicas in the ISR;
2. the steady producer (bench/cluster/worker.py: a record every
   ``interval_ms``) runs for ``lead_s`` plus a random 0-0.5 s (so the kill
   falls anywhere in the leader's 0.5 s lease-refresh cycle);
3. the bench notes ``time.monotonic()`` and sends SIGKILL to the leader's
   PID, then tells the producer that time;
4. meanwhile a poller in the bench (``Admin.describe_cluster`` on a
   surviving broker every ``poll_ms``) notes when the killed broker drops
   out of the live brokers (its etcd lease expired) and when a new leader
   shows in the metadata;
5. the producer reports the first ack of a record sent after the kill (and
   the others of ``worker.figures``);
6. the killed broker is started again on its port and data dir and waits
   until it is back in the ISR; ``Admin.elect_leaders`` makes it leader
   again (skipped after the last trial).
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from bench.cluster.procs import ClusterWorker, Setup
from bench.common.procs import wait_until

TOPIC = "failover"




class Poller:
    """Polls ``describe_cluster([topic])`` on the surviving brokers every
    ``interval`` s from its own thread and notes (monotonic time) when the
    killed broker is no longer live and when the partition's leader is
    neither it nor -1."""

    def __init__(self, bootstrap: str, victim: int, interval: float, limit_s: float) -> None:
        from logbroker import Admin

        self.admin = Admin(bootstrap, request_timeout_ms=2_000, connect_timeout_ms=1_000)
        self.victim, self.interval, self.limit_s = victim, interval, limit_s
        self.lease_gone: "float | None" = None
        self.elected: "float | None" = None
        self.new_leader = -1
        self.new_controller = -1
        self.polls = self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Poller":
        self._thread.start()
        return self

    def _run(self) -> None:
        end = time.monotonic() + self.limit_s
        while not self._stop.is_set() and time.monotonic() < end and self.elected is None:
            try:
                desc = self.admin.describe_cluster([TOPIC])
                now = time.monotonic()
                self.polls += 1
                if self.lease_gone is None and not any(b.id == self.victim and b.live for b in desc.brokers):
                    self.lease_gone = now
                part = desc.partitions[0]
                if part.leader not in (-1, self.victim):
                    self.elected, self.new_leader = now, part.leader
                    self.new_controller = desc.controller
                    if self.lease_gone is None:
                        self.lease_gone = now
            except Exception:  # noqa: BLE001 - a failed poll is counted and repeated
                self.errors += 1
            self._stop.wait(self.interval)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.admin.close()


def describe(setup: Setup) -> tuple:
    from logbroker import Admin

    with Admin(setup.live_bootstrap(), request_timeout_ms=5_000) as admin:
        desc = admin.describe_cluster([TOPIC])
    return desc.partitions[0], desc.controller


def prepare(setup: Setup, min_isr: "int | None") -> None:
    from logbroker import Admin

    configs = {"min_insync_replicas": min_isr} if min_isr else {}
    with Admin(setup.bootstrap, request_timeout_ms=10_000) as admin:
        admin.create_topic(TOPIC, 1, configs, replication_factor=3)
    def ready() -> bool:
        part = describe(setup)[0]
        return part.leader >= 0 and len(part.isr) == 3

    wait_until(ready, 30, "failover topic with 3 replicas in sync", 0.1)


def restore(setup: Setup, victim: int, timeout: float) -> dict:
    """Start the killed broker again; wait until it is in the ISR; make the
    preferred replica leader again. Returns how long each step took."""
    from logbroker import Admin

    t0 = time.monotonic()
    setup.restart(victim, timeout)
    t1 = time.monotonic()
    wait_until(lambda: victim in describe(setup)[0].isr, timeout, f"broker {victim} back in the ISR", 0.05)
    t2 = time.monotonic()
    part = describe(setup)[0]
    if part.leader != part.preferred_leader:
        with Admin(setup.live_bootstrap(), request_timeout_ms=10_000) as admin:
            admin.elect_leaders([TOPIC])
        def back() -> bool:
            now = describe(setup)[0]
            return now.leader == now.preferred_leader and len(now.isr) == 3

        wait_until(back, timeout, "preferred leader back", 0.05)
    return {"restart_s": t1 - t0, "rejoin_isr_s": t2 - t1, "reelect_s": time.monotonic() - t2}


def trial(setup: Setup, p, i: int, rng: random.Random, log_dir: str, last: bool) -> dict:
    part, controller = describe(setup)
    victim = part.leader
    spec = {"bootstrap": setup.bootstrap, "topic": TOPIC, "interval_ms": p.failover_interval_ms,
            "value_bytes": p.failover_value_bytes, "after_s": p.failover_after_s,
            "deadline_s": p.failover_lead_s + 0.5 + p.failover_limit_s,
            "max_records": int((p.failover_lead_s + 0.5 + p.failover_limit_s) * 1000 / p.failover_interval_ms) + 10}
    worker = ClusterWorker({**spec, "mode": "steady"}, os.path.join(log_dir, f"failover-{i}.log"))
    poller = None
    try:
        worker.wait_ready(p.phase_timeout_s)
        survivors = ",".join(b.address for j, b in setup.brokers.items() if j != victim)
        poller = Poller(survivors, victim, p.failover_poll_ms / 1000, p.failover_limit_s)
        worker.go()
        time.sleep(p.failover_lead_s + rng.random() * 0.5)
        proc = setup.brokers[victim].proc
        t_kill = time.monotonic()
        os.kill(proc.pid, signal.SIGKILL)
        worker.tell(f"kill {t_kill!r}")
        poller.start()
        proc.wait(timeout=30)
        setup.brokers[victim].kill()  # reaps it, closes its pipes
        out = worker.result(p.failover_limit_s + p.phase_timeout_s)
    finally:
        if poller is not None:
            poller.close()
        worker.stop()
    out.update(trial=i, victim=victim, victim_was_controller=controller == victim, controller_before=controller,
               new_leader=poller.new_leader, new_controller=poller.new_controller,
               lease_gone_s=None if poller.lease_gone is None else poller.lease_gone - t_kill,
               elected_s=None if poller.elected is None else poller.elected - t_kill,
               polls=poller.polls, poll_errors=poller.errors)
    if not last:
        out["restore"] = restore(setup, victim, p.phase_timeout_s)
    return out


def run(p, workdir: str, tick) -> dict:
    """``p.failover_trials`` trials on a fresh etcd + 3 brokers."""
    setup = Setup("cluster3", os.path.join(workdir, "failover"))
    rng = random.Random(p.seed)
    trials, pids = [], {}
    try:
        setup.start(p.phase_timeout_s)
        pids = setup.pids()
        prepare(setup, None)
        for i in range(p.failover_trials):
            trials.append(trial(setup, p, i, rng, setup.dir, last=i == p.failover_trials - 1))
            tick()
    finally:
        setup.stop()
    return {"trials": trials, "start_s": setup.start_s, "pids": pids, "exit_codes": setup.exit_codes,
            "hung": setup.hung}
