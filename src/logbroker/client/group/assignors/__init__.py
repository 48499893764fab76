"""Partition assignors for consumer groups, pure and sans-I/O.

The group leader runs one of these client side over the members' JoinGroup
Subscriptions and sends each member its Assignment in SyncGroup (Kafka's
classic group protocol). ``ASSIGNORS`` holds them by Kafka's names;
``choose`` turns a consumer's ``partition_assignment_strategy`` into
Assignors, in the user's order of preference.
"""

from __future__ import annotations

from typing import Iterable

from ....protocol.consumer_protocol import (NO_GENERATION, Assignment, Member, Subscription,
                                            TopicPartition)
from .base import COOPERATIVE, EAGER, Assignor, member_order
from .cooperative_sticky import CooperativeStickyAssignor
from .range import RangeAssignor
from .roundrobin import RoundRobinAssignor

ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (
    RangeAssignor(), RoundRobinAssignor(), CooperativeStickyAssignor())}
DEFAULT = CooperativeStickyAssignor.name


def choose(names: "str | Iterable[str]") -> list[Assignor]:
    """The Assignors named, in order, repeats dropped; a single string is one
    name. ``ValueError`` naming the known assignors on an unknown name, and on
    an empty list."""
    wanted = [names] if isinstance(names, str) else list(names)
    known = ", ".join(sorted(ASSIGNORS))
    if not wanted:
        raise ValueError(f"partition_assignment_strategy is empty (known: {known})")
    chosen: list[Assignor] = []
    for name in wanted:
        assignor = ASSIGNORS.get(name) if isinstance(name, str) else None
        if assignor is None:
            raise ValueError(f"unknown partition assignor {name!r} (known: {known})")
        if assignor not in chosen:
            chosen.append(assignor)
    return chosen


__all__ = ["ASSIGNORS", "COOPERATIVE", "DEFAULT", "EAGER", "NO_GENERATION", "Assignment",
           "Assignor", "CooperativeStickyAssignor", "Member", "RangeAssignor",
           "RoundRobinAssignor", "Subscription", "TopicPartition", "choose", "member_order"]
