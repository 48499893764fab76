"""A consumer-protocol group (Kafka 4's KIP-848), sans-I/O.

Members heartbeat (``heartbeat``) with their subscription and the
partitions they own; the coordinator computes every member's target with a
server-side assignor (assignors_server.py) and leads each member to it one
step at a time, so a partition never has two owners:

- The **group epoch** grows whenever what the assignment depends on changes
  (a member joins, leaves, is fenced or changes its subscription or
  assignor; a subscribed topic appears or changes its partition count).
  The **target assignment** is recomputed then, at the same epoch (the
  assignment epoch).
- A member's **epoch** reaches the assignment epoch once it holds nothing it
  must give up. While it still owns partitions its target moved away
  (state ``unrevoked``), it is told its assignment without them and keeps
  its epoch; it releases them on its side and says so in a later heartbeat
  (its owned partitions no longer list them). Only then are they given to
  their new owner: a member whose target names partitions another member
  still owns (``unreleased``) gets them on a heartbeat after their release.
- A member that misses its session (``session_timeout_ms``) or does not
  revoke within its rebalance timeout is fenced: removed, its partitions
  free, FENCED_MEMBER_EPOCH / UNKNOWN_MEMBER_ID to it afterwards. Epoch -1
  leaves; a static member (an instance id) leaving with -2 keeps its
  assignment for its session, and a join with the same instance id takes
  its place (a new member id, the same partitions), as Kafka does.

Methods take ``now`` (monotonic seconds), never block nor do I/O, and
raise the registry's error for a refused heartbeat. ``persist`` is set when
the group's record (``record()``, the offsets log) changed; the coordinator
writes it. Offsets live in ``offsets`` as a classic group's; an offset
commit names the member epoch as its generation.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from ..errors import (FencedMemberEpochError, GroupMaxSizeReachedError,
                      InconsistentGroupProtocolError, InvalidRequestError,
                      StaleMemberEpochError, UnknownMemberIdError, UnreleasedInstanceIdError,
                      UnsupportedAssignorError)
from ..storage.groups import CommittedOffset
from .assignors_server import ASSIGNORS, UNIFORM, assign
from .consumer_member import Beat, BeatAnswer, ConsumerMember, frozen, plain, union, within
from .consumer_records import ConsumerGroupRecord, ConsumerMemberRecord
from .group import GroupLimits
from .subscriptions import Subscription

EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"
LEAVE, STATIC_LEAVE = -1, -2
TOPICS_CHECK_S = 1.0  # a group looks for new topics and partitions this often
CONSUMER = "consumer"


@dataclass
class ConsumerGroup:
    name: str
    limits: GroupLimits = field(default_factory=GroupLimits)
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict = field(default_factory=dict)  # member_id -> ConsumerMember
    target: dict = field(default_factory=dict)  # member_id -> {topic: frozenset}
    topics: dict = field(default_factory=dict)  # subscribed topic -> partitions, as assigned
    offsets: dict = field(default_factory=dict)  # (topic, partition) -> CommittedOffset
    outbox: list = field(default_factory=list)  # never used: no request is parked
    persist: bool = False
    topics_checked: float = float("-inf")  # when ``_refresh`` last read the topics
    protocol_type: str = CONSUMER
    kind: str = CONSUMER

    # -- what the classic group's callers read -----------------------------------------------
    @property
    def generation(self) -> int:
        return self.group_epoch

    @property
    def protocol(self) -> str:
        return self.assignor_name()

    @property
    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.assignment_epoch < self.group_epoch:
            return ASSIGNING
        if any(mb.member_epoch != self.assignment_epoch or mb.revoking
               for mb in self.members.values()):
            return RECONCILING
        return STABLE

    @property
    def empty(self) -> bool:
        return not self.members and not self.offsets

    def subscribed_names(self) -> "frozenset | None":
        """The topic names the members subscribe to (None with a regex: any)."""
        if any(mb.subscription.regex for mb in self.members.values()):
            return None
        return frozenset(t for mb in self.members.values() for t in mb.subscription.names)

    def assignor_name(self) -> str:
        """The members' most named assignor (the broker's default if none)."""
        votes: dict = {}
        for mb in self.members.values():
            if mb.assignor:
                votes[mb.assignor] = votes.get(mb.assignor, 0) + 1
        return max(sorted(votes), key=votes.__getitem__) if votes else UNIFORM

    # -- the classic protocol's requests are refused -----------------------------------------
    def _classic(self, *_args, **_kw):
        raise InconsistentGroupProtocolError(
            f"group {self.name!r} uses the consumer group protocol (KIP-848): a classic "
            "member cannot join it")

    join = sync = heartbeat = leave = _classic

    def persisted(self, generation: int, ok: bool, now: float) -> None:
        """Nothing waits for a write (answers never park)."""

    # -- the heartbeat ----------------------------------------------------------------------
    def beat(self, beat: Beat, topics, now: float) -> BeatAnswer:
        """Apply one heartbeat; ``topics`` answers ``count(name)`` (a topic's
        partitions, None if unknown) and ``names()`` (every topic) for
        subscriptions. Raises UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
        UNSUPPORTED_ASSIGNOR, UNRELEASED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED
        or INVALID_REQUEST (a rule of the first heartbeat broken)."""
        if beat.assignor is not None and beat.assignor not in ASSIGNORS:
            raise UnsupportedAssignorError(f"server assignor {beat.assignor!r}: this broker has "
                                           f"{', '.join(ASSIGNORS)}")
        if beat.member_epoch in (LEAVE, STATIC_LEAVE):
            return self._leave(beat, now)
        if beat.member_epoch == 0:
            member = self._join(beat, now)
        else:
            member = self._current(beat)
        self._update(member, beat, now)
        self._refresh(topics, now)
        self._reconcile(member, beat.owned, now)
        member.deadline = now + self.limits.consumer_session_timeout_ms / 1000
        answer = None
        if beat.member_epoch == 0 or beat.owned is not None or member.sent != member.assigned:
            answer = member.sent = dict(member.assigned)
        return BeatAnswer(member.member_id, member.member_epoch,
                          self.limits.consumer_heartbeat_interval_ms, answer)

    def _join(self, beat: Beat, now: float) -> ConsumerMember:
        if beat.names is None and beat.regex is None:
            raise InvalidRequestError("a member's first heartbeat (epoch 0) must name its "
                                      "subscribed topics or a regex")
        if beat.rebalance_timeout_ms <= 0:
            raise InvalidRequestError("a member's first heartbeat (epoch 0) must give its "
                                      "rebalance timeout")
        Subscription().changed(beat.names, beat.regex)  # refused before it joins
        if beat.instance_id is not None:
            old = self._by_instance(beat.instance_id)
            if old is not None and old.member_id != beat.member_id:
                if not old.left:
                    raise UnreleasedInstanceIdError(
                        f"instance {beat.instance_id!r} is held by live member {old.member_id}")
                return self._take_over(old, beat)
        mid = beat.member_id or str(uuid.uuid4())
        member = self.members.get(mid)
        if member is not None:  # rejoined: it lost its partitions on its side
            self._drop(member)
            return member
        limit = self.limits.max_size
        if len(self.members) >= limit:
            raise GroupMaxSizeReachedError(f"group {self.name!r} has {len(self.members)} "
                                           f"members (limit {limit})")
        # a new member: its subscription (``_update``) bumps the group epoch
        return self.members.setdefault(mid, ConsumerMember(mid, beat.instance_id))

    def _take_over(self, old: ConsumerMember, beat: Beat) -> ConsumerMember:
        """A static member back after leaving with -2: a new id, the old
        one's partitions and epoch; no rebalance."""
        old_id, new_id = old.member_id, beat.member_id or str(uuid.uuid4())
        del self.members[old_id]
        self.target[new_id] = self.target.pop(old_id, {})
        old.member_id, old.left = new_id, False
        self.members[old.member_id] = old
        self.persist = True
        return old

    def _current(self, beat: Beat) -> ConsumerMember:
        member = self.members.get(beat.member_id)
        if member is None or member.left:
            raise UnknownMemberIdError(f"unknown member {beat.member_id!r} of group "
                                       f"{self.name!r}: rejoin with epoch 0")
        if beat.member_epoch != member.member_epoch:
            lost_answer = (beat.member_epoch == member.previous_epoch and beat.owned is not None
                           and within(beat.owned, member.owns()))
            if not lost_answer:
                raise FencedMemberEpochError(
                    f"member {member.member_id} sent epoch {beat.member_epoch}, the group has "
                    f"it at {member.member_epoch}: rejoin with epoch 0")
        return member

    def _update(self, member: ConsumerMember, beat: Beat, now: float) -> None:
        member.client_id, member.host = beat.client_id or member.client_id, beat.host or member.host
        if beat.rack_id is not None:
            member.rack_id = beat.rack_id
        if beat.rebalance_timeout_ms > 0:
            member.rebalance_timeout_ms = beat.rebalance_timeout_ms
        changed = False
        if beat.names is not None or beat.regex is not None:
            sub = member.subscription.changed(beat.names, beat.regex)
            changed = sub != member.subscription
            member.subscription = sub
        if beat.assignor is not None and beat.assignor != member.assignor:
            member.assignor, changed = beat.assignor, True
        if changed:
            self._bump()

    def _leave(self, beat: Beat, now: float) -> BeatAnswer:
        member = self.members.get(beat.member_id)
        if member is None:
            raise UnknownMemberIdError(f"unknown member {beat.member_id!r} of group {self.name!r}")
        if beat.member_epoch == STATIC_LEAVE and member.instance_id is not None:
            member.left = True  # its partitions wait for its instance id until its session ends
            member.deadline = now + self.limits.consumer_session_timeout_ms / 1000
            self.persist = True
        else:
            self.remove(member.member_id)
        return BeatAnswer(beat.member_id, beat.member_epoch, self.limits.consumer_heartbeat_interval_ms,
                          None)

    # -- the assignment -----------------------------------------------------------------------
    def _bump(self) -> None:
        self.group_epoch += 1
        self.persist = True

    def _refresh(self, topics, now: float) -> None:
        """Recompute the target when the group epoch moved past it, or the
        subscribed topics changed (created, deleted, partitions added). The
        topics are looked at when the epoch moved, else at most every
        ``TOPICS_CHECK_S``: a heartbeat costs no metadata reads otherwise."""
        if self.assignment_epoch == self.group_epoch and now < self.topics_checked + TOPICS_CHECK_S:
            return
        self.topics_checked = now
        matched: dict = {}  # each distinct subscription resolved once
        subscribed = {mid: matched.get(mb.subscription) or matched.setdefault(
            mb.subscription, mb.subscription.topics(topics)) for mid, mb in self.members.items()}
        wanted: dict = {}
        for names in subscribed.values():
            for name in names:
                if name not in wanted:
                    wanted[name] = topics.count(name) or 0
        wanted = {name: count for name, count in wanted.items() if count}
        if wanted != self.topics:
            self.topics = wanted
            if self.assignment_epoch == self.group_epoch:
                self._bump()
        if self.assignment_epoch < self.group_epoch:
            subs = {mid: [t for t in names if t in wanted] for mid, names in subscribed.items()}
            self.target = assign(self.assignor_name(), subs, wanted, self.target)
            self.assignment_epoch = self.group_epoch

    def _reconcile(self, member: ConsumerMember, owned: "dict | None", now: float) -> None:
        """One step of ``member`` towards its target (see the module doc)."""
        if member.revoking and owned is not None:
            still = {t: ps & owned.get(t, frozenset()) for t, ps in member.revoking.items()}
            member.revoking = {t: ps for t, ps in still.items() if ps}
        if member.revoking:
            return  # it must release them first: same epoch, same assignment
        member.revoke_deadline = 0.0
        target = self.target.get(member.member_id, {})
        keep = {t: ps & target.get(t, frozenset()) for t, ps in member.assigned.items()}
        keep = {t: ps for t, ps in keep.items() if ps}
        revoke = {t: ps - target.get(t, frozenset()) for t, ps in member.assigned.items()}
        revoke = {t: ps for t, ps in revoke.items() if ps}
        if revoke:
            member.assigned, member.revoking = keep, revoke
            member.revoke_deadline = now + member.rebalance_timeout_ms / 1000
            self.persist = True
            return
        missing = {t: ps - keep.get(t, frozenset()) for t, ps in target.items()}
        missing = {t: ps for t, ps in missing.items() if ps}
        if missing:
            missing = self._released(member.member_id, missing)
        grown = union(keep, missing)
        if grown != member.assigned or member.member_epoch != self.assignment_epoch:
            member.previous_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
            member.assigned = grown
            self.persist = True

    def _released(self, member_id: str, wanted: dict) -> dict:
        """The partitions of ``wanted`` no other member owns (set operations
        per member and topic: no set of every owned partition is built)."""
        free = dict(wanted)
        for mid, mb in self.members.items():
            if mid == member_id:
                continue
            for held in (mb.assigned, mb.revoking):
                for t in free.keys() & held.keys():
                    free[t] = free[t] - held[t]
        return {t: ps for t, ps in free.items() if ps}

    def remove(self, member_id: str) -> None:
        """Fence or let go of a member: its partitions are free at once."""
        member = self.members.pop(member_id, None)
        if member is not None:
            self.target.pop(member_id, None)
            self._bump()

    def _drop(self, member: ConsumerMember) -> None:
        member.assigned, member.revoking, member.sent = {}, {}, None

    # -- time ----------------------------------------------------------------------------------
    def poll(self, now: float) -> None:
        """Fence members whose session ended or whose revocation is overdue."""
        for mb in list(self.members.values()):
            if now >= mb.deadline or (mb.revoke_deadline and now >= mb.revoke_deadline):
                self.remove(mb.member_id)

    def next_deadline(self) -> "float | None":
        times = [mb.deadline for mb in self.members.values()]
        times += [mb.revoke_deadline for mb in self.members.values() if mb.revoke_deadline]
        return min(times, default=None)

    # -- offsets -------------------------------------------------------------------------------
    def check_commit(self, generation: int, member_id: str, instance_id: "str | None") -> None:
        """A commit by a member names its epoch (Kafka: STALE_MEMBER_EPOCH
        for an older one, FENCED_MEMBER_EPOCH... for a newer one); without
        membership (-1, no id) only while the group has no members."""
        if generation < 0 and not member_id:
            if self.members:
                raise UnknownMemberIdError(f"group {self.name!r} has members: a commit without "
                                           "membership (generation -1) is refused")
            return
        member = self.members.get(member_id)
        if member is None or member.left:
            raise UnknownMemberIdError(f"unknown member {member_id!r} of group {self.name!r}")
        if generation > member.member_epoch:
            raise FencedMemberEpochError(f"epoch {generation} is ahead of member {member_id}'s "
                                         f"{member.member_epoch}")
        if generation < member.member_epoch:
            raise StaleMemberEpochError(f"epoch {generation} of member {member_id} is stale "
                                        f"(now {member.member_epoch})")

    def apply(self, topic: str, partition: int, value: "CommittedOffset | None") -> None:
        if value is None:
            self.offsets.pop((topic, partition), None)
        else:
            self.offsets[(topic, partition)] = value

    # -- persistence ---------------------------------------------------------------------------
    def record(self) -> ConsumerGroupRecord:
        return ConsumerGroupRecord(self.name, self.group_epoch, self.assignment_epoch, tuple(
            ConsumerMemberRecord(mb.member_id, mb.instance_id, mb.rack_id, mb.client_id, mb.host,
                                 mb.member_epoch, mb.rebalance_timeout_ms,
                                 mb.subscription.names, mb.subscription.regex, mb.assignor,
                                 plain(mb.assigned), plain(mb.revoking),
                                 plain(self.target.get(mb.member_id, {})))
            for mb in self.members.values()), dict(self.topics))

    def restore(self, rec: ConsumerGroupRecord, now: float) -> None:
        """Take a loaded record: members get a full session to heartbeat."""
        self.group_epoch, self.assignment_epoch = rec.group_epoch, rec.assignment_epoch
        self.members, self.target, self.topics = {}, {}, dict(rec.topics or {})
        for r in rec.members:
            mb = ConsumerMember(r.member_id, r.instance_id, r.rack_id, r.client_id, r.host,
                                r.member_epoch, -1, r.rebalance_timeout_ms,
                                Subscription(r.names, r.regex), r.assignor,
                                frozen(r.assigned), frozen(r.revoking))
            mb.deadline = now + self.limits.consumer_session_timeout_ms / 1000
            if mb.revoking:
                mb.revoke_deadline = now + mb.rebalance_timeout_ms / 1000
            self.members[mb.member_id] = mb
            self.target[mb.member_id] = frozen(r.target)

    def _by_instance(self, instance_id: str) -> "ConsumerMember | None":
        return next((mb for mb in self.members.values() if mb.instance_id == instance_id), None)


def apply_consumer_record(groups: dict, rec: ConsumerGroupRecord, limits: GroupLimits,
                          now: float) -> None:
    """Replay ``rec`` into ``groups`` (a partition's groups by name): a
    tombstone deletes the group, else it becomes (or stays) a consumer-protocol
    group restored from the record, keeping the offsets already replayed."""
    old = groups.get(rec.group)
    if rec.group_epoch is None:
        if isinstance(old, ConsumerGroup):
            del groups[rec.group]
        return
    g = old if isinstance(old, ConsumerGroup) else ConsumerGroup(
        rec.group, limits, offsets=old.offsets if old is not None else {})
    g.restore(rec, now)
    groups[rec.group] = g
