"""RoundRobinAssignor: every partition dealt in turn (Kafka's "roundrobin").

All partitions of all subscribed topics, sorted by (topic, partition), are
dealt one at a time over the members in member_order, one circular turn for
the whole group: a member not subscribing to a partition's topic is skipped
(the turn moves on to the next that does). With identical subscriptions the
counts differ by at most 1. Owned partitions are ignored (eager protocol).
"""

from __future__ import annotations

from ....protocol.consumer_protocol import Member, TopicPartition
from .base import EAGER, Assignor, by_topics


class RoundRobinAssignor(Assignor):
    name = "roundrobin"
    protocol = EAGER

    def lists(self, members: list[Member], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
        sets = {topics: frozenset(topics) for topics in by_topics(members)}
        topics = [sets[m.subscription.topics] for m in members]
        lists: dict[str, list[TopicPartition]] = {}
        turn = 0
        for topic, count in counts.items():
            for partition in range(count):
                while topic not in topics[turn]:  # some member subscribes: counts says so
                    turn = (turn + 1) % len(members)
                lists.setdefault(members[turn].member_id, []).append((topic, partition))
                turn = (turn + 1) % len(members)
        return lists
