"""Consumer groups with membership against a real single-node broker: members
share the partitions, cooperative rebalances keep what they can, a killed
member's partitions resume from its last commit, a stale member's commit is
refused, static members come back without a rebalance, a clean leave hands
partitions over at once, pattern subscriptions follow new topics.

Members run in the test thread (each ``poll`` in turn: the sync consumer's
callbacks run there) or, for the crash, in a process of their own
(tests/support/children/group_member.py). Waits are bounded; short group timeouts.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.support.fixtures import FAST, BrokerProcess, wait_until
from logbroker import Admin, Consumer, Producer, aio
from logbroker.errors import IllegalGenerationError, LogbrokerError, UnknownMemberIdError

GROUP_FAST = dict(session_timeout_ms=2_000, heartbeat_interval_ms=150,
                  auto_offset_reset="earliest", fetch_max_wait_ms=100, **FAST)
MEMBER_PROC = os.path.join(os.path.dirname(__file__), "..", "support", "children", "group_member.py")


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


def test_members_share_partitions_exactly_once_and_a_fourth_rebalances_cooperatively(gbroker):
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("six", 6)
    produce(b, "six", 50, 6)
    first = Member(b, "g-six", ["six"])
    members = [first]
    try:  # the first member reads alone for a while, then two more join
        spin(members, lambda: len(first.owned()) == 6 and len(first.records) > 0, 15,
             "the first member owning everything")
        members += [Member(b, "g-six", ["six"]) for _ in range(2)]
        spin(members, lambda: split_evenly(members, 6) and all(len(mb.owned()) == 2
                                                              for mb in members), 15, "3 x 2")
        produce(b, "six", 50, 6, start=50)
        spin(members, lambda: len(seen(members)) >= 600, 15, "every record read")
        got = seen(members)
        assert sorted(got) == sorted(set(got)), "a record was read twice before any failure"
        assert sorted(got) == [(p, o) for p in range(6) for o in range(100)]
        kept = {id(mb): mb.owned() for mb in members}
        before = {id(mb): len(mb.records) for mb in members}
        members.append(Member(b, "g-six", ["six"]))  # a 4th: 2, 2, 1, 1
        t0 = time.monotonic()
        spin(members, lambda: split_evenly(members, 6) and members[3].owned(), 15, "4 members")
        rebalance_s = time.monotonic() - t0
        produce(b, "six", 20, 6, start=100)
        spin(members, lambda: len(seen(members)) >= 720, 15, "the records after the 4th joined")
        for mb in members[:3]:
            assert mb.owned() <= kept[id(mb)], "cooperative-sticky moved a partition it kept"
            assert not (mb.revoked() & mb.owned()), "a kept partition was revoked"
            assert len(mb.records) > before[id(mb)]  # it went on reading what it kept
        assert len(members[3].owned()) == 1 and rebalance_s < 10
        got = seen(members)
        assert sorted(set(got)) == [(p, o) for p in range(6) for o in range(120)]
        assert len(got) == len(set(got))  # revocations committed first: no duplicates either
    finally:
        for mb in members:
            mb.consumer.close()


def test_a_clean_leave_hands_the_partitions_over_at_once(gbroker):
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("leave", 4)
    a, c = Member(b, "g-leave", ["leave"]), Member(b, "g-leave", ["leave"])
    try:
        spin([a, c], lambda: split_evenly([a, c], 4) and len(a.owned()) == 2, 15, "2 x 2")
        theirs = a.owned()
        t0 = time.monotonic()
        a.consumer.close()
        spin([c], lambda: len(c.owned()) == 4, 5, "the survivor owning everything")
        took = time.monotonic() - t0
        assert took < 1.5, f"a clean leave took {took:.2f} s to hand over"
        assert ("revoke", sorted(theirs)) in [(k, ps) for k, ps, _ in a.events]
    finally:
        a.consumer.close()
        c.consumer.close()


def test_a_killed_member_loses_its_partitions_and_they_resume_from_its_last_commit(gbroker):
    killed_member_resumes(gbroker.bootstrap)


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


def test_a_stale_members_commit_is_refused_and_not_applied(gbroker):
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("stale", 2)
    produce(b, "stale", 10, 2)

    async def main():
        events = []
        async with aio.Consumer(b, group="g-stale", **{**GROUP_FAST,
                                                       "session_timeout_ms": 1_500}) as c:
            async def on_assign(ps):
                events.append(("assign", ps))

            await c.subscribe(["stale"], on_assign=on_assign,
                              on_lost=lambda ps: events.append(("lost", ps)))
            got = []
            deadline = time.monotonic() + 15
            while len(got) < 20 and time.monotonic() < deadline:
                got += await c.poll(0.1)
            assert len(got) == 20 and events[0][0] == "assign"
            await c.commit({("stale", 0): 3})
            gen = c._core.group.member.generation
            time.sleep(2.5)  # not synchronisation: the loop stalls past the session timeout
            with pytest.raises((IllegalGenerationError, UnknownMemberIdError),
                               match="stale.*nothing was committed"):
                await c.commit({("stale", 0): 7})
            async with aio.Admin(b, **FAST) as admin:
                assert (await admin.fetch_offsets("g-stale"))[("stale", 0)].offset == 3
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not (
                    events[-1][0] == "assign" and len(events) > 2):
                await c.poll(0.1)
            assert ("lost", [("stale", 0), ("stale", 1)]) in events
            assert c._core.group.member.generation > gen and len(c.assignment()) == 2
            await c.commit()  # a member again: its commit is applied
            async with aio.Admin(b, **FAST) as admin:
                assert (await admin.fetch_offsets("g-stale"))[("stale", 0)].offset == 10

    asyncio.run(main())


def test_a_static_member_restarting_within_its_session_keeps_its_partitions(gbroker):
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("static", 4)
    static = dict(session_timeout_ms=4_000)
    a = Member(b, "g-static", ["static"], group_instance_id="a", **static)
    c = Member(b, "g-static", ["static"], group_instance_id="c", **static)
    try:
        spin([a, c], lambda: split_evenly([a, c], 4) and len(a.owned()) == 2, 15, "2 x 2")
        with Admin(b, **FAST) as admin:
            before = admin.describe_groups(["g-static"])["g-static"]
        mine = a.owned()
        old = a
        a.consumer.close()  # a static member sends no LeaveGroup, but revokes locally
        assert old.events[-1][0] == "revoke" and set(old.events[-1][1]) == mine
        a = Member(b, "g-static", ["static"], group_instance_id="a", **static)
        spin([a, c], lambda: a.owned(), 5, "the restarted static member's partitions")
        assert a.owned() == mine
        with Admin(b, **FAST) as admin:
            after = admin.describe_groups(["g-static"])["g-static"]
        assert after.generation == before.generation and after.state == "Stable"
        assert {m.group_instance_id for m in after.members} == {"a", "c"}
        assert [k for k, _, _ in c.events] == ["assign"]  # the other member saw no rebalance
    finally:
        a.consumer.close()
        c.consumer.close()


def test_a_pattern_subscription_picks_up_a_topic_created_later(gbroker):
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("pat-one", 1)
        admin.create_topic("other", 1)
    produce(b, "pat-one", 3, 1)
    produce(b, "other", 3, 1)
    mb = Member(b, "g-pat", pattern=r"pat-.*", metadata_max_age_ms=300)
    try:
        spin([mb], lambda: len(mb.records) >= 3, 15, "the first topic's records")
        with Admin(b, **FAST) as admin:
            admin.create_topic("pat-two", 2)
        produce(b, "pat-two", 2, 2)
        spin([mb], lambda: len(mb.records) >= 7, 10, "the new topic's records")
        assert {r.topic for r in mb.records} == {"pat-one", "pat-two"}
        assert mb.owned() == {("pat-one", 0), ("pat-two", 0), ("pat-two", 1)}
        assert mb.consumer.subscription() == "pat-.*"
    finally:
        mb.consumer.close()


def test_two_cli_consumers_of_one_group_split_the_partitions(gbroker):
    from tests.support.fixtures import LOGBROKER, cli_error, cli_ok, run_cli

    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("cli4", 4)
    env = dict(os.environ, LOGBROKER_BOOTSTRAP=b)
    procs = [subprocess.Popen([LOGBROKER, "consume", "cli4", "--group", "g-cli", "--follow"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for _ in range(2)]
    try:
        def split(read: bool):
            with Admin(b, **FAST) as admin:
                try:
                    d = admin.describe_groups(["g-cli"])["g-cli"]
                except LogbrokerError:
                    return None
            ok = d.state == "Stable" and sorted(len(mb.partitions) for mb in d.members) == [2, 2]
            return d if ok and (not read or len(d.partitions) == 4 and all(
                p.lag == 0 and p.committed == 10 for p in d.partitions)) else None

        first = wait_until(lambda: split(False), 30, "two CLI members with 2 partitions each")
        produce(b, "cli4", 10, 4)  # after the split: each member prints its own partitions
        desc = wait_until(lambda: split(True), 30, "every record read and committed")
        assert [mb.partitions for mb in desc.members] == [mb.partitions for mb in first.members]
        table = cli_ok(run_cli("groups", "describe", "g-cli", bootstrap=b))
        assert "state Stable" in table and "cli4[" in table and "cooperative-sticky" in table
        cli_error(run_cli("groups", "delete", "g-cli", bootstrap=b), "NON_EMPTY_GROUP")
    finally:
        outs = []
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            out, _ = proc.communicate(timeout=30)
            outs.append(out.decode().split())
    owned = [{tp[1] for tp in mb.partitions} for mb in desc.members]
    printed = [{int(v.split("-")[0]) for v in out} for out in outs]
    assert sorted(map(sorted, printed)) == sorted(map(sorted, owned))  # each its own partitions
    assert sorted(outs[0] + outs[1]) == sorted(f"{p}-{i}" for p in range(4) for i in range(10))
    cli_ok(run_cli("groups", "delete", "g-cli", bootstrap=b))  # empty once both left
    cli_error(run_cli("groups", "describe", "g-cli", bootstrap=b), "GROUP_ID_NOT_FOUND")
