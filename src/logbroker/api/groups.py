"""The group requests a coordinator answers: membership (join, sync,
heartbeat, leave) and offsets (commit, fetch, describe, list, delete).

Each request is checked here, at the edge, before it reaches a group: names
and ids by the broker's rules, counts and sizes bounded, so a peer pins at
most ``MAX_METADATA_BYTES`` of protocol metadata per member it keeps alive
(and a leader ``MAX_ASSIGNMENT_BYTES`` of assignments per generation).
A request for a group this broker does not coordinate gets NOT_COORDINATOR;
one for a partition still loading gets COORDINATOR_LOAD_IN_PROGRESS.

Member bytes (subscriptions, assignments) are kept as their writer sent
them and answered byte for byte to a reader of the same listener; in a
``consumer`` group shared by Kafka members and ours they are translated for
the reader (kafka/member_bytes.for_reader): the leader's join answer, each
member's assignment as the leader's SyncGroup hands it over, DescribeGroups.
"""

from __future__ import annotations

import dataclasses
import time

from .. import limits
from ..coordinator.group import Group
from ..coordinator.manager import Coordinator
from ..coordinator.consumer_records import ConsumerGroupRecord
from ..coordinator.records import GroupRecord, OffsetRecord
from ..kafka.member_bytes import ASSIGNMENT, SUBSCRIPTION, for_reader, subscribed_topics
from ..errors import (GroupNotFoundError, GroupSubscribedToTopicError, InvalidRequestError,
                      LogbrokerError, NonEmptyGroupError, UnknownMemberIdError,
                      UnstableOffsetCommitError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import (CommittedPart, GroupDescription, GroupResult, MemberAssignment,
                              MemberDescription, MemberResult, PartitionResult)
from .edge import check_partition_key

MAX_ID_CHARS = 1_000  # member ids are client_id + "-" + a uuid
MAX_PROTOCOLS = 32
MAX_METADATA_BYTES = 1 << 20  # all protocols of one JoinGroup together
MAX_PENDING_PER_GROUP = 10_000  # transactional offsets awaiting markers, over all producers
MAX_ASSIGNMENT_BYTES = 8 << 20  # all assignments of one SyncGroup together (kept, and recorded)
CONSUMER = "consumer"  # the protocol type whose member bytes are the ConsumerProtocol's


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
        """The broker coordinating ``req.group`` (metadata/interface.py): key
        type 0 a group, 1 a transactional id (its transaction coordinator)."""
        if req.key_type not in (0, 1):
            raise InvalidRequestError(f"key_type must be 0 (group) or 1 (transaction), got "
                                      f"{req.key_type!r}")
        limits.check_group_name(req.group)
        broker_id, host, port = await self.meta.coordinator_for(req.group, req.key_type)
        return m.FindCoordinatorResponse(broker_id=broker_id, host=host, port=port)

    # -- membership -----------------------------------------------------------------------------
    async def join(self, req: m.JoinGroup, session) -> m.JoinGroupResponse:
        _check_join(req)
        view, g = await self.co.group(req.group, create=True)
        if g.kind != "classic" and not g.members:  # an empty group may change kind (Kafka's rule)
            g = view.groups[req.group] = Group(req.group, self.co.limits, offsets=g.offsets)
        answer = await self._answer(view, g, "join", lambda: g.join(
            req, req.client_id, session.peer, time.monotonic()))
        if req.protocol_type != CONSUMER or all(k == req.kafka_bytes for k in answer.member_kafka):
            return answer
        return dataclasses.replace(answer, members=tuple(
            (mid, iid, for_reader(SUBSCRIPTION, meta, kafka, req.kafka_bytes))
            for (mid, iid, meta), kafka in zip(answer.members, answer.member_kafka)))

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
        if sum(len(a) for _, a in req.assignments) > MAX_ASSIGNMENT_BYTES:
            raise InvalidRequestError(f"assignments over {MAX_ASSIGNMENT_BYTES} bytes together")
        view, g = await self.co.group(req.group)
        if g is None:
            raise UnknownMemberIdError(f"unknown group {req.group!r}: rejoin")
        return await self._answer(view, g, "sync", lambda: (req.member_id, g.sync(
            _for_members(g, req), time.monotonic())))

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
                # any int64, as Kafka stores it: -1 / -2 are what Kafka clients commit
                # to reset a group (their readers then apply their reset policy)
                limits.check_int(offset, "committed offset", -limits.MAX_OFFSET - 1,
                                 limits.MAX_OFFSET)
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
        """The committed offsets; with ``require_stable``, UNSTABLE_OFFSET_COMMIT
        while a partition asked (None: any of the group's) has transactional
        offsets awaiting their marker."""
        limits.check_group_name(req.group)
        check_fetch_offsets(req)
        view, g = await self.co.group(req.group)
        if req.require_stable and view.pending.has_group(req.group):
            check_stable(view.pending, req)
        return offsets_answer(req, g.offsets if g is not None else {})

    # -- transactions (coordinator/pending_offsets.py) --------------------------------------------
    async def txn_commit(self, req: m.TxnOffsetCommit, session) -> m.TxnOffsetCommitResponse:
        """Offsets committed in the producer's transaction: written to the
        group's offsets partition as the producer's transactional batch,
        pending until its marker (``on_marker``). A member's generation and
        id are checked as a commit's; -1 and "" are not (KIP-447's older
        form). Per part: the checks' errors; a refused write (a fenced
        producer epoch, the partition's leadership lost) every written part's."""
        check_txn_commit(req)
        view, g = await self.co.group(req.group, create=True)
        if req.generation >= 0 or req.member_id:
            g.check_commit(req.generation, req.member_id, req.group_instance_id)
        now = int(time.time() * 1000)
        records, out, written = [], [], []
        for topic, partition, offset, meta in req.offsets:
            try:
                self.host.check_partition(topic, partition)
                limits.check_int(offset, "committed offset", -limits.MAX_OFFSET - 1,
                                 limits.MAX_OFFSET)
                if len(meta) > limits.MAX_COMMIT_METADATA:
                    raise InvalidRequestError(f"metadata of {len(meta)} characters (limit "
                                              f"{limits.MAX_COMMIT_METADATA})")
                records.append(OffsetRecord(req.group, topic, partition, offset, meta, now))
                written.append(len(out))
                out.append(PartitionResult(topic, partition, 0, ""))
            except LogbrokerError as exc:
                out.append(PartitionResult(topic, partition, *_err(exc)))
        if records:
            if view.pending.count(req.group) + len(records) > MAX_PENDING_PER_GROUP:
                raise InvalidRequestError(f"group {req.group!r} has {view.pending.count(req.group)}"
                                          f" transactional offsets awaiting markers (limit "
                                          f"{MAX_PENDING_PER_GROUP})")
            try:
                await self.co.write(self.co.partition(req.group), records, view,
                                    txn=(req.producer_id, req.producer_epoch))
            except LogbrokerError as exc:
                for i in written:
                    out[i] = out[i]._replace(error=exc.code, message=exc.message)
        return m.TxnOffsetCommitResponse(parts=tuple(out))

    def on_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker was acknowledged on offsets partition
        ``partition`` (api/markers.py): the producer's pending offsets there
        are applied (COMMIT) or dropped."""
        self.co.on_marker(partition, producer_id, commit)

    async def describe(self, req: m.DescribeGroups, session) -> m.DescribeGroupsResponse:
        """Member bytes in the requester's encoding (Kafka's when ``req.kafka_bytes``)."""
        rows = [await self._describe(name, req.kafka_bytes) for name in req.groups]
        return m.DescribeGroupsResponse(groups=tuple(row for row, _ in rows),
                                        protocol_types=tuple((row.group, ptype)
                                                             for row, ptype in rows))

    async def _describe(self, name: str, kafka_reader: bool) -> "tuple[GroupDescription, str]":
        try:
            _, g = await self.co.group(limits.check_group_name(name))
            if g is None or (not g.members and not g.offsets):
                raise GroupNotFoundError(f"unknown group {name!r}")
        except LogbrokerError as exc:
            return GroupDescription(name, *_err(exc), (), "", "", -1, (), ""), ""
        now = int(time.time() * 1000)
        rows = tuple(self.host.lag_row(t, p, c, now) for (t, p), c in sorted(g.offsets.items()))
        members = tuple(MemberDescription(mb.member_id, mb.instance_id, mb.client_id, mb.host,
                                          *_described_bytes(g, mb, kafka_reader))
                        for mb in g.members.values())
        return (GroupDescription(name, 0, "", rows, g.state, g.protocol, g.generation, members,
                                 g.kind), g.protocol_type)

    async def delete_offsets(self, req: m.DeleteOffsets, session) -> m.DeleteOffsetsResponse:
        """Kafka's OffsetDelete: the group's committed offsets of ``req.parts``
        forgotten (a partition without one: no error). GROUP_ID_NOT_FOUND for
        a group without members or offsets; NON_EMPTY_GROUP while a group of
        another protocol type than ``consumer`` has members (its
        subscriptions cannot be read); per partition UNKNOWN_TOPIC_OR_PARTITION,
        or GROUP_SUBSCRIBED_TO_TOPIC while an active member subscribes to
        its topic (or the subscriptions cannot be read: a member restored by
        a new coordinator has not rejoined yet)."""
        limits.check_group_name(req.group)
        if len(req.parts) > limits.MAX_PARTITIONS:
            raise InvalidRequestError(f"{len(req.parts)} partitions (limit "
                                      f"{limits.MAX_PARTITIONS})")
        view, g = await self.co.group(req.group)
        if g is None or (not g.members and not g.offsets):
            raise GroupNotFoundError(f"unknown group {req.group!r}")
        if g.members and g.protocol_type != CONSUMER:
            raise NonEmptyGroupError(f"group {req.group!r} of protocol type {g.protocol_type!r} "
                                     f"has {len(g.members)} active member(s)")
        read = _still_read(g)
        gone, out = {}, []
        for topic, partition in req.parts:
            try:
                self.host.check_partition(topic, partition)
                if read is None or topic in read:
                    raise GroupSubscribedToTopicError(
                        f"group {req.group!r} has active members subscribed to {topic!r}"
                        if read else f"the subscriptions of group {req.group!r} are not known: "
                        f"its members may read {topic!r}")
                if (topic, partition) in g.offsets:
                    gone[(topic, partition)] = OffsetRecord(req.group, topic, partition, None)
                out.append(PartitionResult(topic, partition, 0, ""))
            except LogbrokerError as exc:
                out.append(PartitionResult(topic, partition, *_err(exc)))
        if gone:
            await self.co.write(self.co.partition(req.group), list(gone.values()), view)
        return m.DeleteOffsetsResponse(parts=tuple(out))

    async def list_groups(self, req: m.ListGroups, session) -> m.ListGroupsResponse:
        found = {g.name: g for g in self.co.groups() if g.members or g.offsets}
        names = tuple(sorted(found))
        return m.ListGroupsResponse(groups=names, kinds=tuple(found[n].kind for n in names),
                                    protocol_types=tuple((n, found[n].protocol_type)
                                                         for n in names))

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


def _described_bytes(g: Group, mb, kafka_reader: bool) -> tuple:
    """(assignment, metadata) of member ``mb`` for a reader of Kafka's
    encoding or ours (module docstring)."""
    assignment, metadata = mb.assignment, mb.metadata(g.protocol)
    if g.protocol_type != CONSUMER:
        return assignment, metadata
    return (for_reader(ASSIGNMENT, assignment, mb.kafka, kafka_reader),
            for_reader(SUBSCRIPTION, metadata, mb.kafka, kafka_reader) if metadata else b"")


def _for_members(g: Group, req: m.SyncGroup) -> m.SyncGroup:
    """A leader's SyncGroup with each assignment in its member's encoding,
    so a member's stored assignment is always in its own."""
    if not req.assignments or g.protocol_type != CONSUMER:
        return req
    kafka = {mid: mb.kafka for mid, mb in g.members.items()}
    if all(kafka.get(mid, req.kafka_bytes) == req.kafka_bytes for mid, _ in req.assignments):
        return req
    return dataclasses.replace(req, assignments=tuple(
        MemberAssignment(mid, for_reader(ASSIGNMENT, data, req.kafka_bytes,
                                         kafka.get(mid, req.kafka_bytes)))
        for mid, data in req.assignments))


