"""The server-side assignors of consumer-protocol groups (KIP-848), sans-I/O.

``assign(name, members, partitions, current)`` computes a group's target
assignment: ``members`` maps each member id to the topics it subscribes to,
``partitions`` each subscribed topic to its partition count, ``current``
each member's current target (``{topic: frozenset(partitions)}``). The
answer maps every member id to its new target, same shape; every partition
of a subscribed topic goes to exactly one member subscribing to it (none
when no member does).

- ``uniform`` (Kafka 4's default): balanced and sticky. Every member keeps
  what it has as far as balance allows; with identical subscriptions the
  counts differ by at most one. With different subscriptions, a partition
  goes to the least-loaded member subscribing to its topic, members keep
  their partitions while within the largest fair share, and one pass moves
  partitions from members above it to members below (bounded work).
- ``range``: per topic, the subscribing members in id order get contiguous
  ranges, the first ``count % members`` one more (co-partitioned topics land
  together), as Kafka's range assignor.

Work is O(partitions + members * log(members)) per topic and bounded by the
group's size limit and the partitions of the subscribed topics.
"""

from __future__ import annotations

import heapq
import itertools

UNIFORM, RANGE = "uniform", "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(name: str, members: dict, partitions: dict, current: dict) -> dict:
    """The target assignment by ``name`` (``UNIFORM`` or ``RANGE``)."""
    if name == RANGE:
        return _range(members, partitions)
    return _uniform(members, partitions, current)


def _subscribers(members: dict, partitions: dict) -> dict:
    """{topic: [member ids subscribing, in id order]} for existing topics."""
    out: dict = {}
    for mid in sorted(members):
        for topic in members[mid]:
            if partitions.get(topic, 0) > 0:
                out.setdefault(topic, []).append(mid)
    return out


def _range(members: dict, partitions: dict) -> dict:
    out: dict = {mid: {} for mid in members}
    for topic, subs in _subscribers(members, partitions).items():
        count = partitions[topic]
        base, extra = divmod(count, len(subs))
        start = 0
        for i, mid in enumerate(subs):
            n = base + (i < extra)
            if n:
                out[mid][topic] = frozenset(range(start, start + n))
            start += n
    return out


def _uniform(members: dict, partitions: dict, current: dict) -> dict:
    subs = _subscribers(members, partitions)
    if not subs:
        return {mid: {} for mid in members}
    eligible = {mid: set(t for t in members[mid] if t in subs) for mid in members}
    total = sum(partitions[t] for t in subs)
    active = [mid for mid in sorted(members) if eligible[mid]]
    homogeneous = len({frozenset(eligible[mid]) for mid in active}) == 1
    if homogeneous:
        out = {mid: {} for mid in members}
        out.update(_uniform_same(active, sorted(eligible[active[0]]), partitions, current))
        return out
    # the largest fair share: exact with identical subscriptions
    quota = -(-total // len(active)) if active else 0
    base, extra = divmod(total, len(active)) if active else (0, 0)
    held: dict = {mid: [] for mid in members}  # [(topic, partition)]
    taken: set = set()
    # 1. stickiness: keep what is still valid, within the share
    over_base = 0
    for mid in sorted(active, key=lambda m: -_count(current.get(m, {}))):
        limit = quota
        if homogeneous:
            limit = base + 1 if over_base < extra else base
        mine = sorted((t, p) for t, ps in current.get(mid, {}).items() if t in eligible[mid]
                      for p in ps if p < partitions[t] and (t, p) not in taken)
        keep = mine[:limit]
        held[mid] = keep
        taken.update(keep)
        if homogeneous and len(keep) > base:
            over_base += 1
    # 2. the rest to the least-loaded subscriber of each topic
    for topic in sorted(subs):
        heap = [(len(held[mid]), mid) for mid in subs[topic]]
        heapq.heapify(heap)
        for p in range(partitions[topic]):
            if (topic, p) in taken:
                continue
            n, mid = heapq.heappop(heap)
            held[mid].append((topic, p))
            taken.add((topic, p))
            heapq.heappush(heap, (n + 1, mid))
    if not homogeneous:
        _even_out(held, eligible, active)
    return {mid: _by_topic(held[mid]) for mid in members}


def _uniform_same(active: list, topics: list, partitions: dict, current: dict) -> dict:
    """Identical subscriptions: counts ``base`` or ``base + 1``; members keep
    what they hold up to theirs (the largest holders first), the free
    partitions fill the rest in member id order. Set operations per member
    and topic: O(partitions + members), no per-partition heap."""
    base, extra = divmod(sum(partitions[t] for t in topics), len(active))
    free = {t: set(range(partitions[t])) for t in topics}
    out: dict = {}
    counts: dict = {}
    for mid in sorted(active, key=lambda m: (-_count(current.get(m, {})), m)):
        limit, got, k = base + (1 if extra else 0), {}, 0
        for t in sorted(current.get(mid, {})):
            if t not in free or k >= limit:
                continue
            mine = current[mid][t] & free[t]
            if len(mine) > limit - k:
                mine = set(sorted(mine)[:limit - k])
            if mine:
                got[t] = set(mine)
                free[t] -= mine
                k += len(mine)
        if k > base:
            extra -= 1
        out[mid], counts[mid] = got, k
    rest = ((t, p) for t in topics for p in sorted(free[t]))
    for mid in sorted(active):
        want = base + (1 if counts[mid] > base else 0)
        if counts[mid] <= base and extra:
            want, extra = base + 1, extra - 1
        for t, p in itertools.islice(rest, max(want - counts[mid], 0)):
            out[mid].setdefault(t, set()).add(p)
    return {mid: {t: frozenset(ps) for t, ps in got.items()} for mid, got in out.items()}


def _even_out(held: dict, eligible: dict, active: list) -> None:
    """One pass: from the most-loaded members, move partitions to a member
    holding at least two fewer that subscribes to their topic."""
    for mid in sorted(active, key=lambda m: -len(held[m])):
        for tp in list(held[mid]):
            lighter = min((m for m in active if tp[0] in eligible[m]),
                          key=lambda m: (len(held[m]), m))
            if len(held[mid]) - len(held[lighter]) <= 1:
                break
            held[mid].remove(tp)
            held[lighter].append(tp)


def _count(assignment: dict) -> int:
    return sum(len(ps) for ps in assignment.values())


def _by_topic(pairs: list) -> dict:
    out: dict = {}
    for topic, p in pairs:
        out.setdefault(topic, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}
