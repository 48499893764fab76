"""A Jepsen-style nemesis run against a real cluster (marker ``long``).

etcd + 3 brokers behind fault-injecting proxies (``Cluster(proxied=True)``),
a topic of 3 partitions, replication factor 3, min_insync_replicas 2.
Two idempotent acks=all producer threads per partition send numbered values
in windows (each its own sequence, so order is checkable; one patient, one
with a 2.5 s delivery timeout that gives up during failovers), two consumer
threads poll all the time (one tails from offset 0 to the end, one starts a
new session every 10-40 s somewhere behind its position), and a seeded
random schedule of faults hits one broker at a time:

- ``kill``: kill -9, restart after 0.2-3 s;
- ``pause_short`` / ``pause_long``: SIGSTOP for 0.2-1.5 s (shorter than the
  2 s session) / 2.5-5 s (longer: the lease expires), then SIGCONT;
- ``isolate_*``: the broker's proxies cut (``all``: from etcd, peers and
  clients; ``etcd``: from etcd only; ``peers``: from peers and clients
  only), ``blackhole`` (held) or ``reset`` (RST and refused), 0.5-5 s.

**Never more than one broker faulty at a time**: after each fault the run
waits until every broker sees every partition with a leader and its full
ISR, so the two others always form an ISR of min_insync_replicas and writes
can go on. A few extra rounds take two brokers down at once (``kill2``:
kill -9 both; ``pause2``: SIGSTOP both): once the ISR has shrunk, a write
must be refused (probed with a raw acks=all produce to the one live broker),
no client may get an ack, and every record acknowledged until the two come
back must be in one of their logs, read while they are down (two copies).

A forged follower (issue 29) runs all along: every 50 ms it asks a
random broker for a partition's HW, then sends ReplicaFetch claiming a
random replica id (1-3) at offsets just beyond it, over a raw connection
that proved nothing; every one must be refused (31) and none may count.

At the end: heal everything, wait for the full ISR, let the consumers catch
up to the HW, read every partition from its leader (Fetch, below the HW),
stop the brokers cleanly, read every replica's segment files, check the
history with ``log_checker.check`` (0 anomalies of every kind, nothing
acknowledged unseen) and compare the replicas' files byte for byte.

Environment: ``LOGBROKER_NEMESIS_FAULTS`` (default 100) single-broker
faults, ``LOGBROKER_NEMESIS_DOUBLE`` (default 6; 2 below 50 faults)
two-down rounds, ``LOGBROKER_NEMESIS_SEED`` (default: random, printed).
Run: ``.venv/bin/pytest -m long -s tests/cluster/test_nemesis.py``
(about 6-8 minutes for 100 faults on 2 cores; a smoke run:
``LOGBROKER_NEMESIS_FAULTS=20``, about 1.5 minutes).
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import threading
import time
from collections import Counter, defaultdict

import pytest

from tests.support.fixtures import Cluster, RawConn, segment_bytes
from tests.support.log_checker import ERROR, OK, UNKNOWN, Poll, Send, Window, check
from logbroker import Consumer, Producer
from logbroker.errors import LogbrokerError
from logbroker.protocol import messages as m
from logbroker.records import decode_batch, scan_batches

TOPIC = "nemesis"
PARTITIONS = 3
SINGLE = ("kill", "pause_short", "pause_long",
          "isolate_all_blackhole", "isolate_all_reset",
          "isolate_etcd_blackhole", "isolate_etcd_reset",
          "isolate_peers_blackhole", "isolate_peers_reset")
WEIGHTS = (3, 2, 2, 1, 1, 1, 1, 1, 1)
DOUBLE = ("kill2", "pause2")
DURATION = {"kill": (0.2, 3.0), "pause_short": (0.2, 1.5), "pause_long": (2.5, 5.0),
            "kill2": (1.0, 3.0), "pause2": (1.0, 3.0)}
ISOLATE = (0.5, 5.0)
CLIENT = dict(request_timeout_ms=5_000, connect_timeout_ms=2_000)
RECOVERY_TIMEOUT = 60.0


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    return int(value) if value else default


def make_schedule(rng: random.Random, faults: int, doubles: int) -> list[dict]:
    """``faults`` single-broker faults in random order with ``doubles``
    two-down rounds spread among them: kind, broker(s), duration, gap after."""
    out = []
    for _ in range(faults):
        kind = rng.choices(SINGLE, WEIGHTS)[0]
        low, high = DURATION.get(kind, ISOLATE)
        out.append({"kind": kind, "brokers": [rng.randint(1, 3)],
                    "duration": round(rng.uniform(low, high), 2)})
    for j in range(doubles):
        kind = DOUBLE[j % len(DOUBLE)]
        low, high = DURATION[kind]
        at = rng.randint(1, len(out))
        out.insert(at, {"kind": kind, "brokers": sorted(rng.sample([1, 2, 3], 2)),
                        "duration": round(rng.uniform(low, high), 2)})
    for f in out:
        f["gap"] = round(rng.uniform(0.1, 1.0), 2)
    return out


def replica_log(data_dir: str, partition: int) -> dict[int, bytes]:
    """offset -> value of every whole batch in a replica's segment files (a
    torn last batch of a killed broker is left out)."""
    out = {}
    for _, data in segment_bytes(data_dir, TOPIC, partition).items():
        for pos, header in scan_batches(data):
            for rec in decode_batch(data[pos:pos + header.size]).records():
                out[rec.offset] = rec.value
    return out


class History:
    def __init__(self) -> None:
        self.sends: list[Send] = []
        self.polls: list[Poll] = []
        self.errors: Counter = Counter()  # "who: error name" -> count
        self.lock = threading.Lock()

    def error(self, who: str, exc: BaseException) -> None:
        with self.lock:
            self.errors[f"{who}: {type(exc).__name__}"] += 1


class Producing(threading.Thread):
    """One producer, one partition, values ``<label><p>-<seq>`` in seq order,
    in windows of 1-20 records whose results it waits for. A patient one
    (delivery timeout 40 s) rides through every fault; a hasty one (2.5 s)
    gives up on records during failovers: failed sends, maybe written, and
    the producer's new id after a sequence gap."""

    def __init__(self, bootstrap: str, partition: int, history: History, stop: threading.Event,
                 limit: int, seed: int, label: str = "", delivery_timeout_ms: int = 40_000) -> None:
        super().__init__(name=f"producer-{label}{partition}", daemon=True)
        self.bootstrap, self.partition = bootstrap, partition
        self.history, self.stop = history, stop
        self.limit, self.rng, self.label = limit, random.Random(seed), label
        self.pace = (0.0, 0.05) if delivery_timeout_ms >= 10_000 else (0.05, 0.2)
        self.settings = dict(CLIENT, delivery_timeout_ms=delivery_timeout_ms,
                             max_block_ms=delivery_timeout_ms)
        if delivery_timeout_ms < CLIENT["request_timeout_ms"]:
            self.settings["request_timeout_ms"] = delivery_timeout_ms * 4 // 5
        self.failure: "BaseException | None" = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def _run(self) -> None:
        p, h, name = self.partition, self.history, self.name
        seq = 0
        with Producer(bootstrap=self.bootstrap, acks="all", idempotent=True, linger_ms=1,
                      **self.settings) as producer:
            while not self.stop.is_set() and seq < self.limit:
                window = []
                for _ in range(self.rng.randint(1, 20)):
                    value = f"{self.label}{p}-{seq:07d}".encode()
                    done_at: dict = {}
                    try:
                        handle = producer.send(TOPIC, value, partition=p)
                        handle.add_done_callback(
                            lambda _h, d=done_at: d.setdefault("t", time.monotonic()))
                        window.append((seq, value, handle, done_at))
                    except LogbrokerError as exc:
                        h.error(name, exc)
                        h.sends.append(Send(name, p, seq, value, ERROR))
                    seq += 1
                for s, value, handle, done_at in window:
                    try:
                        meta = handle.result(timeout=90)
                        h.sends.append(Send(name, p, s, value, OK, meta.offset,
                                            done_at.get("t", time.monotonic())))
                    except TimeoutError:
                        h.sends.append(Send(name, p, s, value, UNKNOWN))
                    except LogbrokerError as exc:
                        h.error(name, exc)
                        h.sends.append(Send(name, p, s, value, ERROR))
                time.sleep(self.rng.uniform(*self.pace))


