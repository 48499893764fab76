"""Who owns what going into a cooperative rebalance (Kafka's generation rules).

Each member's Subscription claims the partitions it owns (``owned``) as of
its ``generation``. A claim counts only for a partition that exists (its
topic is in the counts and its number below the count). Among the claims on
one partition, the highest generation wins and the others are ignored; when
two or more members claim it in that same highest generation, the partition
is contested: nobody validly owns it, and the cooperative assignor gives it
to nobody this round (every claimant revokes it; the next round assigns it),
as Kafka's AbstractStickyAssignor does with partitionsWithMultiplePreviousOwners.

A valid owner that no longer subscribes to the partition's topic still owns
it until it revokes it: the cooperative assignor does not hand it to anyone
else in this round either.
"""

from __future__ import annotations

from dataclasses import dataclass

from ....protocol.consumer_protocol import Member, TopicPartition


@dataclass(frozen=True)
class Ownership:
    """``owner``: partition -> the member id that validly owns it;
    ``contested``: partitions claimed by several members of the same highest
    generation (in neither ``owner`` nor anyone's kept set)."""

    owner: dict[TopicPartition, str]
    contested: frozenset[TopicPartition]


def resolve(members: list[Member], counts: dict[str, int]) -> Ownership:
    """The valid ownership of the existing partitions, per the module's rules."""
    best: dict[TopicPartition, tuple[int, list[str]]] = {}
    for member in members:
        generation = member.subscription.generation
        for tp in member.subscription.owned:
            if not 0 <= tp[1] < counts.get(tp[0], 0):
                continue
            seen = best.get(tp)
            if seen is None or generation > seen[0]:
                best[tp] = (generation, [member.member_id])
            elif generation == seen[0]:
                seen[1].append(member.member_id)
    owner = {tp: ids[0] for tp, (_, ids) in best.items() if len(ids) == 1}
    contested = frozenset(tp for tp, (_, ids) in best.items() if len(ids) > 1)
    return Ownership(owner, contested)
