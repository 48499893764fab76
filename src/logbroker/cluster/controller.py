"""The controller: one broker at a time repairs partitions after failures.

Whoever creates the ``controller`` key under its own lease is the
controller until that lease ends (no election of our own: etcd's lease and
transaction do it). The controller reconciles on every change of the
broker set or the controller key, and every ``RECONCILE_S`` seconds (so a
missed event or a lost compare-and-set is repaired): for each partition,
``placement.after_failure`` (a dead leader replaced from the ISR with a new
epoch, dead followers out of the ISR, a returning ISR member elected where
there was no leader, and a new epoch for a leader that restarted since its
election: its registration is newer than the partition's state). Every write is a compare-and-set on the partition's
revision; a loser simply waits for the next round. A partition being
reassigned (reassignment.py) that needs no repair is finished once all its
targets are in sync (``reassignment.advance``); the broker that moves is
woken by every change of such a partition (node.py), so a move finishes
as soon as its last target joins the ISR.

It also repairs values the view refused (view.py, checks.py), each once
per revision, by a compare-and-set on the bad value's revision: a
partition state or a topic is rewritten from the valid value before it
(etcd's history at the revision before the bad write; where that is
compacted, the last valid value this broker saw), a partition's with its
leader epoch bumped past both (no broker acted on the bad one: every
broker refused it, so the new epoch is unused). A value with no valid
predecessor (a key no broker wrote, or a history lost) is left out and
logged; an operator deletes it. A bad controller key is deleted (by any
broker: nobody could campaign while it exists).
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ClusterUnavailableError
from .placement import repair
from .reassignment import advance
from .state import pack, partition_from, partition_value, topic_from, topic_value

log = logging.getLogger("logbroker.cluster")
RECONCILE_S = 1.0


class Controller:
    def __init__(self, node) -> None:
        self.node = node
        self.wake = asyncio.Event()
        self._tried: set = set()  # (key, revision) of bad values a repair was tried for

    @property
    def active(self) -> bool:
        return self.node.view.controller == self.node.me and not self.node.session.fenced

    async def run(self) -> None:
        """Campaign and reconcile until cancelled; never raises otherwise."""
        while True:
            try:
                self.wake.clear()
                node = self.node
                bad = node.view.bad.get(node.keys.controller)
                if bad is not None and not node.session.fenced:
                    await node.etcd.cas({node.keys.controller: None},
                                        {node.keys.controller: bad.version})
                if node.view.controller < 0 and not node.session.fenced:
                    key = node.keys.controller
                    if await node.etcd.cas({key: pack({"broker_id": node.me})}, {key: 0},
                                           lease=node.session.lease):
                        log.info("broker %d is the controller", node.me)
                if self.active:
                    await self.repair_bad()
                    await self.reconcile()
            except asyncio.CancelledError:
                raise
            except ClusterUnavailableError as exc:
                log.warning("controller: %s", exc)
            except Exception:  # noqa: BLE001 - the loop must go on
                log.exception("controller round failed")
            try:
                await asyncio.wait_for(self.wake.wait(), RECONCILE_S)
            except asyncio.TimeoutError:
                pass

    async def reconcile(self) -> int:
        """One pass over every partition; returns how many it changed."""
        view, etcd, keys = self.node.view, self.node.etcd, self.node.keys
        changed = 0
        for st in list(view.partitions.values()):
            topic = view.topics.get(st.topic)
            new = repair(st, {b.id: b.registered for b in view.brokers.values()},
                         topic.unclean_leader_election if topic else False)
            moved = new is None and st.reassigning
            if moved:
                new = advance(st, view.live)
            if new is None:
                continue
            key = keys.partition(st.topic, st.partition)
            if await etcd.cas({key: partition_value(new)}, {key: st.version}):
                changed += 1
                log.info("%s-%d: %sleader %d -> %d, epoch %d, isr %s", st.topic, st.partition,
                         f"reassigned {list(st.replicas)} -> {list(new.replicas)}: " if moved
                         else "", st.leader, new.leader, new.leader_epoch, list(new.isr))
        return changed

    async def repair_bad(self) -> int:
        """Rewrite the refused topic and partition values it can (module
        docstring); returns how many it rewrote."""
        view, etcd = self.node.view, self.node.etcd
        self._tried &= {(k, b.version) for k, b in view.bad.items()}
        done = 0
        for key, bad in list(view.bad.items()):
            if bad.kind not in ("topic", "partition") or bad.ident is None \
                    or (key, bad.version) in self._tried:
                continue
            before = await self._before(key, bad)
            self._tried.add((key, bad.version))  # once per revision (a failed write: next round)
            if before is None:
                log.error("cannot repair etcd key %s (%s): no valid value before it; delete "
                          "the key (or the topic) to clear it", key, bad.why)
                continue
            if bad.kind == "topic":
                value = topic_value(before)
            else:
                epochs = [before.leader_epoch] + ([bad.last.leader_epoch] if bad.last else [])
                before = before.with_(leader_epoch=max(epochs) + 1)
                value = partition_value(before)
            try:
                applied = await etcd.cas({key: value}, {key: bad.version})
            except ClusterUnavailableError:
                self._tried.discard((key, bad.version))
                raise
            if applied:
                done += 1
                log.warning("repaired etcd key %s (%s) from its last valid value%s", key, bad.why,
                            f", leader epoch {before.leader_epoch}" if bad.kind == "partition"
                            else "")
        return done

    async def _before(self, key: str, bad):
        """The valid value at ``key`` before the bad write: etcd's history
        first, else the view's last valid one (None: neither)."""
        try:
            item = await self.node.etcd.get_at(key, bad.version - 1)
            if item is not None:
                if bad.kind == "topic":
                    return topic_from(bad.ident, item.value, item.version)
                return partition_from(*bad.ident, item.value, item.version)
        except (ClusterUnavailableError, ValueError, KeyError, TypeError) as exc:
            log.info("etcd history of %s not usable (%s): using the last valid value seen",
                     key, exc)
        return bad.last