class Consuming(threading.Thread):
    """Polls every partition; each Consumer object is one session. With
    ``restart`` (min, max seconds) a new session starts that often, up to
    500 records behind the position; else a session lasts until an error
    other than an unreachable broker."""

    def __init__(self, name: str, bootstrap: str, history: History, finish: threading.Event,
                 restart: "tuple | None", seed: int) -> None:
        super().__init__(name=name, daemon=True)
        self.bootstrap, self.history = bootstrap, history
        self.finish, self.restart = finish, restart
        self.rng = random.Random(seed)
        self.positions = {p: 0 for p in range(PARTITIONS)}
        self.targets: "dict | None" = None  # set at the end: stop once every position reaches it
        self.hard_stop = threading.Event()
        self.sessions = 0
        self.failure: "BaseException | None" = None

    def caught_up(self) -> bool:
        t = self.targets
        return t is not None and all(self.positions[p] >= t[p] for p in t)

    def run(self) -> None:
        try:
            while not self.hard_stop.is_set() and not (self.finish.is_set() and self.caught_up()):
                self._session()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.failure = exc

    def _session(self) -> None:
        self.sessions += 1
        session = f"{self.name}.{self.sessions}"
        h = self.history
        start = dict(self.positions)
        if self.restart and self.sessions > 1:
            start = {p: max(0, o - self.rng.randint(0, 500)) for p, o in start.items()}
        ends = (time.monotonic() + self.rng.uniform(*self.restart)) if self.restart else None
        with Consumer(bootstrap=self.bootstrap, fetch_max_wait_ms=200, **CLIENT) as consumer:
            consumer.assign([(TOPIC, p) for p in range(PARTITIONS)])
            for p, o in start.items():
                consumer.seek(TOPIC, p, o)
            h.polls.append(Poll(session, seek=start))
            while not self.hard_stop.is_set():
                if self.finish.is_set() and self.caught_up():
                    return
                if ends is not None and time.monotonic() > ends and not self.finish.is_set():
                    return
                try:
                    records = consumer.poll(0.5)
                except LogbrokerError as exc:
                    h.error(self.name, exc)
                    if exc.retriable:
                        continue
                    return  # a new session, from the positions reached
                if records:
                    h.polls.append(Poll(session, tuple((r.partition, r.offset, r.value)
                                                       for r in records)))
                    for r in records:
                        if r.offset + 1 > self.positions[r.partition]:
                            self.positions[r.partition] = r.offset + 1


