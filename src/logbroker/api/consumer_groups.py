"""Handlers of consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat
and ConsumerGroupDescribe, over the group coordinator
(coordinator/consumer_group.py holds the state machine).

A group id is of one kind at a time. A heartbeat for a group the
coordinator does not know, or a classic group without members (offsets
only), makes it a consumer-protocol group (its offsets kept); a classic group
with members is GROUP_ID_NOT_FOUND to a heartbeat, as in Kafka, and a
classic JoinGroup into a consumer-protocol group INCONSISTENT_GROUP_PROTOCOL.
Counts and sizes a request carries are bounded here, before the group sees
it: every refusal is logged at debug level with its reason.
"""

from __future__ import annotations

import logging
import time

from .. import limits
from ..coordinator.consumer_group import Beat, ConsumerGroup
from ..errors import GroupNotFoundError, InvalidRequestError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.consumer_group_messages import (ConsumerGroupDescription,
                                                ConsumerMemberDescription, TopicPartitions)
from .groups import MAX_ID_CHARS

log = logging.getLogger("logbroker.coordinator")
MAX_OWNED_PARTITIONS = 100_000  # partitions a member may say it owns in one heartbeat
MAX_GROUPS = 1_000  # groups of one ConsumerGroupDescribe


class Topics:
    """What a group needs of the topics (assignors, subscriptions), read
    from the broker's metadata when asked."""

    __slots__ = ("meta",)

    def __init__(self, meta) -> None:
        self.meta = meta

    def count(self, name: str) -> "int | None":
        return self.meta.topic_partitions(name)

    def names(self) -> list:
        return self.meta.topic_names()


def _check(req: m.ConsumerGroupHeartbeat) -> None:
    limits.check_group_name(req.group)
    if len(req.member_id) > MAX_ID_CHARS:
        raise InvalidRequestError(f"member_id of {len(req.member_id)} characters (limit "
                                  f"{MAX_ID_CHARS})")
    if req.member_epoch > 0 and not req.member_id:
        raise InvalidRequestError("a heartbeat with an epoch above 0 must name its member id")
    if req.member_epoch < -2:
        raise InvalidRequestError(f"member epoch {req.member_epoch}: below -2")
    if req.instance_id is not None:
        limits.check_group_name(req.instance_id)
    for text, what in ((req.rack_id, "rack_id"), (req.assignor, "server_assignor")):
        if text is not None and len(text) > 255:
            raise InvalidRequestError(f"{what} is limited to 255 characters")
    if len(req.client_id) > 255:
        raise InvalidRequestError("client_id is limited to 255 characters")
    for name in req.topic_names or ():
        limits.check_topic_name(name)
    owned = sum(len(tp.partitions) for tp in req.owned or ())
    if owned > MAX_OWNED_PARTITIONS:
        raise InvalidRequestError(f"{owned} owned partitions (limit {MAX_OWNED_PARTITIONS})")


async def heartbeat(svc, req: m.ConsumerGroupHeartbeat, session) -> m.ConsumerGroupHeartbeatResponse:
    try:
        _check(req)
        co = svc.groups.co
        view, g = await co.group(req.group, create=True)
        if not isinstance(g, ConsumerGroup):
            if g.members:
                raise GroupNotFoundError(f"group {req.group!r} is a classic group with members: "
                                         "not a consumer-protocol group")
            g = view.groups[req.group] = ConsumerGroup(req.group, co.limits, offsets=g.offsets)
        owned = None if req.owned is None else {
            tp.topic: frozenset(tp.partitions) for tp in req.owned}
        beat = Beat(req.member_id, req.member_epoch, req.instance_id, req.rack_id,
                    req.rebalance_timeout_ms,
                    None if req.topic_names is None else tuple(req.topic_names),
                    req.topic_regex, req.assignor, owned, req.client_id, session.peer)
        try:
            answer = g.beat(beat, Topics(svc.meta), time.monotonic())
        finally:
            co.changed(view, g)
    except LogbrokerError as exc:
        log.debug("group %s: heartbeat of member %r (epoch %d) refused: %s", req.group,
                  req.member_id, req.member_epoch, exc)
        raise
    assignment = None if answer.assignment is None else _parts(answer.assignment)
    return m.ConsumerGroupHeartbeatResponse(member_id=answer.member_id,
                                            member_epoch=answer.member_epoch,
                                            heartbeat_interval_ms=answer.heartbeat_interval_ms,
                                            assignment=assignment)


async def describe(svc, req: m.ConsumerGroupDescribe, session) -> m.ConsumerGroupDescribeResponse:
    if len(req.groups) > MAX_GROUPS:
        raise InvalidRequestError(f"{len(req.groups)} groups (limit {MAX_GROUPS})")
    return m.ConsumerGroupDescribeResponse(groups=tuple([await _describe(svc, name)
                                                         for name in req.groups]))


async def _describe(svc, name: str) -> ConsumerGroupDescription:
    try:
        _, g = await svc.groups.co.group(limits.check_group_name(name))
        if not isinstance(g, ConsumerGroup):
            raise GroupNotFoundError(f"group {name!r} is not a consumer-protocol group"
                                     if g is not None and not g.empty else
                                     f"unknown group {name!r}")
    except LogbrokerError as exc:
        log.debug("ConsumerGroupDescribe of %r: %s", name, exc)
        return ConsumerGroupDescription(name, *_err(exc), "Dead", -1, -1, "", ())
    members = tuple(ConsumerMemberDescription(
        mb.member_id, mb.instance_id, mb.rack_id, mb.member_epoch, mb.client_id, mb.host,
        mb.subscription.names, mb.subscription.regex, _parts(mb.assigned),
        _parts(g.target.get(mb.member_id, {}))) for mb in g.members.values() if not mb.left)
    return ConsumerGroupDescription(name, 0, "", g.state, g.group_epoch,
                                    g.assignment_epoch, g.assignor_name(), members)


def _parts(assignment: dict) -> tuple:
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(assignment.items()))
