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
revision; a loser simply waits for the next round.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import ClusterUnavailableError
from .placement import repair
from .state import pack, partition_value

log = logging.getLogger("logbroker.cluster")
RECONCILE_S = 1.0


class Controller:
    def __init__(self, node) -> None:
        self.node = node
        self.wake = asyncio.Event()

    @property
    def active(self) -> bool:
        return self.node.view.controller == self.node.me and not self.node.session.fenced

    async def run(self) -> None:
        """Campaign and reconcile until cancelled; never raises otherwise."""
        while True:
            try:
                self.wake.clear()
                node = self.node
                if node.view.controller < 0 and not node.session.fenced:
                    key = node.keys.controller
                    if await node.etcd.cas({key: pack({"broker_id": node.me})}, {key: 0},
                                           lease=node.session.lease):
                        log.info("broker %d is the controller", node.me)
                if self.active:
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
            if new is None:
                continue
            key = keys.partition(st.topic, st.partition)
            if await etcd.cas({key: partition_value(new)}, {key: st.version}):
                changed += 1
                log.info("%s-%d: leader %d -> %d, epoch %d, isr %s", st.topic, st.partition,
                         st.leader, new.leader, new.leader_epoch, list(new.isr))
        return changed
