"""CooperativeStickyAssignor: balanced, sticky and cooperative (Kafka's
"cooperative-sticky", KIP-429), the default.

One round:

1. ``ownership.resolve``: the valid owner of each partition from the members'
   ``owned`` claims (the highest generation wins; a tie contests it).
2. ``StickyPlan``: a balanced target that keeps each member's valid owned
   partitions (of topics it still subscribes to) as far as balance allows.
3. The cooperative rule: a partition the target gives to member B while
   another member A validly owns it (or that is contested) is left out of
   B's assignment. A is not given it either, so A revokes it and rejoins;
   the next round finds it unowned and gives it to B. No partition passes
   from one owner to another inside one round.

Convergence: with no membership change in between, the round after one that
withheld partitions hands them out and withholds nothing, and the round after
that returns the same assignment.
"""

from __future__ import annotations

from ....protocol.consumer_protocol import Member, TopicPartition
from .base import COOPERATIVE, Assignor
from .ownership import resolve
from .sticky_plan import StickyPlan


class CooperativeStickyAssignor(Assignor):
    name = "cooperative-sticky"
    protocol = COOPERATIVE

    def lists(self, members: list[Member], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
        ownership = resolve(members, counts)
        plan = StickyPlan(members, counts)
        plan.keep(ownership)
        plan.fill()
        plan.balance()
        allowed = {member_id: [tp for tp in target if tp not in ownership.contested
                               and ownership.owner.get(tp, member_id) == member_id]
                   for member_id, target in plan.lists().items()}
        return allowed
