"""One consumer group's membership: Kafka's classic group state machine, sans-I/O.

States: Empty (no members) -> PreparingRebalance (waiting for every member
to rejoin) -> CompletingRebalance (joined; waiting for the leader's
assignments) -> Stable. A join, a leave, an expiry or a changed
subscription starts a rebalance; every completed join bumps the generation.

Methods take ``now`` (monotonic seconds) and never block or do I/O. A
request that must wait (a JoinGroup until the join completes, a SyncGroup
until the leader's assignments arrive) is *parked*: the method returns None
and the answer appears later in ``outbox`` as ``(member_id, kind, response)``
(kind "join" or "sync") for the I/O shell to deliver. ``persist`` is set
when the group's membership changed in a way its offsets log must record
(``record()`` gives the GroupRecord); a Stable generation is confirmed to its
members only after ``persisted(generation)``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..errors import (FencedInstanceIdError, GroupMaxSizeReachedError, IllegalGenerationError,
                      InconsistentGroupProtocolError,
                      InvalidSessionTimeoutError, RebalanceInProgressError, UnknownMemberIdError)
from ..protocol import messages as m
from ..storage.groups import CommittedOffset
from .records import GroupRecord, StoredMember

EMPTY, PREPARING, COMPLETING, STABLE = ("Empty", "PreparingRebalance", "CompletingRebalance",
                                        "Stable")


@dataclass(frozen=True)
class GroupLimits:
    """Broker settings bounding what members may ask (Kafka's group.* settings)."""

    min_session_timeout_ms: int = 1_000
    max_session_timeout_ms: int = 1_800_000
    max_size: int = 1_000
    initial_rebalance_delay_ms: int = 1_000
    consumer_session_timeout_ms: int = 45_000  # consumer-protocol groups (consumer_group.py)
    consumer_heartbeat_interval_ms: int = 5_000


@dataclass
class Member:
    member_id: str
    instance_id: "str | None"
    client_id: str
    host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple = ()  # (name, metadata)
    assignment: bytes = b""
    joining: bool = False  # a JoinGroup is parked
    syncing: bool = False  # a SyncGroup is parked
    deadline: float = 0.0  # session expiry
    kafka: bool = False  # its metadata and assignment are Kafka's ConsumerProtocol bytes, else ours

    def touch(self, now: float) -> None:
        self.deadline = now + self.session_timeout_ms / 1000

    def metadata(self, protocol: str) -> bytes:
        return next((meta for name, meta in self.protocols if name == protocol), b"")


@dataclass
class Group:
    name: str
    limits: GroupLimits = field(default_factory=GroupLimits)
    state: str = EMPTY
    generation: int = 0
    protocol_type: str = ""
    protocol: str = ""
    leader: str = ""
    members: dict = field(default_factory=dict)  # member_id -> Member
    offsets: dict = field(default_factory=dict)  # (topic, partition) -> CommittedOffset
    outbox: list = field(default_factory=list)
    persist: bool = False
    join_deadline: float = 0.0  # PreparingRebalance: complete by then at the latest
    join_not_before: float = 0.0  # ... and not before (initial delay of an empty group)
    kind: str = "classic"  # consumer_group.ConsumerGroup's is "consumer"

    # -- joining --------------------------------------------------------------------------------
    def join(self, req: m.JoinGroup, client_id: str, host: str, now: float) -> "tuple[str, m.JoinGroupResponse | None]":
        """(member id, the answer now, or None: parked until the join completes).
        Raises the request's error (the member gets it at once)."""
        self._check_join(req)
        mid = req.member_id
        if mid and mid not in self.members:
            if req.group_instance_id is not None and self._by_instance(req.group_instance_id):
                raise FencedInstanceIdError(f"instance {req.group_instance_id!r} has another "
                                            "member id now")
            raise UnknownMemberIdError(f"unknown member {mid!r} of group {self.name!r}: rejoin")
        if mid:
            member = self.members[mid]
            self._check_instance(member, req.group_instance_id)
            return mid, self._rejoin(member, req, now)
        old = self._by_instance(req.group_instance_id) if req.group_instance_id else None
        if old is not None:
            return self._static_rejoin(old, req, client_id, host, now)
        if len(self.members) >= self.limits.max_size:
            raise GroupMaxSizeReachedError(f"group {self.name!r} has {len(self.members)} members "
                                           f"(limit {self.limits.max_size})")
        member = Member(f"{client_id or 'member'}-{uuid.uuid4()}", req.group_instance_id,
                        client_id, host, req.session_timeout_ms, req.rebalance_timeout_ms,
                        tuple(req.protocols), kafka=req.kafka_bytes)
        self.members[member.member_id] = member
        self.protocol_type = req.protocol_type
        return member.member_id, self._park_join(member, now, "a new member joined")

    def _check_join(self, req: m.JoinGroup) -> None:
        lim = self.limits
        if not lim.min_session_timeout_ms <= req.session_timeout_ms <= lim.max_session_timeout_ms:
            raise InvalidSessionTimeoutError(
                f"session_timeout_ms {req.session_timeout_ms} outside the broker's "
                f"{lim.min_session_timeout_ms}..{lim.max_session_timeout_ms}")
        if not 1 <= req.rebalance_timeout_ms <= lim.max_session_timeout_ms:
            # a member's rebalance timeout holds every join of its group: bounded
            raise InvalidSessionTimeoutError(
                f"rebalance_timeout_ms (max_poll_interval_ms) {req.rebalance_timeout_ms} outside "
                f"1..{lim.max_session_timeout_ms} (the broker's group_max_session_timeout_ms)")
        if not req.protocols or not req.protocol_type:
            raise InconsistentGroupProtocolError("a member must name a protocol type and at "
                                                 "least one protocol")
        if self.members and req.protocol_type != self.protocol_type:
            raise InconsistentGroupProtocolError(
                f"protocol type {req.protocol_type!r} differs from the group's "
                f"{self.protocol_type!r}")
        others = [mb for mb in self.members.values() if mb.member_id != req.member_id]
        if others and not self._common({n for n, _ in req.protocols}, others):
            raise InconsistentGroupProtocolError(
                f"none of {[n for n, _ in req.protocols]} is supported by every member of "
                f"group {self.name!r}")

    @staticmethod
    def _common(names: set, members) -> set:
        for mb in members:
            names &= {n for n, _ in mb.protocols}
        return names

    def _rejoin(self, member: Member, req: m.JoinGroup, now: float) -> "m.JoinGroupResponse | None":
        changed = tuple(req.protocols) != member.protocols
        member.protocols, member.kafka = tuple(req.protocols), req.kafka_bytes
        member.session_timeout_ms, member.rebalance_timeout_ms = (req.session_timeout_ms,
                                                                  req.rebalance_timeout_ms)
        if self.state in (STABLE, COMPLETING) and not changed \
                and (self.state == COMPLETING or member.member_id != self.leader):
            member.touch(now)
            return self._join_answer(member)  # nothing changed: the current generation
        return self._park_join(member, now, f"member {member.member_id} rejoined")

    def _static_rejoin(self, old: Member, req: m.JoinGroup, client_id: str, host: str,
                       now: float) -> "tuple[str, m.JoinGroupResponse | None]":
        """A static member restarted (KIP-345): a new member id takes the
        old one's place and assignment; no rebalance while the group is Stable
        (but when it comes back through the other listener: its stored
        assignment is in the other kind of bytes)."""
        new_id = f"{client_id or 'member'}-{uuid.uuid4()}"
        for kind, parked in (("join", old.joining), ("sync", old.syncing)):
            if parked:
                self.outbox.append((old.member_id, kind, FencedInstanceIdError(
                    f"instance {req.group_instance_id!r} rejoined with a new member id")))
        old.syncing = False
        del self.members[old.member_id]
        same_kind = old.kafka == req.kafka_bytes  # its stored assignment is in its kind of bytes
        old.member_id, old.client_id, old.host = new_id, client_id, host
        old.protocols, old.kafka = tuple(req.protocols), req.kafka_bytes
        old.session_timeout_ms, old.rebalance_timeout_ms = (req.session_timeout_ms,
                                                            req.rebalance_timeout_ms)
        self.members[new_id] = old
        was_leader = self.leader not in self.members
        if was_leader:
            self.leader = new_id
        if self.state == STABLE and same_kind:
            old.touch(now)
            self.persist = True
            return new_id, m.JoinGroupResponse(generation=self.generation, protocol=self.protocol,
                                               leader=self.leader, member_id=new_id)
        return new_id, self._park_join(old, now, f"static member {req.group_instance_id} rejoined")

    def _park_join(self, member: Member, now: float, why: str) -> None:
        member.joining = True
        if self.state != PREPARING:
            self._prepare(now)
        self.poll(now)
        return None

    def _prepare(self, now: float) -> None:
        """Start a rebalance: parked syncs are told to rejoin."""
        for mb in self.members.values():
            if mb.syncing:
                mb.syncing = False
                self.outbox.append((mb.member_id, "sync", RebalanceInProgressError(
                    "the group is rebalancing: rejoin")))
        was_empty = self.state == EMPTY
        self.state = PREPARING
        timeout = max((mb.rebalance_timeout_ms for mb in self.members.values()), default=0)
        self.join_deadline = now + timeout / 1000
        delay = self.limits.initial_rebalance_delay_ms / 1000 if was_empty else 0.0
        self.join_not_before = min(now + delay, self.join_deadline)

    def _complete_join(self, now: float) -> None:
        for mid in [mid for mid, mb in self.members.items() if not mb.joining]:
            del self.members[mid]  # missed the rebalance
        self.generation += 1
        if not self.members:
            self.state, self.protocol, self.leader = EMPTY, "", ""
            self.persist = True
            return
        self.protocol = self._choose_protocol()
        if self.leader not in self.members:
            self.leader = next(iter(self.members))
        self.state = COMPLETING
        for mb in self.members.values():
            mb.joining, mb.assignment = False, b""
            mb.touch(now)
            self.outbox.append((mb.member_id, "join", self._join_answer(mb)))

    def _choose_protocol(self) -> str:
        """Every member votes for its first choice among the protocols all
        support; the most votes win (ties: the first member's order)."""
        common = self._common({n for n, _ in next(iter(self.members.values())).protocols},
                              self.members.values())
        votes: dict[str, int] = {}
        for mb in self.members.values():
            first = next(n for n, _ in mb.protocols if n in common)
            votes[first] = votes.get(first, 0) + 1
        return max(votes, key=lambda n: (votes[n], -list(votes).index(n)))

    def _join_answer(self, member: Member) -> m.JoinGroupResponse:
        members, kafka = (), ()
        if member.member_id == self.leader:
            members = tuple((mb.member_id, mb.instance_id, mb.metadata(self.protocol))
                            for mb in self.members.values())
            kafka = tuple(mb.kafka for mb in self.members.values())
        return m.JoinGroupResponse(generation=self.generation, protocol=self.protocol,
                                   leader=self.leader, member_id=member.member_id, members=members,
                                   member_kafka=kafka)

    # -- sync, heartbeat, leave ----------------------------------------------------------------------
    def sync(self, req: m.SyncGroup, now: float) -> "m.SyncGroupResponse | None":
        """The member's assignment now (Stable), or None: parked until the
        leader's assignments are persisted."""
        member = self._current(req.member_id, req.group_instance_id, req.generation)
        if self.state == PREPARING:
            raise RebalanceInProgressError("the group is rebalancing: rejoin")
        member.touch(now)
        if self.state == STABLE:
            return m.SyncGroupResponse(assignment=member.assignment)
        member.syncing = True
        if member.member_id == self.leader:
            given = dict(req.assignments)
            for mb in self.members.values():
                mb.assignment = bytes(given.get(mb.member_id, b""))
            self.persist = True
        return None

    def persisted(self, generation: int, ok: bool, now: float) -> None:
        """The GroupRecord of ``generation`` was written (or failed to be):
        complete the parked syncs, or start over with a rebalance."""
        if self.state != COMPLETING or generation != self.generation:
            return
        if not ok:
            self._prepare(now)
            return
        self.state = STABLE
        for mb in self.members.values():
            if mb.syncing:
                mb.syncing = False
                self.outbox.append((mb.member_id, "sync", m.SyncGroupResponse(
                    assignment=mb.assignment)))

    def heartbeat(self, req: m.Heartbeat, now: float) -> None:
        """Raises REBALANCE_IN_PROGRESS (rejoin), ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID..."""
        member = self._current(req.member_id, req.group_instance_id, req.generation)
        member.touch(now)
        if self.state == PREPARING:
            raise RebalanceInProgressError("the group is rebalancing: rejoin")

    def leave(self, member_id: str, instance_id: "str | None", now: float) -> None:
        member = self.members.get(member_id) if member_id else self._by_instance(instance_id)
        if member is None:
            raise UnknownMemberIdError(f"unknown member {member_id or instance_id!r}")
        self._check_instance(member, instance_id)
        self._remove(member, now)

    def _remove(self, member: Member, now: float) -> None:
        del self.members[member.member_id]
        if member.joining:
            self.outbox.append((member.member_id, "join", UnknownMemberIdError(
                "the member left the group")))
        if member.syncing:
            self.outbox.append((member.member_id, "sync", UnknownMemberIdError(
                "the member left the group")))
        if self.state != PREPARING:
            self._prepare(now)
        self.poll(now)

    # -- offsets ------------------------------------------------------------------------------------
    def check_commit(self, generation: int, member_id: str, instance_id: "str | None") -> None:
        """Raises unless a commit with these credentials may be applied:
        generation -1 without member id while the group has no members, or a
        current member in the current generation (not while completing)."""
        if generation < 0 and not member_id:
            if self.members:
                raise UnknownMemberIdError(f"group {self.name!r} has members: a commit without "
                                           "membership (generation -1) is refused")
            return
        self._current(member_id, instance_id, generation)
        if self.state == COMPLETING:
            raise RebalanceInProgressError("the group is completing a rebalance: commit after "
                                           "it (the member's generation may be stale)")

    def apply(self, topic: str, partition: int, value: "CommittedOffset | None") -> None:
        if value is None:
            self.offsets.pop((topic, partition), None)
        else:
            self.offsets[(topic, partition)] = value

    # -- time ---------------------------------------------------------------------------------------
    def poll(self, now: float) -> None:
        """Expire members whose session ended; complete a join that is due."""
        for mb in [mb for mb in self.members.values() if not mb.joining and now >= mb.deadline]:
            self._remove(mb, now)
            return  # _remove polled again
        if self.state == PREPARING and now >= self.join_not_before and (
                now >= self.join_deadline or all(mb.joining for mb in self.members.values())):
            self._complete_join(now)

    def next_deadline(self) -> "float | None":
        """When ``poll`` may next have something to do (None: nothing timed)."""
        times = [mb.deadline for mb in self.members.values() if not mb.joining]
        if self.state == PREPARING:
            joined = all(mb.joining for mb in self.members.values())
            times.append(self.join_not_before if joined else self.join_deadline)
        return min(times, default=None)

    # -- persistence ----------------------------------------------------------------------------------
    def record(self) -> GroupRecord:
        return GroupRecord(self.name, self.generation, self.protocol_type, self.protocol,
                           self.leader, tuple(StoredMember(
                               mb.member_id, mb.instance_id, mb.client_id, mb.host,
                               mb.session_timeout_ms, mb.rebalance_timeout_ms, mb.assignment,
                               mb.kafka)
                               for mb in self.members.values()))

    def restore(self, rec: GroupRecord, now: float) -> None:
        """Take a loaded GroupRecord: its members get a full session to heartbeat."""
        self.generation, self.protocol_type = rec.generation, rec.protocol_type
        self.protocol, self.leader = rec.protocol, rec.leader
        self.members = {}
        for sm in rec.members:
            mb = Member(sm.member_id, sm.instance_id, sm.client_id, sm.host,
                        sm.session_timeout_ms, sm.rebalance_timeout_ms, assignment=sm.assignment,
                        kafka=sm.kafka)
            mb.touch(now)
            self.members[mb.member_id] = mb
        self.state = STABLE if self.members else EMPTY

    @property
    def empty(self) -> bool:
        return not self.members and not self.offsets

    # -- helpers --------------------------------------------------------------------------------------
    def _by_instance(self, instance_id: "str | None") -> "Member | None":
        if instance_id is None:
            return None
        return next((mb for mb in self.members.values() if mb.instance_id == instance_id), None)

    def _check_instance(self, member: Member, instance_id: "str | None") -> None:
        if instance_id is not None and member.instance_id != instance_id:
            raise FencedInstanceIdError(f"member {member.member_id} is not instance {instance_id!r}")
        if member.instance_id is not None and instance_id is None:
            raise FencedInstanceIdError(f"member {member.member_id} is static: name its instance id")

    def _current(self, member_id: str, instance_id, generation: int) -> Member:
        member = self.members.get(member_id)
        if member is None:
            if instance_id is not None and self._by_instance(instance_id) is not None:
                raise FencedInstanceIdError(f"instance {instance_id!r} rejoined with another "
                                            "member id: this one is fenced")
            raise UnknownMemberIdError(f"unknown member {member_id!r} of group {self.name!r}: "
                                       "rejoin (nothing was applied)")
        self._check_instance(member, instance_id)
        if generation != self.generation:
            raise IllegalGenerationError(
                f"generation {generation} of member {member_id} is stale (group {self.name!r} "
                f"is at generation {self.generation}): rejoin; nothing was applied")
        return member

