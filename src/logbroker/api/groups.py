"""The group requests a coordinator answers: membership (join, sync,
heartbeat, leave) and offsets (commit, fetch, describe, list, delete).

Each request is checked here, at the edge, before it reaches a group: names
and ids by the broker's rules, counts and sizes bounded, so a peer pins at
most ``MAX_METADATA_BYTES`` of protocol metadata per member it keeps alive.
A request for a group this broker does not coordinate gets NOT_COORDINATOR;
one for a partition still loading gets COORDINATOR_LOAD_IN_PROGRESS.
"""

from __future__ import annotations

import time

from .. import limits
from ..coordinator.group import Group
from ..coordinator.manager import Coordinator
from ..coordinator.consumer_records import ConsumerGroupRecord
from ..coordinator.records import GroupRecord, OffsetRecord
from ..errors import (GroupNotFoundError, InvalidRequestError, LogbrokerError,
                      NonEmptyGroupError, UnknownMemberIdError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import (CommittedPart, GroupDescription, GroupResult, MemberDescription,
                              MemberResult, PartitionResult)
from .edge import check_partition_key

MAX_ID_CHARS = 1_000  # member ids are client_id + "-" + a uuid
MAX_PROTOCOLS = 32
MAX_METADATA_BYTES = 1 << 20  # all protocols of one JoinGroup together


def _check_member(req) -> None:
    limits.check_group_name(req.group)
    if len(req.member_id) > MAX_ID_CHARS:
        raise InvalidRequestError(f"member_id of {len(req.member_id)} characters (limit "
                                  f"{MAX_ID_CHARS})")
    if req.group_instance_id is not None:
        limits.check_group_name(req.group_instance_id)


def _check_join(req: m.JoinGroup) -> None:
    _check_member(req)
    if len(req.client_id) > 255 or len(req.protocol_type) > 255:
        raise InvalidRequestError("client_id and protocol_type are limited to 255 characters")
    if len(req.protocols) > MAX_PROTOCOLS:
        raise InvalidRequestError(f"{len(req.protocols)} protocols (limit {MAX_PROTOCOLS})")
    if any(not 1 <= len(name) <= 255 for name, _ in req.protocols):
        raise InvalidRequestError("a protocol name must have 1-255 characters")
    if sum(len(meta) for _, meta in req.protocols) > MAX_METADATA_BYTES:
        raise InvalidRequestError(f"protocol metadata over {MAX_METADATA_BYTES} bytes")
    if len({name for name, _ in req.protocols}) != len(req.protocols):
        raise InvalidRequestError("a protocol is named twice")


class GroupRequests:
    """Handlers of the group requests, over a ``Coordinator``; ``host``
    checks topic-partitions and computes lag rows; ``meta`` (the metadata
    interface) names a group's coordinator. Each handler takes the request
    and the requester's session (a JoinGroup records the member's host)."""

    def __init__(self, coordinator: Coordinator, meta) -> None:
        self.co, self.meta = coordinator, meta
        self.host = coordinator.host

    async def find_coordinator(self, req: m.FindCoordinator, session) -> m.FindCoordinatorResponse:
        """The broker coordinating ``req.group`` (metadata/interface.py)."""
        limits.check_group_name(req.group)
        broker_id, host, port = await self.meta.coordinator_for(req.group)
        return m.FindCoordinatorResponse(broker_id=broker_id, host=host, port=port)

    # -- membership -----------------------------------------------------------------------------
    async def join(self, req: m.JoinGroup, session) -> m.JoinGroupResponse:
        _check_join(req)
        view, g = await self.co.group(req.group, create=True)
        if g.kind != "classic" and not g.members:  # an empty group may change kind (Kafka's rule)
            g = view.groups[req.group] = Group(req.group, self.co.limits, offsets=g.offsets)
        return await self._answer(view, g, "join", lambda: g.join(
            req, req.client_id, session.peer, time.monotonic()))

    async def _answer(self, view, g: Group, kind: str, call):
        """Run ``call`` -> (member id, answer or None); a None answer is
        parked until the group's outbox holds it (possibly already)."""
        try:
            mid, answer = call()
        except BaseException:
            self.co.changed(view, g)
            raise
        if answer is not None:
            self.co.changed(view, g)
            return answer
        key = (g.name, mid, kind)
        fut = self.co.park(*key)
        self.co.changed(view, g)
        return await self.co.wait(key, fut)

    async def sync(self, req: m.SyncGroup, session) -> m.SyncGroupResponse:
        _check_member(req)
        if len(req.assignments) > self.co.limits.max_size:
            raise InvalidRequestError(f"{len(req.assignments)} assignments (limit "
                                      f"{self.co.limits.max_size})")
        view, g = await self.co.group(req.group)
        if g is None:
            raise UnknownMemberIdError(f"unknown group {req.group!r}: rejoin")
        return await self._answer(view, g, "sync", lambda: (req.member_id, g.sync(
            req, time.monotonic())))

    async def heartbeat(self, req: m.Heartbeat, session) -> m.HeartbeatResponse:
        _check_member(req)
        view, g = await self._existing(req.group)
        g.heartbeat(req, time.monotonic())
        return m.HeartbeatResponse()

    async def leave(self, req: m.LeaveGroup, session) -> m.LeaveGroupResponse:
        limits.check_group_name(req.group)
        if len(req.members) > self.co.limits.max_size:
            raise InvalidRequestError(f"{len(req.members)} members (limit "
                                      f"{self.co.limits.max_size})")
        view, g = await self._existing(req.group)
        out = []
        for member_id, instance_id in req.members:
            try:
                g.leave(member_id, instance_id, time.monotonic())
                out.append(MemberResult(member_id, 0, ""))
            except LogbrokerError as exc:
                out.append(MemberResult(member_id, *_err(exc)))
        self.co.changed(view, g)
        return m.LeaveGroupResponse(members=tuple(out))

    async def _existing(self, name: str):
        view, g = await self.co.group(name)
        if g is None:
            raise UnknownMemberIdError(f"unknown group {name!r}: rejoin")
        return view, g

    # -- offsets ---------------------------------------------------------------------------------------
    async def commit(self, req: m.CommitOffsets, session) -> m.CommitOffsetsResponse:
        _check_member(req)
        view, g = await self.co.group(req.group, create=True)
        g.check_commit(req.generation, req.member_id, req.group_instance_id)
        now = int(time.time() * 1000)
        records, out = [], []
        for topic, partition, offset, meta in req.offsets:
            try:
                self.host.check_partition(topic, partition)
                limits.check_offset(offset)
                if len(meta) > limits.MAX_COMMIT_METADATA:
                    raise InvalidRequestError(f"metadata of {len(meta)} characters (limit "
                                              f"{limits.MAX_COMMIT_METADATA})")
                records.append(OffsetRecord(req.group, topic, partition, offset, meta, now))
                out.append(PartitionResult(topic, partition, 0, ""))
            except LogbrokerError as exc:
                out.append(PartitionResult(topic, partition, *_err(exc)))
        if records:
            await self.co.write(self.co.partition(req.group), records, view)
        return m.CommitOffsetsResponse(parts=tuple(out))

    async def fetch(self, req: m.FetchOffsets, session) -> m.FetchOffsetsResponse:
        limits.check_group_name(req.group)
        check_fetch_offsets(req)
        _, g = await self.co.group(req.group)
        return offsets_answer(req, g.offsets if g is not None else {})

    async def describe(self, req: m.DescribeGroups, session) -> m.DescribeGroupsResponse:
        return m.DescribeGroupsResponse(groups=tuple([await self._describe(name)
                                                     for name in req.groups]))

    async def _describe(self, name: str) -> GroupDescription:
        try:
            _, g = await self.co.group(limits.check_group_name(name))
            if g is None or (not g.members and not g.offsets):
                raise GroupNotFoundError(f"unknown group {name!r}")
        except LogbrokerError as exc:
            return GroupDescription(name, *_err(exc), (), "", "", -1, (), "")
        now = int(time.time() * 1000)
        rows = tuple(self.host.lag_row(t, p, c, now) for (t, p), c in sorted(g.offsets.items()))
        members = tuple(MemberDescription(mb.member_id, mb.instance_id, mb.client_id, mb.host,
                                          mb.assignment, mb.metadata(g.protocol))
                        for mb in g.members.values())
        return GroupDescription(name, 0, "", rows, g.state, g.protocol, g.generation, members,
                                g.kind)

    async def list_groups(self, req: m.ListGroups, session) -> m.ListGroupsResponse:
        kinds = {g.name: g.kind for g in self.co.groups() if g.members or g.offsets}
        names = tuple(sorted(kinds))
        return m.ListGroupsResponse(groups=names, kinds=tuple(kinds[n] for n in names))

    async def delete(self, req: m.DeleteGroups, session) -> m.DeleteGroupsResponse:
        out = []
        for name in req.groups:
            try:
                view, g = await self.co.group(limits.check_group_name(name))
                if g is None or (not g.members and not g.offsets):
                    raise GroupNotFoundError(f"unknown group {name!r}")
                if g.members:
                    raise NonEmptyGroupError(f"group {name!r} has {len(g.members)} active "
                                             "member(s)")
                records = [OffsetRecord(name, t, p, None) for t, p in sorted(g.offsets)]
                records.append(GroupRecord(name, None) if g.kind == "classic"
                               else ConsumerGroupRecord(name, None))
                await self.co.write(self.co.partition(name), records, view)
                out.append(GroupResult(name, 0, ""))
            except LogbrokerError as exc:
                out.append(GroupResult(name, *_err(exc)))
        return m.DeleteGroupsResponse(groups=tuple(out))


def check_fetch_offsets(req: m.FetchOffsets) -> None:
    for topic, partition in req.parts or ():
        check_partition_key(topic, partition)


def offsets_answer(req: m.FetchOffsets, committed: dict) -> m.FetchOffsetsResponse:
    """The answer to ``req`` from a group's committed offsets by (topic, partition)."""
    wanted = req.parts if req.parts is not None else sorted(committed)
    out = []
    for topic, partition in wanted:
        c = committed.get((topic, partition))
        out.append(CommittedPart(topic, partition, -1, "", 0) if c is None
                   else CommittedPart(topic, partition, c.offset, c.metadata, c.commit_ms))
    return m.FetchOffsetsResponse(parts=tuple(out))
