"""The group coordinator: the groups of the offsets partitions this broker leads.

A group lives in partition ``partition_for(group)`` of the offsets topic;
the leader of that partition coordinates it. The coordinator learns what it
leads from its ``host`` (metadata/local.py and metadata/cluster_host.py: the single node, or the
replica manager of a cluster), rebuilds a partition's groups from its log
when it becomes leader (COORDINATOR_LOAD_IN_PROGRESS meanwhile), and drops
them when it stops leading (their members get NOT_COORDINATOR and find the
new coordinator). Every change a member must be able to rely on (a commit,
a stable generation) is appended to the partition and acknowledged only
once the partition's high watermark covers it (acks=all), so a new
coordinator reads it back.

Timers (session expiry, rebalance deadlines) run in one background loop
that never dies: a failure is logged and the loop goes on.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

from ..errors import (CoordinatorLoadInProgressError, LogbrokerError, NotCoordinatorError,
                      RequestTimedOutError, UnknownError)
from ..protocol import messages as m
from ..storage.groups import CommittedOffset
from .group import EMPTY, Group, GroupLimits
from .consumer_records import ConsumerGroupRecord
from .loading import load_groups
from .pending_offsets import PendingOffsets
from .records import GroupRecord, OffsetRecord, encode, encode_txn, partition_for

log = logging.getLogger("logbroker.coordinator")
IDLE_S = 0.5  # the timer loop's sleep while nothing is timed (leadership is looked at then)
LOAD_WAIT_S = 1.0  # a request waits this long for its partition to load


@dataclass
class View:
    """The groups of one offsets partition, as loaded in leader epoch ``epoch``."""

    epoch: int
    groups: dict = field(default_factory=dict)
    ready: bool = False
    task: "asyncio.Task | None" = None
    loaded: asyncio.Event = field(default_factory=asyncio.Event)
    pending: PendingOffsets = field(default_factory=PendingOffsets)  # transactions' offsets
    early: list = field(default_factory=list)  # (producer id, commit) markers acked while loading


class Coordinator:
    def __init__(self, host, limits: GroupLimits, commit_timeout_ms: int) -> None:
        self.host, self.limits = host, limits
        self.commit_timeout = commit_timeout_ms / 1000
        self.views: dict[int, View] = {}
        self.parked: dict[tuple[str, str, str], asyncio.Future] = {}
        self._wake = asyncio.Event()
        self._task: "asyncio.Task | None" = None
        self._writes: set[asyncio.Task] = set()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        tasks = [t for t in [self._task, *self._writes, *(v.task for v in self.views.values())]
                 if t is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for p in list(self.views):
            self._unload(p)

    # -- finding a group ------------------------------------------------------------------------
    def partition(self, group: str) -> int:
        return partition_for(group, self.host.partitions)

    async def group(self, name: str, create: bool = False) -> "tuple[View, Group | None]":
        """The view holding ``name`` and its group (None if unknown and not
        ``create``). Raises NOT_COORDINATOR elsewhere; waits up to
        ``LOAD_WAIT_S`` for a partition being loaded, then LOAD_IN_PROGRESS."""
        p = self.partition(name)
        _, epoch = self.host.leader(p)
        view = self.views.get(p)
        if view is None or view.epoch != epoch:
            self._load(p, epoch)
            view = self.views[p]
        if not view.ready:
            try:
                await asyncio.wait_for(asyncio.shield(view.loaded.wait()), LOAD_WAIT_S)
            except TimeoutError:
                pass
            if not view.ready or self.views.get(p) is not view:
                raise CoordinatorLoadInProgressError(f"loading the groups of {self.host.topic}-{p}")
        g = view.groups.get(name)
        if g is None and create:
            g = view.groups[name] = Group(name, self.limits)
        return view, g

    def groups(self) -> list[Group]:
        return [g for v in self.views.values() if v.ready for g in v.groups.values()]

    # -- loading ---------------------------------------------------------------------------------
    def _load(self, p: int, epoch: int) -> None:
        if p in self.views:
            self._unload(p)
        view = self.views[p] = View(epoch)
        view.task = asyncio.get_running_loop().create_task(self._load_view(p, view))

    async def _load_view(self, p: int, view: View) -> None:
        try:
            while not self.host.settled(p):  # a new leader's HW is catching up
                await asyncio.sleep(0.05)
                if self.views.get(p) is not view:
                    return
            lg, _ = self.host.leader(p)
            started = time.monotonic()
            view.groups = await load_groups(lg, self.limits, time.monotonic(), view.pending)
            await self._migrate(p, view)
            view.ready = True
            view.loaded.set()
            for producer_id, commit in view.early:  # acked while the replay ran (or after it)
                self._settle_txn(view, producer_id, commit)
            view.early.clear()
            self._wake.set()  # restored members' sessions are timed from now
            log.log(logging.INFO if view.groups else logging.DEBUG,
                    "loaded %d group(s) of %s-%d in %.3f s", len(view.groups), self.host.topic,
                    p, time.monotonic() - started)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the next request or tick loads again
            log.warning("loading %s-%d failed: %s", self.host.topic, p, exc)
            if self.views.get(p) is view:
                del self.views[p]

    async def _migrate(self, p: int, view: View) -> None:
        """Offsets committed before groups had a coordinator (LMDB on a single
        node, etcd in a cluster) move into the log once, then are forgotten there."""
        legacy = await self.host.legacy(p)
        fresh = {g: offs for g, offs in legacy.items() if g not in view.groups}
        if fresh:
            now_ms = int(time.time() * 1000)
            records = [OffsetRecord(g, t, part, c.offset, c.metadata, c.commit_ms or now_ms)
                       for g, offs in fresh.items() for (t, part), c in offs.items()]
            await self.host.append(p, encode(records))
            for rec in records:
                self._apply(view, rec)
            log.info("moved the offsets of %d group(s) into %s-%d", len(fresh), self.host.topic, p)
        if legacy:
            await self.host.forget_legacy(list(legacy))

    def _unload(self, p: int) -> None:
        view = self.views.pop(p, None)
        if view is None:
            return
        if view.task is not None and not view.task.done():
            view.task.cancel()
        names = set(view.groups)
        for key in [k for k in self.parked if k[0] in names]:
            fut = self.parked.pop(key)
            if not fut.done():
                fut.set_result(NotCoordinatorError(f"this broker stopped coordinating {key[0]!r}"))

    # -- parking and the outbox --------------------------------------------------------------------
    def park(self, group: str, member_id: str, kind: str) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        old = self.parked.get((group, member_id, kind))
        if old is not None and not old.done():
            from ..errors import RebalanceInProgressError

            old.set_result(RebalanceInProgressError("a newer request of this member replaced it"))
        self.parked[(group, member_id, kind)] = fut
        return fut

    async def wait(self, key: tuple, fut: asyncio.Future):
        """The parked answer (a response or an exception to raise)."""
        try:
            answer = await fut
        finally:
            if self.parked.get(key) is fut:
                del self.parked[key]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def settle(self, view: View, g: Group) -> None:
        """Deliver the group's outbox; write its membership if it changed."""
        while g.outbox:
            mid, kind, answer = g.outbox.pop(0)
            fut = self.parked.pop((g.name, mid, kind), None)
            if fut is not None and not fut.done():
                fut.set_result(answer)
        if g.persist:
            g.persist = False
            self._spawn(self._persist(view, g, g.generation))

    def changed(self, view: View, g: Group) -> None:
        """A request changed ``g``: settle it and let the timer loop look again."""
        self.settle(view, g)
        self._wake.set()

    async def _persist(self, view: View, g: Group, generation: int) -> None:
        try:
            await self.write(self.partition(g.name), [g.record()], view)
            ok = True
        except LogbrokerError as exc:
            log.warning("group %s: writing generation %d failed: %s", g.name, generation, exc)
            ok = False
        g.persisted(generation, ok, time.monotonic())
        self.changed(view, g)

    def _spawn(self, coro) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    # -- writing -------------------------------------------------------------------------------------
    async def write(self, p: int, records: list, view: "View | None" = None,
                    txn: "tuple[int, int] | None" = None) -> None:
        """Append ``records`` to partition ``p`` and wait (bounded) until the
        replicas have them; they are applied to ``view`` when they do, even
        after the wait timed out (the caller got REQUEST_TIMED_OUT).
        ``txn`` (producer id, epoch): a TxnOffsetCommit's, written as that
        producer's transactional batch (``view`` required); its offsets wait
        in ``view.pending`` for the producer's marker (``on_marker``)."""
        if txn is None:
            data = encode(records)
        else:
            pid, epoch = txn
            seq = view.pending.next_sequence(pid, epoch, len(records))
            data = encode_txn(records, pid, epoch, seq)
        task = asyncio.get_running_loop().create_task(self.host.append(p, data))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        if txn is not None:
            task.add_done_callback(lambda t: self._txn_written(t, view, records, txn, seq))
        elif view is not None:
            task.add_done_callback(lambda t: self._applied(t, view, records))
        try:
            await asyncio.wait_for(asyncio.shield(task), self.commit_timeout)
        except TimeoutError:
            raise RequestTimedOutError(f"the offsets partition {self.host.topic}-{p} did not "
                                       f"replicate the write within {self.commit_timeout:g} s") from None

    def _txn_written(self, task: asyncio.Task, view: View, records: list, txn: tuple,
                     seq: int) -> None:
        """A TxnOffsetCommit's batch is acknowledged: its offsets pend (or,
        not written, its sequence is free again)."""
        pid, epoch = txn
        if task.cancelled() or task.exception() is not None:
            view.pending.release_sequence(pid, epoch, seq, len(records))
            return
        by_group: dict = {}
        for rec in records:
            by_group.setdefault(rec.group, {})[(rec.topic, rec.partition)] = CommittedOffset(
                rec.offset, rec.metadata, rec.commit_ms)
        for group, offsets in by_group.items():
            view.pending.add(pid, group, offsets)

    def on_marker(self, p: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of ``producer_id`` was acknowledged on offsets
        partition ``p``: its pending offsets there are applied (COMMIT) or
        dropped. A partition still loading takes it once loaded; one not
        loaded here reads it from the log when it loads."""
        view = self.views.get(p)
        if view is None:
            return
        if not view.ready:
            view.early.append((producer_id, commit))
            return
        self._settle_txn(view, producer_id, commit)

    def _settle_txn(self, view: View, producer_id: int, commit: bool) -> None:
        for group, (t, part), value in view.pending.complete(producer_id, commit):
            g = view.groups.get(group)
            if g is None:
                g = view.groups[group] = Group(group, self.limits)
            g.apply(t, part, value)

    def _applied(self, task: asyncio.Task, view: View, records: list) -> None:
        if task.cancelled() or task.exception() is not None:
            return
        for rec in records:
            self._apply(view, rec)

    def _apply(self, view: View, rec) -> None:
        if isinstance(rec, OffsetRecord):
            view.pending.plain_commit(rec.group, (rec.topic, rec.partition))
            g = view.groups.get(rec.group)
            if g is None and rec.offset is not None:
                g = view.groups[rec.group] = Group(rec.group, self.limits)
            if g is not None:
                g.apply(rec.topic, rec.partition, None if rec.offset is None else
                        CommittedOffset(rec.offset, rec.metadata, rec.commit_ms))
        elif isinstance(rec, GroupRecord) and rec.generation is None:
            view.groups.pop(rec.group, None)
        elif isinstance(rec, ConsumerGroupRecord) and rec.group_epoch is None:
            view.groups.pop(rec.group, None)

    # -- timers -------------------------------------------------------------------------------------
    async def _run(self) -> None:
        while True:
            self._wake.clear()
            try:
                delay = self._tick(time.monotonic())
            except Exception:  # noqa: BLE001 - the loop must survive a bug
                log.exception("group coordinator tick failed")
                delay = IDLE_S
            try:
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            except TimeoutError:
                pass

    def _tick(self, now: float) -> float:
        """Follow leadership, expire sessions, complete joins; the next delay."""
        led = self.host.led()
        for p in [p for p, v in self.views.items() if led.get(p) != v.epoch]:
            self._unload(p)
        for p, epoch in led.items():
            if p not in self.views:
                self._load(p, epoch)
        delay = IDLE_S
        for view in list(self.views.values()):
            if not view.ready:
                continue
            for g in list(view.groups.values()):
                if not g.members and g.state == EMPTY:
                    if not g.offsets:
                        del view.groups[g.name]
                    continue
                g.poll(now)
                self.settle(view, g)
                due = g.next_deadline()
                if due is not None:
                    delay = min(delay, max(due - now, 0.0) + 0.001)
        return delay


def answer_error(cls: type, exc: BaseException) -> m.Message:
    """A response of type ``cls`` carrying ``exc``."""
    if isinstance(exc, LogbrokerError):
        return cls(error=exc.code, message=exc.message)
    return cls(error=UnknownError.code, message=f"{type(exc).__name__}: {exc}")