class ForgedFollower(threading.Thread):
    """The fake follower of issue 29 (module docstring): ``sent``,
    ``refused`` (31) and ``accepted`` (any answer without a top-level error)."""

    def __init__(self, cluster: Cluster, stop: threading.Event, seed: int) -> None:
        super().__init__(name="forged-follower", daemon=True)
        self.c, self.stop, self.rng = cluster, stop, random.Random(seed)
        self.sent = self.refused = self.accepted = 0

    def run(self) -> None:
        while not self.stop.wait(0.05):
            i, p = self.rng.choice(list(self.c.brokers)), self.rng.randrange(PARTITIONS)
            b = self.c.brokers[i]
            if not b.alive():
                continue
            try:
                conn = RawConn(b.port, timeout=0.5)
                try:
                    hw = conn.call(m.ListOffsets(parts=((TOPIC, p, m.LATEST),)), 0.5).parts[0][4]
                    for ahead in (1, 10, 100):
                        resp = conn.call(m.ReplicaFetch(
                            replica_id=self.rng.choice([r for r in self.c.brokers if r != i]),
                            max_wait_ms=0, min_bytes=0,
                            parts=((TOPIC, p, max(0, hw) + ahead, -1, 1 << 16),)), 0.5)
                        self.sent += 1
                        if resp.error == 31:
                            self.refused += 1
                        elif resp.error == 0:
                            self.accepted += 1
                finally:
                    conn.close()
            except (OSError, AssertionError, TimeoutError, IndexError):
                continue


