"""Marker delivery: the transaction coordinator's markers to each
partition's current leader.

``MarkerSender.send(markers)`` groups the markers by the leader of their
partition as this broker sees it now (``meta.leader_of``): those this broker
leads are written through ``write_local`` (the WriteTxnMarkers handler's own
function, api/), the others go to their leader as one ``WriteTxnMarkers``
over the brokers' authenticated peer link (``dial``: the cluster's
``connect_to``, one connection per broker, kept and redialled when lost).
It returns the markers still to deliver (the caller retries them with a
backoff); a marker whose partition is gone, or whose partition already saw
a newer producer epoch (the transaction there is closed), counts as done.
It never raises for a partition's failure.
"""

from __future__ import annotations

import asyncio
import logging

from ..errors import (BrokerUnavailableError, InvalidProducerEpochError, LogbrokerError,
                      UnknownTopicOrPartitionError)
from ..cluster.peer_calls import PeerCalls
from ..protocol import messages as m

log = logging.getLogger("logbroker.coordinator")
DONE = frozenset({0, UnknownTopicOrPartitionError.code, InvalidProducerEpochError.code})
MAX_PER_REQUEST = 1000  # markers of one WriteTxnMarkers to a peer


class MarkerSender:
    def __init__(self, meta, me: int, write_local, dial=None, timeout: float = 10.0) -> None:
        """``write_local(markers)`` -> MarkerResults (awaitable); ``dial(broker_id)``
        -> an open, proven BrokerConnection (None on a single node)."""
        self.meta, self.me, self.write_local = meta, me, write_local
        self.timeout = timeout
        self._peers = PeerCalls(dial, BrokerUnavailableError)

    async def close(self) -> None:
        self._peers.close()

    async def send(self, markers: list) -> list:
        """Deliver ``markers`` (TxnMarker); the ones not delivered."""
        by_leader: dict[int, list] = {}
        left = []
        for mk in markers:
            try:
                leader = self.meta.leader_of(mk.topic, mk.partition)
            except UnknownTopicOrPartitionError:
                continue  # deleted: nobody reads its transaction any more
            except LogbrokerError:
                left.append(mk)
                continue
            if leader < 0:
                left.append(mk)
            else:
                by_leader.setdefault(leader, []).append(mk)
        sent = await asyncio.gather(*(self._to(b, mks) for b, mks in by_leader.items()))
        for mks in sent:
            left.extend(mks)
        return left

    async def _to(self, broker: int, markers: list) -> list:
        """The markers of ``markers`` that ``broker`` did not write."""
        try:
            if broker == self.me:
                results = await self.write_local(tuple(markers))
            else:
                results = []
                for i in range(0, len(markers), MAX_PER_REQUEST):
                    results.extend(await self._remote(broker, markers[i:i + MAX_PER_REQUEST]))
        except (LogbrokerError, OSError, TimeoutError) as exc:
            log.info("markers to broker %d: %s", broker, exc)
            return markers
        except Exception:  # noqa: BLE001 - a bug: logged, retried, other leaders unaffected
            log.exception("markers to broker %d failed", broker)
            return markers
        ok = {(r.producer_id, r.topic, r.partition) for r in results if r.error in DONE}
        bad = [r for r in results if r.error not in DONE]
        if bad:
            log.debug("markers to broker %d refused: %s", broker, bad[:3])
        return [mk for mk in markers if (mk.producer_id, mk.topic, mk.partition) not in ok]

    async def _remote(self, broker: int, markers: list) -> tuple:
        resp = await self._peers.call(broker, m.WriteTxnMarkers(markers=tuple(markers)),
                                      self.timeout)
        return resp.parts
