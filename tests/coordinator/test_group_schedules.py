"""Each partition has exactly one owner in every stable generation (issue 11's
target), over seeded random schedules of joins, clean leaves and kill -9s
of the members of one consumer group on a real single-node broker.

Members are of two kinds: processes (bench/groups/member.py, killed with
SIGKILL or closed through their stdin) and in-process sync consumers, each
polled by a thread of its own. Every member reports its own view of what it
owns through its rebalance callbacks (``assign`` / ``revoke`` / ``lost``,
with ``time.monotonic()``: one clock for every process). A producer keeps
writing to the topic so the members fetch and commit meanwhile.

A round applies 1-3 random actions 0-0.4 s apart (overlapping rebalances:
a member may even be killed before it joined), then waits, bounded, until the group is settled: Stable, its members
exactly the live ones, every partition owned by exactly one of them, the
shares within one of each other, and every member's own view equal to the
coordinator's. Checked on the way and at the end:

- every Stable description seen (intermediate generations too) gives no
  partition to two members, and one generation always has one assignment;
- in the members' own views no partition was ever held by two members at
  once, except by a member whose partitions were *lost* (fenced: they may
  be someone else's already) — a killed member holds its partitions until
  it is killed.

The seed comes from ``GROUP_SCHEDULE_SEED`` or is random; a failure names it
and the schedule so far. ``-m long`` runs 60 rounds with the cooperative-sticky
assignor (the default), 60 with the eager range assignor, and 60 with static
member processes (``group_instance_id``; one more action: kill -9 and start
again at once with the same id); the default suite 5 (cooperative-sticky).
"""

from __future__ import annotations

import itertools
import os
import random
import sys
import threading
import time

import pytest

from tests.support.fixtures import FAST, ROOT, BrokerProcess
from logbroker import Admin, Consumer

sys.path.insert(0, str(ROOT))  # the member processes and the feeder are the groups bench's
from bench.groups.procs import Feeder, MemberProc, describe  # noqa: E402

PARTITIONS = 6
MAX_LIVE = 7  # more members than partitions: one of them owns nothing
SETTINGS = dict(session_timeout_ms=1_500, heartbeat_interval_ms=150,
                auto_offset_reset="earliest", auto_commit_interval_ms=300, fetch_max_wait_ms=100)
SETTLE_S = 40.0  # bound of one round's wait (a kill needs the session timeout and a rebalance)


@pytest.fixture(scope="module")
def sbroker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("schedules") / "data",
                      config={"group_initial_rebalance_delay_ms": 100})
    try:
        yield b.start()
    finally:
        b.kill()