class Monitor(threading.Thread):
    """Asks every broker for the topic's metadata every 0.1 s over its own
    connections (a stopped broker costs a 0.25 s timeout) and keeps each
    broker's changes of (leader, epoch, ISR): failover times come from it."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(name="monitor", daemon=True)
        self.c = cluster
        self.timeline: dict = {i: [] for i in cluster.brokers}  # broker -> [(t, {p: (ld, e, isr)})]
        self.halt = threading.Event()
        self._conns: dict = {}

    def run(self) -> None:
        while not self.halt.is_set():
            for i, b in self.c.brokers.items():
                view = self._ask(i, b)
                if view is not None:
                    line = self.timeline[i]
                    if not line or line[-1][1] != view:
                        line.append((time.monotonic(), view))
            self.halt.wait(0.1)
        for conn in self._conns.values():
            conn.close()

    def _ask(self, i: int, b) -> "dict | None":
        if not b.alive():
            return None
        try:
            conn = self._conns.get(i)
            if conn is None:
                conn = self._conns[i] = RawConn(b.port, timeout=0.25)
            md = conn.call(m.Metadata(topics=[TOPIC]), timeout=0.25)
        except (OSError, AssertionError, TimeoutError):
            conn = self._conns.pop(i, None)
            if conn is not None:
                conn.close()
            return None
        return {p: (ld, e, tuple(isr)) for t, p, ld, e, r, isr in md.partitions if t == TOPIC}

    def failover(self, fault: dict) -> dict:
        """{partition: seconds from the fault's start until a broker not at
        fault saw another leader} for the partitions the faulty ones led."""
        out = {}
        faulty = fault["brokers"]
        for p, ld in fault.get("led", {}).items():
            if ld not in faulty:
                continue
            seen = [t for i, line in self.timeline.items() if i not in faulty
                    for t, view in line
                    if fault["start"] <= t <= fault.get("recovered", t)
                    and view.get(p, (-1,))[0] not in (*faulty, -1)]
            if seen:
                out[p] = round(min(seen) - fault["start"], 3)
        return out


class Nemesis:
    """Runs the schedule against the cluster; records what it did and when."""

    def __init__(self, cluster: Cluster, history: History) -> None:
        self.c, self.history = cluster, history
        self.faults: list[dict] = []
        self.windows: list[Window] = []
        self.paused: set[int] = set()
        self.problems: list[str] = []  # liveness: recoveries that did not happen in time
        self.probes: Counter = Counter()

    # -- helpers ---------------------------------------------------------------------------
    def views(self, via: "list[int] | None" = None) -> dict:
        """{broker: {partition: (leader, epoch, replicas, isr)}} as each live
        broker (or each of ``via``) sees it; a broker that does not answer
        is left out."""
        out = {}
        for i in (via or [i for i in self.c.brokers if self.c.brokers[i].alive()
                          and i not in self.paused]):
            try:
                md = self.c.metadata([TOPIC], via=i)
            except AssertionError:
                continue
            out[i] = {p: (ld, e, tuple(r), tuple(isr))
                      for t, p, ld, e, r, isr in md.partitions if t == TOPIC}
        return out

    def leaders(self) -> dict:
        for view in self.views().values():
            if len(view) == PARTITIONS:
                return {p: st[0] for p, st in view.items()}
        return {}

    def healthy(self) -> bool:
        """Every broker up and every one sees every partition with a leader,
        the same one, and the full ISR."""
        views = self.views()
        if len(views) != len(self.c.brokers):
            return False
        for p in range(PARTITIONS):
            states = {v.get(p, (None,))[0] for v in views.values()}
            if len(states) != 1 or None in states or -1 in states:
                return False
            if any(len(v[p][3]) != 3 for v in views.values()):
                return False
        return True

    def wait_healthy(self, timeout: float, what: str) -> float:
        """Seconds until healthy; records a problem after ``timeout``."""
        t0 = time.monotonic()
        while not self.healthy():
            if time.monotonic() - t0 > timeout:
                self.problems.append(f"{what}: not healthy after {timeout} s: {self.views()}")
                return -1.0
            time.sleep(0.1)
        return time.monotonic() - t0

    def sigstop(self, i: int) -> None:
        os.kill(self.c.brokers[i].proc.pid, signal.SIGSTOP)
        self.paused.add(i)

    def sigcont(self, i: int) -> None:
        if i in self.paused:
            os.kill(self.c.brokers[i].proc.pid, signal.SIGCONT)
            self.paused.discard(i)

    def heal_all(self) -> None:
        for i in list(self.paused):
            self.sigcont(i)
        for i in self.c.brokers:
            self.c.heal(i)
            if not self.c.brokers[i].alive():
                self.c.brokers[i].start()

    # -- faults ----------------------------------------------------------------------------
    def run(self, fault: dict) -> None:
        kind, brokers, d = fault["kind"], fault["brokers"], fault["duration"]
        fault["led"] = self.leaders()
        fault["start"] = time.monotonic()
        wall = time.time()  # to find the fault in the brokers' logs (<data_dir>.log)
        fault["wall"] = (time.strftime("%H:%M:%S", time.localtime(wall))
                         + f",{int(wall * 1000) % 1000:03d}")
        i = brokers[0]
        if kind == "kill":
            self.c.brokers[i].kill()
            time.sleep(d)
            fault["healed"] = time.monotonic()
            self.c.brokers[i].start()
        elif kind.startswith("pause"):
            if kind == "pause2":
                return self.two_down(fault, stop=True)
            self.sigstop(i)
            time.sleep(d)
            fault["healed"] = time.monotonic()
            self.sigcont(i)
        elif kind == "kill2":
            return self.two_down(fault, stop=False)
        else:
            _, where, mode = kind.split("_")
            proxies = {"all": [self.c.front[i], self.c.etcd_link[i]],
                       "etcd": [self.c.etcd_link[i]], "peers": [self.c.front[i]]}[where]
            for proxy in proxies:
                proxy.cut(mode)
            time.sleep(d)
            fault["healed"] = time.monotonic()
            for proxy in proxies:
                proxy.heal()
        fault["recovery"] = round(self.wait_healthy(RECOVERY_TIMEOUT, f"after {kind} of {i}"), 3)
        fault["recovered"] = time.monotonic()

    def two_down(self, fault: dict, stop: bool) -> None:
        """Two brokers down: wait until the live one's view has the ISR shrunk
        (or no leader), then probe: a raw acks=all produce must be refused;
        read the down ones' logs; bring them back."""
        down = fault["brokers"]
        live = next(i for i in self.c.brokers if i not in down)
        for i in down:
            if stop:
                self.sigstop(i)
            else:
                self.c.brokers[i].kill()

        def shrunk() -> bool:
            view = self.views([live]).get(live, {})
            return len(view) == PARTITIONS and all(
                st[0] == -1 or (st[0] == live and st[3] == (live,)) for st in view.values())

        t0 = time.monotonic()
        while not shrunk():
            if time.monotonic() - t0 > 20:
                self.problems.append(f"{fault['kind']} {down}: the ISR did not shrink: "
                                     f"{self.views([live])}")
                break
            time.sleep(0.1)
        fault["shrunk_after"] = round(time.monotonic() - t0, 3)
        start = time.monotonic()
        n = len(self.faults)
        for p in range(PARTITIONS):
            value = f"probe-{n}-{p}".encode()
            try:
                code, message, base = self.c.produce(live, TOPIC, p, [value], acks=-1,
                                                      timeout_ms=2000)
            except (OSError, AssertionError, TimeoutError) as exc:
                code, message, base = -1, repr(exc), -1
            self.probes[code] += 1
            fault.setdefault("probes", []).append((p, code, message))
            self.history.sends.append(Send(f"probe-{n}-{p}", p, 0, value,
                                           OK if code == 0 else ERROR,
                                           base if code == 0 else None, time.monotonic()))
        time.sleep(fault["duration"])
        snapshots = {i: {p: replica_log(self.c.brokers[i].data_dir, p) for p in range(PARTITIONS)}
                     for i in down}
        end = time.monotonic()
        self.windows.append(Window(start, end, snapshots))
        fault["healed"] = end
        for i in down:
            if stop:
                self.sigcont(i)
            else:
                self.c.brokers[i].start()
        fault["recovery"] = round(self.wait_healthy(RECOVERY_TIMEOUT, f"after {fault['kind']}"), 3)
        fault["recovered"] = time.monotonic()


