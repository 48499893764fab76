"""Consumer group helpers of tests/coordinator/ (test_consumer_group.py, its
_eager and _cluster siblings): a single-node broker with a short initial
rebalance delay (``gbroker``, module-scoped), a sync ``Member`` polled in the
test thread, a bounded ``spin`` over members, a producer of per-partition
records, and the kill -9 of a member process (tests/support/children/group_member.py)
whose partitions must resume from its last commit."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.support.fixtures import FAST, BrokerProcess
from logbroker import Admin, Consumer, Producer

GROUP_FAST = dict(session_timeout_ms=2_000, heartbeat_interval_ms=150,
                  auto_offset_reset="earliest", fetch_max_wait_ms=100, **FAST)
MEMBER_PROC = os.path.join(os.path.dirname(__file__), "children", "group_member.py")


@pytest.fixture(scope="module")
def gbroker(tmp_path_factory):
    """A broker whose empty groups wait only 100 ms for more members."""
    b = BrokerProcess(tmp_path_factory.mktemp("groups") / "data",
                      config={"group_initial_rebalance_delay_ms": 100})
    try:
        yield b.start()
    finally:
        b.kill()


class Member:
    """A sync consumer in a group, its records and its callbacks' calls."""

    def __init__(self, bootstrap: str, group: str, topics=None, pattern=None, **settings):
        self.consumer = Consumer(bootstrap, group=group, **{**GROUP_FAST, **settings})
        self.records: list = []
        self.events: list = []  # ("assign" | "revoke" | "lost", [(topic, partition)], time)
        self.consumer.subscribe(topics, pattern=pattern,
                                on_assign=lambda ps: self.events.append(("assign", ps, _now())),
                                on_revoke=lambda ps: self.events.append(("revoke", ps, _now())),
                                on_lost=lambda ps: self.events.append(("lost", ps, _now())))

    def poll(self) -> None:
        self.records += self.consumer.poll(0.02)

    def owned(self) -> set:
        return self.consumer.assignment()

    def revoked(self) -> set:
        return {tp for kind, ps, _ in self.events if kind != "assign" for tp in ps}


def _now() -> float:
    return time.monotonic()


def spin(members, until, timeout: float, what: str):
    """Poll every member in turn until ``until()`` is truthy (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        for member in members:
            member.poll()
        value = until()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached within {timeout} s: "
                                 f"{[sorted(mb.owned()) for mb in members]}")


def produce(bootstrap: str, topic: str, per_partition: int, partitions: int, start: int = 0):
    with Producer(bootstrap, **FAST) as p:
        for i in range(start, start + per_partition):
            for part in range(partitions):
                p.send(topic, b"%d-%d" % (part, i), partition=part)
        p.flush(30)


def split_evenly(members, partitions: int):
    owned = [mb.owned() for mb in members]
    together = set().union(*owned)
    return len(together) == partitions and sum(map(len, owned)) == partitions \
        and max(map(len, owned)) - min(map(len, owned)) <= 1


def seen(members) -> list:
    return [(r.partition, r.offset) for mb in members for r in mb.records]


def killed_member_resumes(b: str) -> None:
    """A member process over half of a 4-partition topic is killed with
    SIGKILL; within session + 1 s the survivor reads its partitions from its
    last commit on: no committed record skipped, duplicates only past it.
    (Also run against a 3-broker cluster: test_consumer_group_cluster.py.)"""
    with Admin(b, **FAST) as admin:
        admin.create_topic("crash", 4)
    stop = threading.Event()
    sent = [0]

    def keep_producing():
        with Producer(b, linger_ms=5, **FAST) as p:
            while not stop.is_set() and sent[0] < 20_000:
                for part in range(4):
                    p.send("crash", b"x", partition=part)
                sent[0] += 1
                stop.wait(0.002)

    producer = threading.Thread(target=keep_producing, daemon=True)
    producer.start()
    settings = '{"session_timeout_ms": 2000, "heartbeat_interval_ms": 150, ' \
               '"auto_offset_reset": "earliest", "auto_commit_interval_ms": 300, ' \
               '"fetch_max_wait_ms": 100}'
    proc = subprocess.Popen([sys.executable, MEMBER_PROC, b, "g-crash", "crash", settings],
                            stdout=subprocess.PIPE, text=True)
    lines: list = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    survivor = Member(b, "g-crash", ["crash"], auto_commit_interval_ms=300)
    try:
        spin([survivor], lambda: len(survivor.owned()) == 2 and any(
            ln.startswith("assigned") for ln in list(lines)), 20, "2 x 2 with the process")
        victim_parts = {int(tp.split(":")[1]) for ln in list(lines) if ln.startswith("assigned")
                        for tp in ln.split()[1].split(",")}
        assert victim_parts and not victim_parts & {p for _, p in survivor.owned()}

        def committed_by_victim():
            with Admin(b, **FAST) as admin:
                offs = admin.fetch_offsets("g-crash", [("crash", p) for p in victim_parts])
            return offs if all(o is not None and o.offset > 0 for o in offs.values()) else None

        commits = spin([survivor], committed_by_victim, 15, "the victim's first commits")
        os.kill(proc.pid, signal.SIGKILL)
        t_kill, mark = time.monotonic(), len(survivor.records)
        proc.wait(10)
        reader.join(5)
        last_read = {}
        for ln in lines:
            if ln.startswith("rec "):
                _, p, o = ln.split()
                last_read[int(p)] = max(last_read.get(int(p), -1), int(o))

        def resumed():
            firsts = {}
            for r in survivor.records[mark:]:
                if r.partition in victim_parts:
                    firsts.setdefault(r.partition, r.offset)
            return firsts if set(firsts) == victim_parts else None

        firsts = spin([survivor], resumed, 10, "the victim's partitions read by the survivor")
        took = time.monotonic() - t_kill
        assert took <= 2.0 + 1.0 + 0.5, f"{took:.2f} s from kill -9 to consumption"
        for p in victim_parts:  # from its last commit: nothing skipped, older commits kept
            seen = commits[("crash", p)].offset
            # a partition the victim got with a commit of the member before it and
            # read nothing of: the survivor starts exactly at that commit
            assert seen <= firsts[p] <= last_read.get(p, seen - 1) + 1
        stop.set()
        producer.join(10)
        with Admin(b, **FAST) as admin:
            ends = {tp: o.offset for tp, o in admin.list_offsets(["crash"]).items()}
        spin([survivor], lambda: all(survivor.consumer.position("crash", p) >= ends[("crash", p)]
                                     for p in range(4)), 15, "the survivor catching up")
        for p in victim_parts:  # every offset read by one of them: none skipped
            mine = {r.offset for r in survivor.records[mark:] if r.partition == p}
            assert set(range(firsts[p], ends[("crash", p)])) <= mine
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        reader.join(5)
        proc.stdout.close()
        survivor.consumer.close()