def _still_read(g: Group) -> "frozenset | None":
    """The topics ``g``'s active members subscribe to (None: unknown, so
    every topic; a group without members: none)."""
    if not g.members:
        return frozenset()
    if g.kind != "classic":  # a consumer-protocol group knows its members' subscriptions
        return g.subscribed_names()
    return subscribed_topics((mb.metadata(g.protocol), mb.kafka) for mb in g.members.values())


def check_txn_commit(req: m.TxnOffsetCommit) -> None:
    _check_member(req)
    if len(req.transactional_id) > MAX_ID_CHARS:
        raise InvalidRequestError(f"transactional_id of {len(req.transactional_id)} characters "
                                  f"(limit {MAX_ID_CHARS})")
    limits.check_int(req.producer_id, "producer_id", 0, limits.MAX_OFFSET)
    limits.check_int(req.producer_epoch, "producer_epoch", 0, 32767)
    if len(req.offsets) > limits.MAX_PARTITIONS:
        raise InvalidRequestError(f"{len(req.offsets)} offsets (limit {limits.MAX_PARTITIONS})")


def check_stable(pending, req: m.FetchOffsets) -> None:
    """UNSTABLE_OFFSET_COMMIT naming the partitions asked (None: all of the
    group's) with transactional offsets awaiting their marker."""
    group = req.group
    wanted = req.parts if req.parts is not None else pending.by_group.get(group, {})
    unstable = [f"{t}-{p}" for t, p in wanted if pending.unstable(group, (t, p))]
    if unstable:
        shown = ", ".join(unstable[:5]) + (f" and {len(unstable) - 5} more"
                                           if len(unstable) > 5 else "")
        raise UnstableOffsetCommitError(f"group {group!r}: {shown} have offsets of a "
                                        "transaction not decided yet: retry")


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