def ack_gaps(sends: list[Send], faults: list[dict]) -> dict:
    """Per fault kind, the longest time without an ack on a partition the
    faulty broker led, from the fault's start until it had recovered."""
    acks = defaultdict(list)
    for s in sends:
        if s.outcome == OK and s.ack_time is not None and not s.producer.startswith("probe"):
            acks[s.partition].append(s.ack_time)
    for times in acks.values():
        times.sort()
    out = defaultdict(list)
    for f in faults:
        if "recovered" not in f:
            continue
        for p, ld in f.get("led", {}).items():
            if ld not in f["brokers"]:
                continue
            points = [f["start"]] + [t for t in acks[p] if f["start"] < t <= f["recovered"]]
            after = [t for t in acks[p] if t > f["recovered"]]
            points.append(after[0] if after else f["recovered"])
            out[f["kind"]].append(max(b - a for a, b in zip(points, points[1:])))
    return out


def spread(xs: list[float]) -> str:
    if not xs:
        return "-"
    return (f"n={len(xs)} min={min(xs):.2f} median={statistics.median(xs):.2f} "
            f"max={max(xs):.2f}")


@pytest.mark.long
def test_nemesis(tmp_path, etcd):
    faults_n = env_int("LOGBROKER_NEMESIS_FAULTS", 100)
    doubles_n = env_int("LOGBROKER_NEMESIS_DOUBLE", 6 if faults_n >= 50 else 2)
    seed = env_int("LOGBROKER_NEMESIS_SEED", random.SystemRandom().randrange(1 << 32))
    print(f"\nnemesis: seed={seed} faults={faults_n} two-down rounds={doubles_n} "
          f"dir={tmp_path}", flush=True)
    rng = random.Random(seed)
    schedule = make_schedule(rng, faults_n, doubles_n)
    began = time.monotonic()

    c = Cluster(tmp_path, etcd.url, proxied=True)
    history = History()
    stop, finish = threading.Event(), threading.Event()
    producers: list[Producing] = []
    consumers: list[Consuming] = []
    nemesis = Nemesis(c, history)
    monitor = Monitor(c)
    forger = ForgedFollower(c, stop, rng.randrange(1 << 32))
    try:
        c.start()
        monitor.start()
        c.create(TOPIC, PARTITIONS, replication_factor=3, min_insync_replicas=2)
        producers = [Producing(c.bootstrap, p, history, stop, 200_000, rng.randrange(1 << 32))
                     for p in range(PARTITIONS)]
        producers += [Producing(c.bootstrap, p, history, stop, 50_000, rng.randrange(1 << 32),
                                "h", delivery_timeout_ms=2_500) for p in range(PARTITIONS)]
        consumers = [Consuming("tail", c.bootstrap, history, finish, None, rng.randrange(1 << 32)),
                     Consuming("hop", c.bootstrap, history, finish, (10, 40),
                               rng.randrange(1 << 32))]
        for t in (*producers, *consumers, forger):
            t.start()
        time.sleep(2)
        for k, fault in enumerate(schedule):
            nemesis.run(fault)
            nemesis.faults.append(fault)
            if k % 10 == 9:
                acked = sum(1 for s in history.sends if s.outcome == OK)
                print(f"  {k + 1}/{len(schedule)} faults, {time.monotonic() - began:.0f} s, "
                      f"{acked} acked", flush=True)
            time.sleep(fault["gap"])
        schedule_s = time.monotonic() - began

        # -- the end: heal, stop producing, full ISR, consumers catch up, final reads
        nemesis.heal_all()
        stop.set()
        for t in producers:
            t.join(150)
            assert not t.is_alive(), f"{t.name} did not finish"
        final_recovery = nemesis.wait_healthy(120, "final heal")
        assert final_recovery >= 0, nemesis.problems[-1]
        leaders = nemesis.leaders()
        hw = {}
        for p in range(PARTITIONS):
            records = c.read_all(leaders[p], TOPIC, p)
            history.polls.append(Poll(f"final-fetch-{p}", seek={p: 0}))
            history.polls.append(Poll(f"final-fetch-{p}", tuple((p, o, v) for o, v in records)))
            hw[p] = records[-1][0] + 1 if records else 0
        for t in consumers:
            t.targets = hw
        finish.set()
        for t in consumers:
            t.join(120)
            if t.is_alive():
                t.hard_stop.set()
                t.join(30)
        stop_codes = {i: b.stop() for i, b in c.brokers.items()}
        final = {p: {i: replica_log(b.data_dir, p) for i, b in c.brokers.items()}
                 for p in range(PARTITIONS)}
        files = {p: {i: segment_bytes(b.data_dir, TOPIC, p) for i, b in c.brokers.items()}
                 for p in range(PARTITIONS)}
    finally:
        monitor.halt.set()
        stop.set()
        finish.set()
        for t in consumers:
            t.hard_stop.set()
        for i in list(nemesis.paused):
            try:
                nemesis.sigcont(i)
            except OSError:
                pass
        c.close()
        for t in (*producers, *consumers, monitor, forger):
            t.join(30)
    duration = time.monotonic() - began

    report = check(history.sends, history.polls, final, hw, nemesis.windows)
    identical = {p: all(files[p][i] == files[p][1] for i in files[p]) for p in files}
    kinds = Counter(f["kind"] for f in nemesis.faults)
    elected = defaultdict(list)
    for f in nemesis.faults:
        f["elected"] = monitor.failover(f)
        elected[f["kind"]] += list(f["elected"].values())
    recoveries = defaultdict(list)
    for f in nemesis.faults:
        if f.get("recovery", -1) >= 0:
            recoveries[f["kind"]].append(f["recovery"])
    gaps = ack_gaps(history.sends, nemesis.faults)
    lines = [
        f"nemesis: seed={seed} faults={sum(kinds.values())} ({faults_n} single + {doubles_n} "
        f"two-down) duration={duration:.0f} s (schedule {schedule_s:.0f} s)",
        "faults by kind: " + ", ".join(f"{k}={n}" for k, n in sorted(kinds.items())),
        f"records: sent={report.counts['sent']} acked={report.counts['acked']} "
        f"failed/indeterminate={report.counts['failed']} "
        f"(of which in the log: {report.counts['indeterminate_written']}) "
        f"read_final={report.counts['read_final']} hw={hw} polled={report.counts['polled']} "
        f"unseen={report.counts['unseen']} beyond_hw={report.counts['beyond_hw']}",
        "consumer sessions: " + ", ".join(f"{t.name}={t.sessions}" for t in consumers),
        "two-down probes (error code: count): " + json.dumps(dict(nemesis.probes)),
        "client errors: " + json.dumps(dict(history.errors)),
        f"forged ReplicaFetch: sent={forger.sent} refused={forger.refused} "
        f"accepted={forger.accepted}",
        "broker exit codes at the clean stop: " + json.dumps(stop_codes),
        f"replicas byte-identical: {identical}",
        "failover (new leader seen by a healthy broker, s after the fault):",
        *[f"  {k}: {spread(v)}" for k, v in sorted(elected.items()) if v],
        "longest ack gap on a partition the faulty broker led (s):",
        *[f"  {k}: {spread(v)}" for k, v in sorted(gaps.items())],
        "recovery to full ISR after healing (s):",
        *[f"  {k}: {spread(v)}" for k, v in sorted(recoveries.items())],
        f"liveness problems: {len(nemesis.problems)}",
        *[f"  {x[:400]}" for x in nemesis.problems[:5]],
        "checker: " + report.summary(),
    ]
    text = "\n".join(lines)
    print(text, flush=True)
    with open(os.path.join(str(tmp_path), "nemesis-report.txt"), "w") as fh:
        fh.write(text + "\n")
        json.dump({"seed": seed, "faults": nemesis.faults}, fh, default=str)
    failures = [t.failure for t in (*producers, *consumers) if t.failure is not None]
    assert not failures, failures
    assert report.ok, f"seed {seed}: {report.summary()}"
    assert report.counts["unseen"] == 0, f"seed {seed}: acknowledged records no poll returned"
    assert all(identical.values()), f"seed {seed}: replicas differ: {identical}"
    assert set(stop_codes.values()) == {0}, stop_codes
    assert report.counts["acked"] > 0
    assert forger.sent > 0 and forger.accepted == 0, (forger.sent, forger.accepted)
    assert len(nemesis.faults) == len(schedule) >= faults_n + doubles_n
    assert not nemesis.problems, f"seed {seed}: {nemesis.problems[:3]}"


