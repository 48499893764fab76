"""The partitions this broker hosts, and what it does as their leader.

``Replica`` is one hosted partition; its ``role`` follows the partition's
state in etcd (``ReplicaManager.apply``):

- leader (``state.leader`` is this broker): it stamps its epoch on every
  append (``Log.assign_epoch`` records it at once), tracks each follower's
  log end offset from its ReplicaFetch requests, and moves the HW to the
  lowest of the ISR's ends (its own end counting once it is durable). A
  follower that has not caught up for ``replica_lag_time_max_ms`` leaves the
  ISR; one that reaches the HW joins it. Both are compare-and-set writes of
  the partition's state in etcd; until a shrink is committed the HW still
  waits for the follower (an expansion counts at once: the larger set is
  the safer one), so an acknowledged record is on every replica the
  controller may elect.
- follower: a ``LeaderFetcher`` replicates it (follower.py).
- none: no leader right now, or this broker was fenced.

acks=all producers wait in ``committed()`` until the HW covers their
records; they are failed with NOT_LEADER_OR_FOLLOWER if leadership moves
first, and with NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
``min_insync_replicas`` before the HW covered them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from ..errors import (FencedLeaderEpochError, NotEnoughReplicasAfterAppendError,
                      NotEnoughReplicasError, NotLeaderError, OffsetOutOfRangeError,
                      UnknownLeaderEpochError, InvalidRequestError, LeaderNotAvailableError)
from ..storage.config import FLUSH_FSYNC
from ..storage.log import Log
from .state import NO_LEADER, PartitionState

log = logging.getLogger("logbroker.cluster")
LEADER, FOLLOWER, NONE = "leader", "follower", "none"


@dataclass
class Progress:
    """A follower as its leader sees it (Kafka's replica state)."""

    leo: int = -1  # its log end offset: the offset its last fetch asked for
    caught_up: float = 0.0  # monotonic time it last had everything the leader had
    last_fetch_leader_leo: int = -1
    last_fetch_time: float = 0.0


class Replica:
    def __init__(self, lg: Log) -> None:
        self.log = lg
        self.state: "PartitionState | None" = None
        self.role = NONE
        self.epoch = -1
        self.min_isr = 1
        self.followers: dict[int, Progress] = {}
        self.isr: tuple[int, ...] = ()  # the ISR the HW waits for (committed + expanding)
        self.changing = False  # an ISR change of ours is on its way to etcd
        self.waiters: list[tuple[int, asyncio.Future]] = []

    def fail_waiters(self, exc: Exception) -> None:
        for _, fut in self.waiters:
            if not fut.done():
                fut.set_exception(exc)
        self.waiters = []


def durable_end(lg: Log) -> int:
    """Where the leader's own copy counts toward the HW: fsynced data only,
    unless the topic is lazy."""
    return lg.recovery_point if lg.config.flush == FLUSH_FSYNC else lg.log_end_offset


class ReplicaManager:
    def __init__(self, me: int, lag_max_s: float, notify, propose_isr, followers) -> None:
        """``notify(log)``: the HW moved (wakes consumers); ``propose_isr(replica,
        isr)``: start the compare-and-set of a new ISR; ``followers``: the
        fetchers (add(tp, leader, epoch) / remove(tp))."""
        self.me, self.lag_max = me, lag_max_s
        self._notify, self._propose, self._followers = notify, propose_isr, followers
        self.replicas: dict[tuple[str, int], Replica] = {}
        self.isr_shrinks = self.isr_expands = 0  # ISR changes this leader proposed (metrics)
        self.fenced = lambda: False
        self.registered = lambda: 0  # etcd revision of this broker's current registration

    # -- state changes from etcd ------------------------------------------------------
    def apply(self, st: PartitionState, lg: Log, min_isr: int) -> None:
        r = self.replicas.get(st.key)
        if r is None or r.log is not lg:
            r = self.replicas[st.key] = Replica(lg)
        r.min_isr = min_isr
        prev, r.state = r.state, st
        if st.leader == self.me and st.version <= self.registered():
            # a leadership from before our (re)registration: our log may have lost
            # its unflushed tail since; we lead again only in the new epoch the
            # controller gives a leader that registered again (placement.repair)
            self._become_none(r, st, LeaderNotAvailableError(
                f"{lg.name}: broker {self.me} restarted; waiting for a new leader epoch"))
        elif st.leader == self.me:
            if r.role != LEADER or r.epoch != st.leader_epoch:
                self._become_leader(r, st)
            else:
                r.changing = False
                r.isr = st.isr
                self._track(r, st)
                self.update_hw(r)
        elif st.leader == NO_LEADER:
            self._become_none(r, st, LeaderNotAvailableError(f"{lg.name} has no leader right now"))
        elif r.role != FOLLOWER or r.epoch != st.leader_epoch or prev is None \
                or prev.leader != st.leader:
            self._become_follower(r, st)

    def _track(self, r: Replica, st: PartitionState) -> None:
        """The followers a leader tracks follow the replicas in its epoch
        (a reassignment adds and removes them, cluster/reassignment.py)."""
        want = [b for b in st.replicas if b != self.me]
        if set(want) != set(r.followers):
            now = time.monotonic()
            r.followers = {b: r.followers.get(b) or Progress(caught_up=now) for b in want}

    def suspend(self, key: tuple[str, int], why: str) -> None:
        """Serve nothing of a hosted partition (its data kept) until its
        state is valid again: its metadata in etcd was refused (view.py)."""
        r = self.replicas.get(key)
        if r is not None and r.state is not None:
            self._become_none(r, r.state, LeaderNotAvailableError(why))

    def remove(self, key: tuple[str, int]) -> None:
        r = self.replicas.pop(key, None)
        if r is not None:
            self._followers.remove(key)
            r.fail_waiters(NotLeaderError(f"{r.log.name} is no longer hosted here"))
            self._notify(r.log)

    def resign(self) -> None:
        """This broker is leaving: it leads and follows nothing any more."""
        for r in self.replicas.values():
            if r.state is not None:
                self._become_none(r, r.state, NotLeaderError(
                    f"broker {self.me} is shutting down: {r.log.name} moves to another replica"))

    def _become_leader(self, r: Replica, st: PartitionState) -> None:
        self._followers.remove(st.key)
        r.log.set_follower(False)
        r.log.assign_epoch(st.leader_epoch)
        now = time.monotonic()
        r.role, r.epoch, r.isr, r.changing = LEADER, st.leader_epoch, st.isr, False
        r.followers = {b: Progress(caught_up=now) for b in st.replicas if b != self.me}
        log.info("%s: leader in epoch %d (isr %s, log end %d, hw %d)", r.log.name, st.leader_epoch,
                 list(st.isr), r.log.log_end_offset, r.log.high_watermark)
        self.update_hw(r)

    def _become_follower(self, r: Replica, st: PartitionState) -> None:
        r.fail_waiters(NotLeaderError(f"{r.log.name}: leadership moved to broker {st.leader}"))
        r.role, r.epoch, r.followers, r.isr = FOLLOWER, st.leader_epoch, {}, st.isr
        r.log.set_follower(True)
        log.info("%s: follower of broker %d in epoch %d", r.log.name, st.leader, st.leader_epoch)
        self._followers.add(st.key, r.log, st.leader, st.leader_epoch)
        self._notify(r.log)  # fetches waiting on it (and fetch sessions) learn NOT_LEADER now

    def _become_none(self, r: Replica, st: PartitionState, why: Exception) -> None:
        self._followers.remove(st.key)
        r.fail_waiters(why)
        r.role, r.epoch, r.followers = NONE, st.leader_epoch, {}
        self._notify(r.log)

    # -- the leader's duties -------------------------------------------------------------
    def leader_for_produce(self, key: tuple[str, int], acks: int) -> Replica:
        """The replica to append to, or NOT_LEADER / NOT_ENOUGH_REPLICAS (the
        latter for acks=all only, as in Kafka)."""
        r = self.leader(key)
        if acks == -1 and len(r.state.isr) < r.min_isr:
            raise NotEnoughReplicasError(
                f"{r.log.name}: {len(r.state.isr)} in-sync replica(s) {list(r.state.isr)}, "
                f"min_insync_replicas is {r.min_isr}")
        return r

    def leader(self, key: tuple[str, int]) -> Replica:
        r = self.replicas.get(key)
        if r is None or r.role != LEADER:
            raise NotLeaderError(f"broker {self.me} is not the leader of {key[0]}-{key[1]}")
        if self.fenced():
            raise NotLeaderError(f"broker {self.me} lost its etcd session: not leading "
                                 f"{key[0]}-{key[1]}")
        return r

    def check_leader(self, key: tuple[str, int]) -> None:
        self.leader(key)

    def settled_leader(self, key: tuple[str, int]) -> Replica:
        """The leader once its HW covers what earlier epochs wrote (a new
        leader's HW starts where its follower's was and catches up on the
        followers' first fetches): before that, LEADER_NOT_AVAILABLE, so a
        "latest offset" never goes back across a failover (Kafka answers
        OFFSET_NOT_AVAILABLE there)."""
        r = self.leader(key)
        if r.log.high_watermark < self._epoch_start(r):
            raise LeaderNotAvailableError(f"{r.log.name}: the new leader's high watermark "
                                          f"{r.log.high_watermark} is catching up")
        return r

    def committed(self, r: Replica, end: int) -> "asyncio.Future | None":
        """A future done when the HW covers offsets < ``end`` (None if it does)."""
        if r.log.high_watermark >= end:
            return self._released(r)
        fut = asyncio.get_running_loop().create_future()
        r.waiters.append((end, fut))
        return fut

    def _released(self, r: Replica) -> None:
        if len(r.isr) < r.min_isr:
            raise NotEnoughReplicasAfterAppendError(
                f"{r.log.name}: the ISR {list(r.isr)} shrank below min_insync_replicas "
                f"{r.min_isr} before the replicas had the records")
        return None

    def update_hw(self, r: Replica) -> None:
        if r.role != LEADER:
            return
        lg = r.log
        hw = durable_end(lg)
        for b in r.isr:
            if b != self.me:
                hw = min(hw, r.followers[b].leo if b in r.followers else -1)
        if hw > lg.high_watermark:
            lg.set_high_watermark(hw)
            self._notify(lg)
        hw = lg.high_watermark
        if r.waiters:
            left = []
            for end, fut in r.waiters:
                if fut.done():
                    continue
                if end <= hw:
                    try:
                        self._released(r)
                        fut.set_result(None)
                    except NotEnoughReplicasAfterAppendError as exc:
                        fut.set_exception(exc)
                else:
                    left.append((end, fut))
            r.waiters = left

    def on_durable(self, lg: Log) -> None:
        """The leader's own fsync finished: its end may now count."""
        r = self.replicas.get((lg.topic, lg.partition))
        if r is not None and r.log is lg:
            self.update_hw(r)

    def on_replica_fetch(self, key: tuple[str, int], replica: int, offset: int,
                         epoch: int) -> Replica:
        """Record a follower's fetch (its offset acknowledges all below);
        raises what the ReplicaFetch part answers instead."""
        r = self.leader(key)
        if epoch < r.epoch:
            raise FencedLeaderEpochError(f"{r.log.name}: epoch {epoch} < the leader's {r.epoch}")
        if epoch > r.epoch:
            raise UnknownLeaderEpochError(f"{r.log.name}: epoch {epoch} > the leader's {r.epoch}")
        p = r.followers.get(replica)
        if p is None:
            raise InvalidRequestError(f"broker {replica} is not a replica of {r.log.name}")
        leo = r.log.log_end_offset
        if offset > leo or offset < r.log.log_start_offset:
            raise OffsetOutOfRangeError(f"{r.log.name}: offset {offset} is outside "
                                        f"[{r.log.log_start_offset}, {leo}]")
        now = time.monotonic()
        if offset >= leo:
            p.caught_up = now
        elif offset >= p.last_fetch_leader_leo:
            p.caught_up = max(p.caught_up, p.last_fetch_time)
        p.leo, p.last_fetch_leader_leo, p.last_fetch_time = offset, leo, now
        self.update_hw(r)
        if replica not in r.isr and not r.changing and offset >= r.log.high_watermark \
                and offset >= self._epoch_start(r):
            r.isr = (*r.isr, replica)  # counts for the HW at once; etcd follows
            self.isr_expands += 1
            self._change_isr(r, r.isr)
        return r

    def _epoch_start(self, r: Replica) -> int:
        for e, start in reversed(r.log.epochs):
            if e == r.epoch:
                return start
        return r.log.log_end_offset

    def check_isr(self) -> None:
        """Drop followers that lag past replica_lag_time_max_ms (periodic)."""
        now = time.monotonic()
        for r in list(self.replicas.values()):
            if r.role != LEADER or r.changing or self.fenced():
                continue
            slow = [b for b in r.isr if b != self.me and
                    now - r.followers.get(b, Progress()).caught_up > self.lag_max]
            if slow:
                log.warning("%s: replica(s) %s lag more than %.1f s: leaving the ISR", r.log.name,
                            slow, self.lag_max)
                self.isr_shrinks += 1
                self._change_isr(r, tuple(b for b in r.isr if b not in slow))

    def _change_isr(self, r: Replica, isr: tuple[int, ...]) -> None:
        r.changing = True
        self._propose(r, isr)

    def isr_change_failed(self, r: Replica) -> None:
        """The compare-and-set lost (the state moved on): the watch brings the
        new state; until then the HW keeps waiting for the larger set."""
        r.changing = False
        if r.state is not None and r.role == LEADER:
            r.isr = tuple(dict.fromkeys((*r.state.isr, *r.isr)))
