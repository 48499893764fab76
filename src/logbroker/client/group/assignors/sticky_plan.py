"""StickyPlan: the working state of one sticky, balanced assignment.

The plan starts empty; ``keep`` gives every member the partitions it validly
owns and subscribes to, ``fill`` gives each remaining partition to the least
loaded member subscribing to its topic, and ``balance`` moves partitions one
at a time from a member to a less loaded one until no single move can help:

    balanced: no member A holds a partition of a topic that a member B
    subscribes to while count(B) < count(A) - 1.

So members with identical subscriptions end with counts at most 1 apart, and
a member keeps its owned partitions except those balance must take (a move
takes the partitions ``fill`` added before kept ones, and only from a member
at least 2 above its receiver).

Members with the same topics (among those with partitions) form a class;
each class keeps a heap of (count, member index), so "the least loaded
member of a class" is one heap top. Ties go to the member first in
member_order, and every choice follows insertion or sort order: the plan is
deterministic.
"""

from __future__ import annotations

import heapq

from ....protocol.consumer_protocol import Member, TopicPartition
from .base import by_topics
from .ownership import Ownership


class StickyPlan:
    def __init__(self, members: list[Member], counts: dict[str, int]) -> None:
        """``members`` in member_order; ``counts``: topic -> partitions (>= 1)."""
        self.members, self.counts = members, counts
        self.count = [0] * len(members)
        self.held: list[dict[str, list[int]]] = [{} for _ in members]  # no empty lists
        effective = {ts: frozenset(t for t in ts if t in counts) for ts in by_topics(members)}
        ids: dict[frozenset[str], int] = {}
        self.class_of = [ids.setdefault(effective[m.subscription.topics], len(ids)) for m in members]
        self.topics = list(ids)  # class -> its topics
        self.heaps: list[list[tuple[int, int]]] = [[] for _ in ids]
        for i, c in enumerate(self.class_of):
            self.heaps[c].append((0, i))  # in heap order already: counts 0, indexes rising
        self.everyone = [(0, i) for i in range(len(members))]  # heap over all members
        self.classes_of: dict[str, list[int]] = {t: [] for t in counts}
        self.takers: dict[str, int] = dict.fromkeys(counts, 0)
        for c, ts in enumerate(self.topics):
            for t in ts:
                self.classes_of[t].append(c)
                self.takers[t] += len(self.heaps[c])
        self._neighbors: dict[int, list[tuple[int, bool]]] = {}

    def keep(self, ownership: Ownership) -> None:
        """Give each member the partitions it validly owns and subscribes to."""
        for i, member in enumerate(self.members):
            topics = self.topics[self.class_of[i]]
            for tp in member.subscription.owned:
                if tp[0] in topics and ownership.owner.get(tp) == member.member_id:
                    self._give(i, tp)

    def fill(self) -> None:
        """Give every partition nobody holds to the least loaded member
        subscribing to its topic: topics with the fewest subscribers first
        (Kafka's order), then by (topic, partition)."""
        held = {(t, p) for h in self.held for t, ps in h.items() for p in ps}
        for topic in sorted(self.counts, key=lambda t: (self.takers[t], t)):
            missing = [p for p in range(self.counts[topic]) if (topic, p) not in held]
            if missing:
                self._fill_topic(topic, missing)

    def _fill_topic(self, topic: str, missing: list[int]) -> None:
        """Deal ``missing`` partitions of ``topic`` one by one to the least
        loaded subscriber; between equals, to the one with the fewest topics
        (the others stay free to take load from topics it cannot take)."""
        tops = [self._fill_key(c) for c in self.classes_of[topic]]
        heapq.heapify(tops)
        for partition in missing:
            _, _, i, c = tops[0]
            self._give(i, (topic, partition))
            heapq.heapreplace(tops, self._fill_key(c))

    def _fill_key(self, c: int) -> tuple[int, int, int, int]:
        count, i = self._top(c)
        return count, len(self.topics[c]), i, c

    def balance(self) -> None:
        """Move partitions until the plan is balanced (module docstring): the
        most loaded member that can give gives first, one partition at a time,
        so no member gives more than balance needs. Each move lowers the sum
        of squared counts, so this ends."""
        moved = True
        while moved:
            moved = False
            donors = [(-n, i) for i, n in enumerate(self.count)]
            heapq.heapify(donors)
            while donors:
                n, i = heapq.heappop(donors)
                if -n != self.count[i]:
                    continue  # stale: it received since
                j = self._shed(i)
                if j is not None:
                    moved = True
                    heapq.heappush(donors, (-self.count[i], i))
                    heapq.heappush(donors, (-self.count[j], j))

    def lists(self) -> dict[str, list[TopicPartition]]:
        """member_id -> the partitions the plan gives it."""
        return {m.member_id: [(t, p) for t, ps in self.held[i].items() for p in ps]
                for i, m in enumerate(self.members)}

    def _shed(self, i: int) -> "int | None":
        """Move one partition from member i to the least loaded member that
        can take one of its topics, if that member is 2 or more below i;
        the receiver's index, or None."""
        limit = self.count[i] - 1  # a receiver must hold fewer
        if _top(self.everyone, self.count)[0] >= limit:
            return None
        best = None
        for c, covers in self._neighbors_of(self.class_of[i]):
            top = self._top(c)
            if top[0] < limit and (best is None or top < best[0]):
                topic = self._common(i, c, covers)
                if topic is not None:
                    best = (top, topic)
        if best is None:
            return None
        (_, j), topic = best
        partitions = self.held[i][topic]
        partition = partitions.pop()
        if not partitions:
            del self.held[i][topic]
        self.count[i] -= 1
        self._push(i)
        self._give(j, (topic, partition))
        return j

    def _common(self, i: int, c: int, covers: bool) -> "str | None":
        """A topic member i holds partitions of and class c subscribes to: the
        one i got last (fill's additions come after kept partitions)."""
        if covers:
            return next(reversed(self.held[i]))
        topics = self.topics[c]
        return next((t for t in reversed(self.held[i]) if t in topics), None)

    def _neighbors_of(self, c: int) -> list[tuple[int, bool]]:
        """(class, whether it subscribes to every topic of class c) for the
        classes sharing a topic with c, in class order."""
        if c not in self._neighbors:
            mine = self.topics[c]
            shared = sorted({d for t in mine for d in self.classes_of[t]})
            self._neighbors[c] = [(d, mine <= self.topics[d]) for d in shared]
        return self._neighbors[c]

    def _give(self, i: int, tp: TopicPartition) -> None:
        self.held[i].setdefault(tp[0], []).append(tp[1])
        self.count[i] += 1
        self._push(i)

    def _push(self, i: int) -> None:
        heapq.heappush(self.heaps[self.class_of[i]], (self.count[i], i))
        heapq.heappush(self.everyone, (self.count[i], i))

    def _top(self, c: int) -> tuple[int, int]:
        return _top(self.heaps[c], self.count)


def _top(heap: list[tuple[int, int]], count: list[int]) -> tuple[int, int]:
    """(count, index) of the least loaded member in ``heap``, dropping stale
    entries (each member's current count was pushed when it changed)."""
    while heap[0][0] != count[heap[0][1]]:
        heapq.heappop(heap)
    return heap[0]
