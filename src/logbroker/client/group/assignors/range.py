"""RangeAssignor: contiguous ranges of each topic's partitions (Kafka's "range").

Per topic, the members subscribing to it are put in member_order (static
members by group_instance_id) and the partitions split into contiguous
ranges: with n partitions over c members, the first n % c members get
n // c + 1 partitions, the others n // c. Owned partitions are ignored
(eager protocol). As in Kafka, the first members get the extra partition of
every topic, so with identical subscriptions totals can differ by more than 1.
"""

from __future__ import annotations

from ....protocol.consumer_protocol import Member, TopicPartition
from .base import EAGER, Assignor, subscribers


class RangeAssignor(Assignor):
    name = "range"
    protocol = EAGER

    def lists(self, members: list[Member], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
        lists: dict[str, list[TopicPartition]] = {}
        for topic, takers in subscribers(members, counts).items():
            per, extra = divmod(counts[topic], len(takers))
            start = 0
            for i in range(min(len(takers), counts[topic])):  # members past that get none
                length = per + (1 if i < extra else 0)
                lists.setdefault(takers[i].member_id, []).extend(
                    (topic, p) for p in range(start, start + length))
                start += length
        return lists
