"""A broker's membership: its registration under an etcd lease.

``register()`` grants a lease of ``ttl`` seconds and creates
``brokers/<id>`` under it. If the key is still held by an earlier
incarnation (a broker restarted after kill -9 before its lease expired),
it waits for that lease to expire (bounded: 2 x ttl + 5 s), so the cluster
sees the restart as a leave and a join; a second live broker with the same
id is refused with a clear error.

``run()`` refreshes the lease every ttl/4 s. ``fenced`` is true once more
than ``ttl - safety`` seconds passed since the *sending* of the last
refresh that etcd answered: etcd cannot have expired the lease before
then, so a leader that checks ``fenced`` before acknowledging never
acknowledges after the controller could have moved its leadership. A lease
found expired is re-granted and the key re-created (the controller has
moved our leaderships meanwhile; the watch tells us).

``advertise(me)`` changes the registration's value (the Kafka listener's
address, known only once it is bound, after ``register``) in place: same
key, same lease, same create revision, so the cluster sees no leave and no
join; a later re-registration writes the new value.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ..errors import ClusterUnavailableError, InvalidConfigError
from .etcd import Etcd
from .state import BrokerInfo, Keys, broker_value

log = logging.getLogger("logbroker.cluster")
SAFETY = 0.25  # s kept between our fencing and etcd's expiry


class Session:
    def __init__(self, etcd: Etcd, keys: Keys, me: BrokerInfo, ttl: int) -> None:
        self.etcd, self.keys, self.me, self.ttl = etcd, keys, me, ttl
        self.lease = 0
        self._valid_until = 0.0  # monotonic
        self.lost = asyncio.Event()  # set when the lease expired (cleared on re-register)

    @property
    def fenced(self) -> bool:
        return time.monotonic() >= self._valid_until

    async def register(self) -> None:
        key = self.keys.broker(self.me.id)
        deadline = time.monotonic() + 2 * self.ttl + 5
        sent = time.monotonic()
        self.lease = await self.etcd.grant(self.ttl)
        while True:
            if await self.etcd.cas({key: broker_value(self.me)}, {key: 0}, lease=self.lease):
                self._valid_until = sent + self.ttl - SAFETY
                self.lost.clear()
                log.info("registered as broker %d (lease %x, ttl %d s)", self.me.id, self.lease,
                         self.ttl)
                return
            if time.monotonic() > deadline:
                await self.etcd.revoke(self.lease)
                raise InvalidConfigError(f"broker id {self.me.id} is registered by another live "
                                         f"broker (key {key} kept alive)")
            await asyncio.sleep(0.1)
            sent = time.monotonic()
            await self.etcd.keepalive(self.lease)

    async def advertise(self, me: BrokerInfo) -> None:
        """Write ``me`` as our registration's value, in place (compare-and-set
        on the key's revision, which must be under our lease). Raises
        ClusterUnavailableError when etcd fails or our registration is gone
        (the next ``register`` writes ``me`` then)."""
        self.me = me
        key = self.keys.broker(me.id)
        for _ in range(3):  # a concurrent change of the key (none is expected) is retried
            got = await self.etcd.get(key)
            if got is None or got.lease != self.lease:
                raise ClusterUnavailableError(f"broker {me.id} is not registered under our lease")
            if await self.etcd.cas({key: broker_value(me)}, {key: got.version}, lease=self.lease):
                return
        raise ClusterUnavailableError(f"{key} kept changing while we rewrote it")

    async def run(self) -> None:
        """Keep the lease alive until cancelled; never raises otherwise."""
        while True:
            await asyncio.sleep(self.ttl / 4)
            sent = time.monotonic()
            try:
                left = await asyncio.wait_for(self.etcd.keepalive(self.lease), self.ttl / 2)
            except (ClusterUnavailableError, asyncio.TimeoutError) as exc:
                log.warning("lease refresh failed: %s", str(exc) or "timed out")
                continue
            if left > 0:
                self._valid_until = sent + min(left, self.ttl) - SAFETY
                continue
            log.error("lease of broker %d expired: registering again", self.me.id)
            self._valid_until = 0.0
            self.lost.set()
            try:
                await self.register()
            except Exception as exc:  # noqa: BLE001 - retried on the next round
                log.warning("re-registering failed: %s", exc)

    async def close(self) -> None:
        """Leave the cluster at once (clean shutdown): revoke the lease."""
        self._valid_until = 0.0
        lease, self.lease = self.lease, 0
        if lease:
            try:
                await asyncio.wait_for(self.etcd.revoke(lease), 2.0)
            except Exception:  # noqa: BLE001 - expiry does it anyway
                pass
