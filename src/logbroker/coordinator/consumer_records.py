"""The offsets log's record of a consumer-protocol group (KIP-848), sans-I/O.

Key ``[3, group]`` (records.py's kinds: 1 an offset, 2 a classic group),
value ``[group_epoch, assignment_epoch, members, topics]`` with each member
``[member_id, instance_id, rack_id, client_id, host, member_epoch,
rebalance_timeout_ms, topic names, regex, assignor, assigned, revoking,
target]``, the last three maps of topic to partition lists, and
``topics`` the subscribed topics' partition counts the target was computed
for (so a restored group sees no change unless there was one). One record
holds the whole group, so compaction keeps its newest state; a tombstone
deletes it. A coordinator taking over replays it (loading.py): members keep
their epochs and partitions and get a full session to heartbeat again.
"""

from __future__ import annotations

from dataclasses import dataclass

CONSUMER_KIND = 3


@dataclass(frozen=True)
class ConsumerMemberRecord:
    member_id: str
    instance_id: "str | None"
    rack_id: "str | None"
    client_id: str
    host: str
    member_epoch: int
    rebalance_timeout_ms: int
    names: tuple
    regex: "str | None"
    assignor: "str | None"
    assigned: dict
    revoking: dict
    target: dict


@dataclass(frozen=True)
class ConsumerGroupRecord:
    """``group_epoch`` None: the group was deleted (tombstone)."""

    group: str
    group_epoch: "int | None"
    assignment_epoch: int = 0
    members: tuple = ()
    topics: "dict | None" = None  # topic -> partitions the target was computed for


def consumer_pair(r: ConsumerGroupRecord) -> tuple:
    """(value, key) as msgpack-ready lists (records.py packs them)."""
    key = [CONSUMER_KIND, r.group]
    if r.group_epoch is None:
        return None, key
    return [r.group_epoch, r.assignment_epoch, [
        [m.member_id, m.instance_id, m.rack_id, m.client_id, m.host, m.member_epoch,
         m.rebalance_timeout_ms, list(m.names), m.regex, m.assignor, m.assigned, m.revoking,
         m.target] for m in r.members], r.topics or {}], key


def consumer_parse(key: list, value) -> ConsumerGroupRecord:
    group = str(key[1])
    if value is None:
        return ConsumerGroupRecord(group, None)
    group_epoch, assignment_epoch, members, topics = value
    return ConsumerGroupRecord(group, int(group_epoch), int(assignment_epoch), tuple(
        ConsumerMemberRecord(str(a), _opt(b), _opt(c), str(d), str(e), int(f), int(g),
                             tuple(str(n) for n in h), _opt(i), _opt(j), _parts(k), _parts(l),
                             _parts(mm))
        for a, b, c, d, e, f, g, h, i, j, k, l, mm in members),
        {str(t): int(n) for t, n in dict(topics).items()})


def _opt(v) -> "str | None":
    return None if v is None else str(v)


def _parts(d) -> dict:
    return {str(t): [int(p) for p in ps] for t, ps in dict(d).items()}
