"""The measurements of the groups bench (bench/groups/__main__.py), each on a running
setup (bench/cluster/procs.py's ``Setup``: a single node, or etcd + 3
brokers) and with member processes (bench/groups/procs.py).

- ``hand_over_trials``: a group of ``members`` processes over a topic of
  ``partitions`` partitions that a Feeder keeps writing to; each trial takes
  one member away (``crash``: SIGKILL to its PID; ``leave``: a clean
  ``close()``) and times, from that moment, (a) the last of its partitions
  to be assigned to another member and (b) the last of its partitions to
  have a record read by another member (the figure). A new member replaces
  it and the group settles again before the next trial.
- ``throughput_run``: ``k`` gated members over a filled topic; once the
  group is settled (Stable, the coordinator's assignment applied by every
  member) the bench says ``go`` and times until every record has been read;
  records/s and MB/s (key + value bytes) of the whole group.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass

from bench.common.procs import wait_until
from bench.groups.procs import Feeder, MemberProc, describe, settled

_ids = itertools.count(1)


@dataclass(frozen=True)
class Params:
    session_ms: int = 2_000
    heartbeat_ms: int = 200
    members: int = 3
    partitions: int = 6
    trials: int = 7  # per hand-over kind on the single node
    cluster_trials: int = 5
    rounds: int = 3  # throughput: single consumer and group, alternating
    records: int = 2_000_000
    value_bytes: int = 100
    member_max_s: int = 1_800  # a member process ends by itself after that


QUICK = Params(session_ms=1_000, heartbeat_ms=100, trials=1, cluster_trials=1, rounds=1,
               records=30_000)


def member(bootstrap: str, group: str, topic: str, p: Params, workdir: str,
           gated: bool = False) -> MemberProc:
    """A new member process (client id ``m<n>``), its stderr in the work dir."""
    cid = f"m{next(_ids)}"
    settings = dict(client_id=cid, session_timeout_ms=p.session_ms,
                    heartbeat_interval_ms=p.heartbeat_ms, auto_offset_reset="earliest",
                    auto_commit_interval_ms=500)
    spec = dict(bootstrap=bootstrap, group=group, topics=[topic], settings=settings,
                max_seconds=p.member_max_s, gated=gated)
    return MemberProc(spec, os.path.join(workdir, f"{cid}.log"))


def settle(admin, group: str, members: list, partitions: set, timeout: float = 60.0):
    """Wait (bounded) until ``settled``; the group's description."""
    box = []

    def check():
        box[:] = [describe(admin, group)]
        return settled(box[0], members, partitions)

    try:
        wait_until(check, timeout, f"group {group} settled with {len(members)} members", 0.05)
    except TimeoutError as exc:
        views = {mb.client_id: sorted(mb.view()) for mb in members}
        raise TimeoutError(f"{exc}; coordinator: {box[0]}; members: {views}") from None
    return box[0]


def close_all(members: list) -> None:
    for mb in members:
        mb.close()


# -- hand-over after a crash or a clean leave ----------------------------------------------
def hand_over_trials(kind: str, admin, bootstrap: str, p: Params, trials: int, workdir: str,
                     log) -> list[dict]:
    """``trials`` trials of ``kind`` ("crash" or "leave"), see the module docstring."""
    topic = group = f"{kind}-{next(_ids)}"
    admin.create_topic(topic, p.partitions)
    every = {(topic, i) for i in range(p.partitions)}
    feeder = Feeder(bootstrap, topic, p.partitions, max_seconds=p.member_max_s).start()
    members = [member(bootstrap, group, topic, p, workdir) for _ in range(p.members)]
    out = []
    try:
        settle(admin, group, members, every)
        for trial in range(trials):
            slot = trial % p.members
            out.append(one_hand_over(kind, members, slot, p))
            log(f"{kind} trial {trial + 1}/{trials}: partitions read by another member "
                f"{out[-1]['first_s']:.2f} s after the {kind} (assigned at "
                f"{out[-1]['assigned_s']:.2f} s)")
            members[slot] = member(bootstrap, group, topic, p, workdir)
            settle(admin, group, members, every)
    finally:
        close_all(members)
        feeder.stop()
    admin.delete_topics([topic], raise_errors=False)
    return out


def one_hand_over(kind: str, members: list, slot: int, p: Params) -> dict:
    """Take ``members[slot]`` away; time until its partitions are read elsewhere."""
    victim = members[slot]
    theirs = victim.view()
    others = [mb for i, mb in enumerate(members) if i != slot]
    if kind == "crash":
        t0 = victim.kill()
    else:
        t0 = time.monotonic()
        victim.tell("close")

    def merged(what: str) -> dict:
        out: dict = {}
        for mb in others:
            for tp, t in getattr(mb, what)(t0).items():
                out[tp] = min(t, out.get(tp, t))
        return out

    def all_read():
        got = merged("firsts_after")
        return got if theirs <= set(got) else None

    firsts = wait_until(all_read, p.session_ms / 1000 + 30,
                        f"the {kind} victim's partitions read elsewhere", 0.02)
    assigned = merged("assigned_after")
    if kind == "leave":
        victim.close()
    return {"kind": kind, "pid": victim.pid, "partitions": sorted(p for _, p in theirs),
            "first_s": max(firsts[tp] for tp in theirs) - t0,
            "assigned_s": max(assigned.get(tp, firsts[tp]) for tp in theirs) - t0}


# -- throughput --------------------------------------------------------------------------------
def fill(bootstrap: str, admin, topic: str, p: Params) -> None:
    """``p.records`` records of ``p.value_bytes`` (8-byte keys) over the partitions."""
    from logbroker import Producer

    admin.create_topic(topic, p.partitions)
    value = b"v" * p.value_bytes
    with Producer(bootstrap, linger_ms=5, batch_size=1 << 20, request_timeout_ms=60_000) as prod:
        for i in range(p.records):
            prod.send(topic, value, key=b"%08d" % (i % 100_000_000), partition=i % p.partitions)
        prod.flush(300)


def throughput_run(k: int, admin, bootstrap: str, topic: str, p: Params, workdir: str) -> dict:
    """One run of ``k`` gated members reading all of ``topic`` (see the module docstring)."""
    group = f"tput-{k}-{next(_ids)}"
    every = {(topic, i) for i in range(p.partitions)}
    members = [member(bootstrap, group, topic, p, workdir, gated=True) for _ in range(k)]
    try:
        settle(admin, group, members, every)
        t0 = time.monotonic()
        for mb in members:
            mb.tell("go")
        wait_until(lambda: sum(mb.count()[0] for mb in members) >= p.records,
                   max(60.0, p.records / 20_000), f"{k} member(s) reading {p.records} records", 0.05)
        counts = [mb.count() for mb in members]
    finally:
        close_all(members)
    secs = max(c[3] for c in counts) - t0
    records, nbytes = sum(c[0] for c in counts), sum(c[1] for c in counts)
    return {"members": k, "records": records, "bytes": nbytes, "seconds": secs,
            "records_per_s": records / secs, "mb_per_s": nbytes / secs / 1e6,
            "per_member": [c[0] for c in counts]}
