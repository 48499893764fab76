"""A consumer's membership of its group: join, sync, rejoin, leave (Kafka's
classic group protocol, KIP-429 cooperative rebalancing, KIP-345 static
membership). Runs on the client's loop, one task (``run``) plus the
heartbeat task (heartbeat.py, which reports its answers to
``heartbeat_failed``); never raises out of its loop: errors are
logged, retried with backoff, and the fatal ones (FENCED_INSTANCE_ID,
INCONSISTENT_GROUP_PROTOCOL, GROUP_MAX_SIZE_REACHED, the authorization
failures, ...) kept in ``fatal`` for ``poll`` to raise.

A round: (1) prepare: with the eager protocol (range, roundrobin) revoke
every owned partition (committing first); with the cooperative one only
those of topics no longer subscribed; a member whose generation was reset
(fenced, expired, left after max_poll_interval_ms) loses its partitions;
(2) JoinGroup with one (assignor, Subscription(topics, owned, generation))
per configured assignor; (3) the leader runs the chosen assignor over the
members' subscriptions and the topics' partition counts; (4) SyncGroup
gives every member its Assignment; (5) revoke what was taken away (and,
cooperative, rejoin at once so it can be given to another member), then
assign what is new. The partition changes are applied by ``poll``
(rebalance.py); the loop waits for them.

The protocol is cooperative when every configured assignor is (Kafka's
rule: mixing eager and cooperative assignors makes the member eager).
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...errors import (FencedInstanceIdError, GroupAuthorizationFailedError,
                       GroupMaxSizeReachedError, IllegalGenerationError,
                       InconsistentGroupProtocolError, InvalidGroupError,
                       InvalidSessionTimeoutError, LogbrokerError, RebalanceInProgressError,
                       TopicAuthorizationFailedError, UnknownMemberIdError)
from ...protocol import messages as m
from ..net.backoff import Backoff
from ..net.link import cancel_and_wait
from ..net.routing import Router
from .assignors import ASSIGNORS, COOPERATIVE, Assignment, Member, Subscription, choose
from .coordinator import Coordinators, refinds
from .heartbeat import heartbeat_loop
from .offsets import Identity
from .rebalance import ASSIGN, LOST, REVOKE, Change, ChangeQueue
from .topic_filter import TopicFilter

log = logging.getLogger("logbroker.client.group")
UNJOINED, JOINING, COMPLETING, STABLE = "unjoined", "joining", "completing", "stable"
FATAL = (FencedInstanceIdError, InconsistentGroupProtocolError, GroupMaxSizeReachedError,
         InvalidSessionTimeoutError, InvalidGroupError, GroupAuthorizationFailedError,
         TopicAuthorizationFailedError)


class GroupMembership:
    def __init__(self, settings, router: Router, coordinators: Coordinators,
                 changes: ChangeQueue, notify) -> None:
        """``settings``: the consumer's ``ConsumerSettings`` (its group,
        membership and metadata fields are read)."""
        self.settings, self.router, self.coordinators = settings, router, coordinators
        self.group: str = settings.group
        self.changes, self.notify = changes, notify
        self.assignors = choose(settings.partition_assignment_strategy)
        self.cooperative = all(a.protocol == COOPERATIVE for a in self.assignors)
        self.filter = TopicFilter()
        self.topics: tuple = ()  # the subscribed topics that exist (pattern) or were named
        self.counts: dict = {}  # topic -> partitions at the last join (the leader: every member's)
        self.member_id, self.generation, self.protocol = "", -1, ""
        self.state = UNJOINED
        self.owned: frozenset = frozenset()
        self.rejoin = True
        self.fatal: "LogbrokerError | None" = None
        self.last_poll = time.monotonic()
        self.poll_expired = False  # left after max_poll_interval_ms: rejoin at the next poll
        self.rebalances = 0  # completed joins (tests, logs)
        self._next_metadata = 0.0
        self._wake = asyncio.Event()
        self._task: "asyncio.Task | None" = None
        self.heartbeat_task: "asyncio.Task | None" = None

    # -- the application's side (any thread for polled(); loop for the rest) ----------------
    def identity(self) -> Identity:
        """Who commits: the current generation, or NO_MEMBER before a join."""
        if not self.member_id or self.generation < 0:
            return Identity()
        return Identity(self.generation, self.member_id, self.settings.group_instance_id)

    def polled(self) -> None:
        """``poll`` was called (any thread): the max_poll_interval_ms clock restarts."""
        self.last_poll = time.monotonic()

    def wake(self) -> None:
        self._wake.set()

    def take_fatal(self) -> "LogbrokerError | None":
        """The fatal error kept for ``poll`` to raise (once), or None."""
        fatal, self.fatal = self.fatal, None
        return fatal

    def unsubscribe(self) -> None:
        """Follow nothing: the consumer stops being a managed member."""
        self.filter = TopicFilter()

    def resume(self) -> None:
        """The application polls again after the member left for not polling
        (loop): rejoin now."""
        if self.poll_expired:
            self.poll_expired = False
            self.request_rejoin("poll() was called again")

    def subscribe(self, topic_filter: TopicFilter) -> None:
        """Follow ``topic_filter`` (loop): starts the member, or rejoins when
        the subscription changed."""
        if topic_filter != self.filter:
            self.filter, self._next_metadata, self.rejoin = topic_filter, 0.0, True
        self.start()

    def start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self.run())
        if self.heartbeat_task is None or self.heartbeat_task.done():
            self.heartbeat_task = asyncio.ensure_future(heartbeat_loop(self))
        self.wake()

    @property
    def active(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- the loop --------------------------------------------------------------------------------
    async def run(self) -> None:
        """Join and stay joined until cancelled (never raises)."""
        backoff = Backoff(self.router.options.reconnect_backoff,
                          self.router.options.reconnect_backoff_max)
        while True:
            self._wake.clear()
            try:
                await self._refresh_topics()
                if self.rejoin and not self.poll_expired and self.filter:
                    await self._rebalance()
                backoff.reset()
            except asyncio.CancelledError:
                raise
            except LogbrokerError as exc:
                self._failed(exc)
                await asyncio.sleep(backoff.next())
                continue
            except Exception:  # noqa: BLE001 - a bug must not end the membership
                log.exception("group %r: membership loop", self.group)
                await asyncio.sleep(backoff.next())
                continue
            if self.rejoin and not self.poll_expired and self.filter:
                continue
            due = self._next_metadata - time.monotonic()
            try:
                async with asyncio.timeout(max(due, 0.0)):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _failed(self, exc: LogbrokerError) -> None:
        """An error of a round: log it, reset what it invalidates, keep fatal ones for poll."""
        self.state = UNJOINED
        self.rejoin = True
        if isinstance(exc, UnknownMemberIdError):
            self.reset(member_id=True)
        elif isinstance(exc, IllegalGenerationError):
            self.reset(member_id=False)
        if isinstance(exc, FATAL):
            self.fatal = exc
            self.notify()
        level = logging.INFO if refinds(exc) or isinstance(exc, RebalanceInProgressError) \
            else logging.WARNING
        log.log(level, "group %r: %s (rejoining)", self.group, exc)

    def reset(self, member_id: bool) -> None:
        """Forget the generation (and the member id): owned partitions are
        lost at the next join."""
        self.generation = -1
        if member_id:
            self.member_id = ""
        self.rejoin = True
        self.state = UNJOINED
        self.wake()

    def poll_overdue(self) -> bool:
        """A joined member's application has not called ``poll`` within
        ``max_poll_interval_ms`` (and it has not left for that already)."""
        limit = self.settings.max_poll_interval_ms / 1000
        return bool(self.member_id) and not self.poll_expired \
            and time.monotonic() - self.last_poll > limit

    def heartbeat_failed(self, exc: LogbrokerError, gen: int, mid: str) -> None:
        """A heartbeat of generation ``gen`` as ``mid`` failed with ``exc``
        (heartbeat.py's docstring lists what each answer does)."""
        if gen != self.generation or mid != self.member_id:
            return  # an answer about a generation the member has left behind
        if isinstance(exc, RebalanceInProgressError):
            self.request_rejoin("the coordinator started a rebalance")
        elif isinstance(exc, UnknownMemberIdError):
            log.warning("group %r: the coordinator does not know member %s any more (%s): "
                        "its partitions are lost, rejoining", self.group, mid, exc.message)
            self.reset(member_id=True)
        elif isinstance(exc, IllegalGenerationError):
            log.warning("group %r: generation %d is stale (%s): its partitions are lost, "
                        "rejoining", self.group, gen, exc.message)
            self.reset(member_id=False)
        elif isinstance(exc, FencedInstanceIdError):
            self.fatal = exc
            self.notify()
            self.reset(member_id=True)
        elif refinds(exc):
            log.info("group %r: heartbeat: %s (finding the coordinator again)", self.group, exc)
        else:
            log.warning("group %r: heartbeat: %s", self.group, exc)

    def request_rejoin(self, reason: str) -> None:
        if not self.rejoin:
            log.info("group %r: rejoining (%s)", self.group, reason)
        self.rejoin = True
        self.wake()

    async def _refresh_topics(self) -> None:
        """Every ``metadata_max_age_ms``: the subscribed topics that exist
        and their partition counts; a change from the last join's rejoins."""
        if not self.filter or time.monotonic() < self._next_metadata:
            return
        self._next_metadata = time.monotonic() + self.settings.metadata_max_age_ms / 1000
        if self.filter.pattern is not None:
            resp = await self.router.metadata(None)
            self.topics = self.filter.match(name for name, err, _, _ in resp.topics if not err)
        else:
            self.topics = self.filter.names
        watched = set(self.topics) | set(self.counts)
        counts = await self._counts(watched)
        if {t: n for t, n in counts.items() if t in watched} != self.counts:
            self.request_rejoin("the subscribed topics or their partitions changed")

    async def _counts(self, topics) -> dict:
        """Partition counts of the ``topics`` that exist (one Metadata)."""
        if not topics:
            return {}
        resp = await self.router.metadata(sorted(topics))
        return {name: n for name, err, _, n in resp.topics if not err and n > 0}

    # -- one rebalance ---------------------------------------------------------------------------
    async def _rebalance(self) -> None:
        await self._prepare()
        resp = await self._join()
        assignment = await self._sync(resp)
        await self._install(assignment)

    async def _prepare(self) -> None:
        if not self.owned:
            return
        if self.generation < 0 or not self.member_id:
            await self._drop(LOST, self.owned)
        elif not self.cooperative:
            await self._drop(REVOKE, self.owned)
        else:
            gone = frozenset(tp for tp in self.owned if tp[0] not in self.topics)
            if gone:
                await self._drop(REVOKE, gone)

    async def _drop(self, kind: str, partitions: frozenset) -> None:
        self.owned = self.owned - partitions
        await self.changes.apply(Change(kind, frozenset(partitions)))

    async def _join(self) -> m.JoinGroupResponse:
        s = self.settings
        sub = Subscription(self.topics, tuple(self.owned), self.generation).encode()
        self.state, self.rejoin = JOINING, False
        msg = m.JoinGroup(group=self.group, session_timeout_ms=s.session_timeout_ms,
                          rebalance_timeout_ms=s.max_poll_interval_ms, member_id=self.member_id,
                          group_instance_id=s.group_instance_id, protocol_type="consumer",
                          protocols=tuple((a.name, sub) for a in self.assignors),
                          client_id=self.router.options.client_id[:255])
        resp = await self.coordinators.call(self.group, msg, purpose="join", retry=False,
                                            timeout=self._rebalance_timeout())
        self.member_id, self.generation, self.protocol = resp.member_id, resp.generation, \
            resp.protocol
        self.state = COMPLETING
        self.fatal = None
        return resp

    def _rebalance_timeout(self) -> float:
        """A JoinGroup / SyncGroup may be held for the whole rebalance."""
        return self.settings.max_poll_interval_ms / 1000 + self.router.options.request_timeout

    async def _sync(self, join: m.JoinGroupResponse) -> Assignment:
        assignments = ()
        if join.leader == join.member_id and join.members:
            assignments = await self._assign(join.protocol, join.members)
        msg = m.SyncGroup(group=self.group, generation=join.generation, member_id=join.member_id,
                          group_instance_id=self.settings.group_instance_id,
                          assignments=assignments)
        resp = await self.coordinators.call(self.group, msg, purpose="join", retry=False,
                                            timeout=self._rebalance_timeout())
        if not assignments:  # a follower watches its own topics (the leader: every member's)
            self.counts = await self._counts(self.topics)
        return Assignment.decode(resp.assignment) if resp.assignment else Assignment()

    async def _assign(self, protocol: str, members) -> tuple:
        """The leader's work: every member's Assignment, encoded."""
        assignor = ASSIGNORS.get(protocol)
        if assignor is None:
            raise InconsistentGroupProtocolError(f"the group chose assignor {protocol!r}, "
                                                 "which this consumer does not know")
        parsed = [Member(mid, _subscription(meta, mid), iid) for mid, iid, meta in members]
        wanted = {t for member in parsed for t in member.subscription.topics}
        counts = await self._counts(wanted)
        self.counts = dict(counts)  # the leader watches every member's topics
        result = assignor.assign(parsed, counts)
        log.info("group %r generation %d: %s assigned %d partition(s) to %d member(s)",
                 self.group, self.generation, protocol, sum(len(a.partitions) for a in
                                                            result.values()), len(parsed))
        return tuple((mid, a.encode()) for mid, a in sorted(result.items()))

    async def _install(self, assignment: Assignment) -> None:
        """Apply the generation's assignment (revoke what went, then assign what came)."""
        new = frozenset(assignment.partitions)
        self.state = STABLE
        self.rebalances += 1
        taken, added = self.owned - new, new - self.owned
        log.info("group %r generation %d (%s): member %s owns %d partition(s), +%d -%d",
                 self.group, self.generation, self.protocol, self.member_id, len(new),
                 len(added), len(taken))
        if taken:
            await self._drop(REVOKE, taken)
            if self.cooperative:
                self.request_rejoin("partitions were revoked: they go to another member")
        if added:
            self.owned = self.owned | added
            await self.changes.apply(Change(ASSIGN, added))

    # -- leaving ---------------------------------------------------------------------------------
    async def leave(self, reason: str) -> None:
        """Leave the group now (LeaveGroup; a static member sends none, as
        Kafka: its partitions wait for it until its session times out) and
        forget the generation. Bounded by ``request_timeout``; errors are logged."""
        member_id = self.member_id
        self.reset(member_id=True)
        if not member_id or self.settings.group_instance_id is not None:
            return
        log.info("group %r: member %s leaves (%s)", self.group, member_id, reason)
        try:
            await self.coordinators.call(self.group, m.LeaveGroup(
                group=self.group, members=((member_id, None),)), retry=False)
        except LogbrokerError as exc:
            log.info("group %r: LeaveGroup failed: %s", self.group, exc)

    async def leave_for_poll_timeout(self) -> None:
        """``poll`` was not called within max_poll_interval_ms: leave (the
        partitions are lost) and rejoin at the next poll."""
        log.warning("group %r: poll() not called within max_poll_interval_ms=%d: leaving the "
                    "group; the consumer rejoins at the next poll", self.group,
                    self.settings.max_poll_interval_ms)
        self.poll_expired = True
        lost, self.owned = self.owned, frozenset()
        if lost:
            self.changes.post(Change(LOST, lost))  # applied before poll returns any record
        await self.leave("max_poll_interval_ms expired")

    async def stop(self, leave: bool) -> None:
        """End the membership's tasks (and leave the group first if ``leave``)."""
        await cancel_and_wait(self.heartbeat_task)
        await cancel_and_wait(self._task)
        if leave:
            await self.leave("the consumer closes or unsubscribes")
        self.owned = frozenset()


def _subscription(meta: bytes, member_id: str) -> Subscription:
    """A member's Subscription; one that does not decode subscribes to nothing."""
    try:
        return Subscription.decode(meta)
    except LogbrokerError as exc:
        log.warning("member %s sent a subscription that does not decode (%s): it gets nothing",
                    member_id, exc)
        return Subscription(())