class ThreadMember:
    """An in-process sync consumer polled by its own thread; its callbacks'
    events as ``(kind, time, {(topic, partition)})``."""

    def __init__(self, bootstrap: str, group: str, topic: str, client_id: str,
                 settings: dict) -> None:
        self.client_id = client_id
        self.consumer = Consumer(bootstrap, group=group, client_id=client_id, **settings, **FAST)
        self._events: list = []
        self.error: "BaseException | None" = None
        self._stop = threading.Event()
        self.consumer.subscribe([topic], on_assign=lambda ps: self._note("assign", ps),
                                on_revoke=lambda ps: self._note("revoke", ps),
                                on_lost=lambda ps: self._note("lost", ps))
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _note(self, kind: str, partitions) -> None:
        self._events.append((kind, time.monotonic(), set(partitions)))

    def _run(self) -> None:
        deadline = time.monotonic() + 1_800  # bounded
        try:
            while not self._stop.is_set() and time.monotonic() < deadline:
                self.consumer.poll(0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the checks
            self.error = exc

    def events(self) -> list:
        return list(self._events)

    def view(self) -> set:
        owned: set = set()
        for kind, _, parts in self.events():
            owned = owned | parts if kind == "assign" else owned - parts
        return owned

    def alive(self) -> bool:
        return self._thread.is_alive()

    def close(self) -> None:
        """A clean leave: stop polling, then ``close()`` (on_revoke, LeaveGroup)."""
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


class Schedule:
    """The group under test: its live and gone members, what the coordinator
    said per generation, and the actions so far (for the failure message)."""

    def __init__(self, bootstrap: str, admin: Admin, workdir, seed: int, name: str,
                 strategy: str, static: bool = False) -> None:
        self.bootstrap, self.admin, self.workdir = bootstrap, admin, workdir
        self.settings = {**SETTINGS, "partition_assignment_strategy": [strategy]}
        self.static = static  # member processes have a group_instance_id
        self.rng, self.seed = random.Random(seed), seed
        self.group = self.topic = name
        self.every = {(name, p) for p in range(PARTITIONS)}
        self.live: list = []
        self.gone: list = []
        self.ended: dict = {}  # id(member) -> (time, "kill" | "leave")
        self.generations: dict = {}  # generation -> {client_id: partitions}
        self.history: list = []
        self._ids = itertools.count(1)

    # -- actions ------------------------------------------------------------------------------
    def join(self, kind: str, cid: "str | None" = None) -> None:
        """A new member: a process or an in-process consumer (``cid``: a
        static process's client id, which is also its group_instance_id)."""
        cid = cid or f"{kind}{next(self._ids)}"
        if kind == "proc":
            settings = dict(client_id=cid, **self.settings)
            if self.static:
                settings["group_instance_id"] = cid
            spec = dict(bootstrap=self.bootstrap, group=self.group, topics=[self.topic],
                        settings=settings, max_seconds=1_800)
            self.live.append(MemberProc(spec, os.path.join(self.workdir, f"{cid}.log")))
        else:
            self.live.append(ThreadMember(self.bootstrap, self.group, self.topic, cid,
                                          self.settings))
        self.history.append(f"join {cid}")

    def remove(self, member, how: str) -> None:
        self.live.remove(member)
        self.gone.append(member)
        if how == "kill":
            member.kill()
        else:
            member.close()
        self.ended[id(member)] = (time.monotonic() if how == "leave" else member.killed_at, how)
        self.history.append(f"{how} {member.client_id}")

    def restart(self, member) -> None:
        """kill -9 a static member process and start it again at once (same
        group_instance_id): it should get its partitions back."""
        self.remove(member, "kill")
        self.join("proc", member.client_id)
        self.history[-2:] = [f"restart {member.client_id}"]

    def step(self) -> None:
        """1-3 random actions, 0-0.4 s apart (so the later ones fall in
        different phases of the rebalance the earlier ones started), the
        coordinator observed meanwhile."""
        for i in range(self.rng.choice((1, 1, 2, 3))):
            if i:
                self.watch(self.rng.uniform(0, 0.4))
            procs = [mb for mb in self.live if isinstance(mb, MemberProc)]
            options = ["join proc", "join thread"] if len(self.live) < MAX_LIVE else []
            if len(self.live) > 1:
                options += ["leave"] + (["kill", "kill"] if procs else [])
            if self.static and procs:
                options += ["restart", "restart"]
            action = self.rng.choice(options)
            if action.startswith("join"):
                self.join(action.split()[1])
            elif action == "restart":
                self.restart(self.rng.choice(procs))
            else:
                pool = procs if action == "kill" else self.live
                self.remove(self.rng.choice(pool), action)

    # -- checks -------------------------------------------------------------------------------
    def observe(self):
        """The coordinator's description; a Stable one is checked: no
        partition owned twice, one assignment per generation."""
        desc = describe(self.admin, self.group)
        if desc is not None and desc.state == "Stable":
            owners = [tp for mb in desc.members for tp in mb.partitions]
            assert len(owners) == len(set(owners)), f"generation {desc.generation}: a partition " \
                f"owned twice: {[(mb.client_id, mb.partitions) for mb in desc.members]}"
            shares = {mb.client_id: set(mb.partitions) for mb in desc.members}
            seen = self.generations.setdefault(desc.generation, shares)
            assert seen == shares, f"generation {desc.generation} changed: {seen} -> {shares}"
        return desc

    def watch(self, seconds: float) -> None:
        """Observe (and check) the coordinator's descriptions for ``seconds``."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            self.observe()

    def settled(self, desc) -> bool:
        if desc is None or desc.state != "Stable":
            return False
        theirs = {mb.client_id: set(mb.partitions) for mb in desc.members}
        if set(theirs) != {mb.client_id for mb in self.live}:
            return False
        if set().union(set(), *theirs.values()) != self.every:
            return False
        return all(mb.view() == theirs[mb.client_id] for mb in self.live)

    def wait_settled(self):
        deadline = time.monotonic() + SETTLE_S
        while True:
            desc = self.observe()
            if self.settled(desc):
                return desc
            assert time.monotonic() < deadline, f"not settled within {SETTLE_S} s: " \
                f"coordinator {desc}; members {[(mb.client_id, sorted(mb.view())) for mb in self.live]}"
            time.sleep(0.05)

    def check_settled(self, desc) -> None:
        shares = [len(mb.partitions) for mb in desc.members]
        assert sum(shares) == PARTITIONS and max(shares) - min(shares) <= 1, shares
        for mb in self.live:
            error = getattr(mb, "error", None)
            assert error is None, f"{mb.client_id}'s poll raised {error!r}"
            assert mb.alive(), f"{mb.client_id} died"

    def check_views(self) -> None:
        """No partition held by two members' own views at once (lost ones
        aside). A member killed holds its partitions until then, a static
        one closed until its close (it calls no on_revoke); a dynamic one
        closed has revoked everything."""
        spans: dict = {tp: [] for tp in self.every}
        for mb in self.live + self.gone:
            held: dict = {}
            for kind, t, parts in mb.events():
                for tp in parts:
                    if kind == "assign":
                        held[tp] = t
                    elif tp in held:
                        spans[tp].append((held.pop(tp), t, kind, mb.client_id))
            end, how = self.ended.get(id(mb), (time.monotonic(), "open"))
            static = self.static and isinstance(mb, MemberProc)
            assert not (held and how == "leave" and not static), \
                f"{mb.client_id} closed without revoking {sorted(held)}"
            for tp, t in held.items():
                spans[tp].append((t, end, how, mb.client_id))
        for tp, held in spans.items():
            held.sort()
            for a, b in itertools.pairwise(held):
                assert a[1] <= b[0] or a[2] == "lost", f"{tp} held by {a} and {b} at once"

    def close(self) -> None:
        for mb in list(self.live):
            mb.close()


def run_schedule(sbroker, tmp_path, rounds: int, name: str,
                 strategy: str = "cooperative-sticky", static: bool = False) -> None:
    seed = int(os.environ.get("GROUP_SCHEDULE_SEED") or random.randrange(1 << 32))
    print(f"group schedule seed {seed} ({rounds} rounds, {strategy}, static {static})")
    with Admin(sbroker.bootstrap, **FAST) as admin:
        admin.create_topic(name, PARTITIONS)
        sched = Schedule(sbroker.bootstrap, admin, str(tmp_path), seed, name, strategy, static)
        feeder = Feeder(sbroker.bootstrap, name, PARTITIONS, interval=0.02, max_seconds=1_800)
        feeder.start()
        started, done = time.monotonic(), 0
        try:
            for kind in ("proc", "thread", sched.rng.choice(("proc", "thread"))):
                sched.join(kind)
            sched.check_settled(sched.wait_settled())
            for done in range(1, rounds + 1):
                sched.step()
                sched.check_settled(sched.wait_settled())
                sched.check_views()
        except AssertionError as exc:
            raise AssertionError(f"seed {seed} (GROUP_SCHEDULE_SEED={seed} to replay), round "
                                 f"{done}/{rounds}, schedule {sched.history}: {exc}") from exc
        finally:
            sched.close()
            feeder.stop()
    print(f"seed {seed}: {rounds} rounds, {len(sched.generations)} stable generations seen, "
          f"{time.monotonic() - started:.1f} s; schedule {sched.history}")


def test_random_schedule_short(sbroker, tmp_path):
    run_schedule(sbroker, tmp_path, 5, "sched-short")


@pytest.mark.long
@pytest.mark.parametrize("strategy,static", [("cooperative-sticky", False), ("range", False),
                                             ("cooperative-sticky", True)])
def test_random_schedule_long(sbroker, tmp_path, strategy, static):
    run_schedule(sbroker, tmp_path, 60, f"sched-long-{strategy}-{static}", strategy, static)