def test_schedule_is_seeded_and_never_hits_more_than_the_planned_brokers():
    """Fast (not long): the schedule is a pure function of the seed."""
    a = make_schedule(random.Random(7), 100, 4)
    assert a == make_schedule(random.Random(7), 100, 4)
    assert len(a) == 104
    assert sum(len(f["brokers"]) == 2 for f in a) == 4
    assert {f["kind"] for f in a if len(f["brokers"]) == 2} == set(DOUBLE)
    assert {f["kind"] for f in a} >= set(SINGLE)
    pauses = [f["duration"] for f in a if f["kind"] == "pause_short"]
    assert pauses and max(pauses) < 2.0 < min(f["duration"] for f in a if f["kind"] == "pause_long")


@pytest.mark.long  # a fault run (three etcd connection resets, ~13 s), as the nemesis runs are
def test_a_leader_keeps_its_lease_through_a_short_etcd_connection_reset(tmp_path, etcd):
    """A leader's etcd connection reset (RST, refused) for 0.3 s, far below
    the 2 s session, three times: the leader must keep its lease and its
    leadership each time (same leader epoch 2.5 s after the heal). Found by
    the nemesis run: gRPC's default reconnect backoff (1 s, x1.6) made every
    lease refresh fail at once after a reset, costing the lease about every
    second time; the broker's etcd channel now reconnects within 0.1-0.5 s.
    Three cuts here: at one lost lease in two cuts, a regression shows 7 runs in 8; the nemesis runs
    (``long``) cut etcd links many more times."""
    c = Cluster(tmp_path, etcd.url, proxied=True)
    try:
        c.start()
        c.create("lease", 1, replication_factor=3)
        for k in range(3):
            c.wait_state("lease", 0, lambda ld, e, r, isr: ld > 0 and len(isr) == 3, 20,
                         "a leader and the full ISR")
            time.sleep(1.0)  # the lease refreshed at its pace before the cut
            leader, epoch, _, _ = c.state("lease")
            other = next(i for i in c.brokers if i != leader)
            c.etcd_link[leader].cut("reset")
            time.sleep(0.3)
            c.etcd_link[leader].heal()
            healed = time.monotonic()
            while time.monotonic() - healed < 2.5:
                now_leader, now_epoch, _, _ = c.state("lease", via=other)
                assert now_epoch == epoch, (
                    f"cut {k + 1}: a 0.3 s etcd reset cost broker {leader} its lease: leader "
                    f"{leader} -> {now_leader}, epoch {epoch} -> {now_epoch}, "
                    f"{time.monotonic() - healed:.2f} s after the heal")
                time.sleep(0.05)
    finally:
        c.close()
