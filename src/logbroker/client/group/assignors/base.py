"""The Assignor contract and the helpers every assignor shares.

An assignor is pure: ``assign(members, partitions)`` reads only its arguments
and returns the same result for the same input, whatever the order of
``members`` or of the ``partitions`` map (no dict-order or hash-seed
dependence).
"""

from __future__ import annotations

from typing import ClassVar, Iterable

from ....protocol.consumer_protocol import Assignment, Member, TopicPartition

EAGER = "eager"
COOPERATIVE = "cooperative"


class Assignor:
    """Base of the partition assignors the group leader runs (client side).

    ``name`` is the protocol name members advertise in JoinGroup (Kafka's);
    ``protocol`` is ``"eager"`` (members revoke everything before rejoining)
    or ``"cooperative"`` (KIP-429: members keep their partitions through the
    rebalance and revoke only what the assignment takes away).
    """

    name: ClassVar[str] = ""
    protocol: ClassVar[str] = EAGER

    def assign(self, members: list[Member], partitions: dict[str, int]) -> dict[str, Assignment]:
        """member_id -> Assignment for every member of ``members``.

        ``partitions``: topic -> partition count of the topics any member
        subscribes to; a subscribed topic missing from it (or with a count
        below 1) has no partitions yet and is skipped. Each partition of a
        subscribed topic goes to at most one member, and only to one that
        subscribes to its topic; a member subscribed to nothing gets an empty
        Assignment. ``ValueError`` if two members share a member id.
        """
        members = ordered(members)
        return result(members, self.lists(members, subscribed_counts(members, partitions)))

    def lists(self, members: list[Member], counts: dict[str, int]) -> dict[str, list[TopicPartition]]:
        """The assignor's own step: member_id -> partitions (a member may be
        missing: it gets none). ``members`` in member_order, unique;
        ``counts``: topic -> partition count (>= 1) of the subscribed topics."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ({self.protocol})>"


def member_order(member: Member) -> tuple:
    """Kafka's member order: static members first, by group_instance_id, then
    dynamic members by member id (ties broken by member id)."""
    if member.group_instance_id is not None:
        return (0, member.group_instance_id, member.member_id)
    return (1, member.member_id, "")


def ordered(members: Iterable[Member]) -> list[Member]:
    """``members`` in member_order; ``ValueError`` on a repeated member id."""
    result = sorted(members, key=member_order)
    ids = {m.member_id for m in result}
    if len(ids) != len(result):
        raise ValueError("assign: member ids must be unique")
    return result


def by_topics(members: list[Member]) -> dict[tuple[str, ...], list[Member]]:
    """The members grouped by their subscribed topics, each group in the order
    of ``members`` (one dict lookup per member: cheap with many topics)."""
    groups: dict[tuple[str, ...], list[Member]] = {}
    for member in members:
        groups.setdefault(member.subscription.topics, []).append(member)
    return groups


def subscribed_counts(members: list[Member], partitions: dict[str, int]) -> dict[str, int]:
    """topic -> partition count of the topics some member subscribes to and
    that have partitions, in topic order."""
    wanted = set().union(*by_topics(members))
    return {t: partitions[t] for t in sorted(wanted) if partitions.get(t, 0) > 0}


def subscribers(members: list[Member], counts: dict[str, int]) -> dict[str, list[Member]]:
    """topic -> the members subscribing to it, in the order of ``members``
    (callers must not change the lists: groups share them)."""
    found: dict[str, list[list[Member]]] = {t: [] for t in counts}
    for topics, group in by_topics(members).items():
        for topic in topics:
            if topic in found:
                found[topic].append(group)
    position = {m.member_id: i for i, m in enumerate(members)}
    return {t: groups[0] if len(groups) == 1 else
            sorted((m for g in groups for m in g), key=lambda m: position[m.member_id])
            for t, groups in found.items()}


def result(members: list[Member], lists: dict[str, list[TopicPartition]]) -> dict[str, Assignment]:
    """member_id -> Assignment, an empty one for a member missing from ``lists``."""
    return {m.member_id: Assignment(tuple(lists.get(m.member_id, ()))) for m in members}
