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
import time

import pytest

from tests.support.fixtures import FAST, wait_until
from tests.support.consumer_group import (GROUP_FAST, Member, gbroker, killed_member_resumes,  # noqa: F401
                                          produce, seen, spin, split_evenly)
from logbroker import Admin, Consumer, aio
from logbroker.errors import IllegalGenerationError, LogbrokerError, UnknownMemberIdError



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
            # the new generation resumes from the committed offsets (3 on partition 0):
            # read up to the end again before committing the positions
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and [await c.position("stale", p)
                                                   for p in (0, 1)] != [10, 10]:
                await c.poll(0.1)
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
    procs = [subprocess.Popen([LOGBROKER, "consume", "cli4", "--group", "g-cli", "--follow",
                               "--commit-interval-ms", "200"],
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


def test_an_idle_cli_follower_commits_nothing_until_it_prints_more(gbroker):
    """`consume --group --follow` commits what moved, at most every
    --commit-interval-ms: idle, it writes nothing to the offsets topic (it
    committed on every 0.5 s poll, changed or not: issue 32)."""
    from tests.support.fixtures import LOGBROKER

    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("idle1", 1)
    produce(b, "idle1", 3, 1)
    env = dict(os.environ, LOGBROKER_BOOTSTRAP=b)
    proc = subprocess.Popen([LOGBROKER, "consume", "idle1", "--group", "g-idle", "--follow",
                             "--commit-interval-ms", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        with Admin(b, **FAST) as admin:
            def committed(n: int):
                try:
                    d = admin.describe_groups(["g-idle"])["g-idle"]
                except LogbrokerError:
                    return None
                return d if [p.committed for p in d.partitions] == [n] else None

            wait_until(lambda: committed(3), 30, "the first three records committed")
            before = commits_written(b, "g-idle")
            watch_until = time.monotonic() + 1.5  # 15 commit intervals, 3 polls: a window, not a wait
            while time.monotonic() < watch_until:
                assert commits_written(b, "g-idle") == before, "an idle follower committed"
                time.sleep(0.1)
            produce(b, "idle1", 2, 1, start=3)
            wait_until(lambda: committed(5), 30, "the two new records committed")
            assert commits_written(b, "g-idle") > before
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert out.decode().split() == [f"0-{i}" for i in range(5)], err.decode()[-2000:]


def commits_written(bootstrap: str, group: str) -> int:
    """Offset-commit records of ``group`` in the offsets topic (its
    membership records, written at each rebalance, not counted: a loaded
    machine may rebalance a group while it idles)."""
    import msgpack

    from logbroker.coordinator.records import partition_for
    from logbroker.limits import OFFSETS_TOPIC

    with Admin(bootstrap, **FAST) as admin:
        count = len(admin.describe_topics([OFFSETS_TOPIC])[OFFSETS_TOPIC].partitions)
        tp = (OFFSETS_TOPIC, partition_for(group, count))
        end = admin.list_offsets([tp], "latest")[tp].offset
    seen, n = 0, 0
    with Consumer(bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 30
        while seen < end and time.monotonic() < deadline:
            for rec in consumer.poll(timeout=0.5):
                seen = rec.offset + 1
                key = msgpack.unpackb(rec.key, raw=False) if rec.key else None
                n += bool(key and key[0] == 1 and key[1] == group)
    assert seen >= end, f"the offsets topic was read to {seen} of {end}"
    return n


def test_an_idle_auto_committing_consumer_commits_only_what_moved(gbroker):
    """Auto-commit every 100 ms: offsets that did not move are not written again."""
    b = gbroker.bootstrap
    with Admin(b, **FAST) as admin:
        admin.create_topic("idle2", 2)
        produce(b, "idle2", 3, 2)
        with Consumer(b, group="g-idle2", **dict(GROUP_FAST, auto_commit_interval_ms=100)) as c:
            c.subscribe(["idle2"])
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 6 and time.monotonic() < deadline:
                got += c.poll(0.1)
            assert len(got) == 6

            def both_committed():
                c.poll(0.05)  # auto-commit runs at the start of a poll
                d = admin.describe_groups(["g-idle2"])["g-idle2"]
                return [p.committed for p in d.partitions] == [3, 3] or None

            wait_until(both_committed, 30, "both partitions auto-committed")
            before = commits_written(b, "g-idle2")
            watch_until = time.monotonic() + 1.0  # 10 intervals of polling: a window, not a wait
            while time.monotonic() < watch_until:
                assert c.poll(0.05) == []
            assert commits_written(b, "g-idle2") == before, "an idle consumer wrote offsets again"
            produce(b, "idle2", 1, 1, start=3)  # partition 0 moves, partition 1 does not
            while not c.poll(0.1):
                assert time.monotonic() < deadline
            wait_until(lambda: (c.poll(0.05) or True)
                       and commits_written(b, "g-idle2") > before or None,
                       30, "the moved partition committed")
            assert commits_written(b, "g-idle2") == before + 1  # one partition's offset, not both
