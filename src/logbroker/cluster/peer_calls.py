"""Requests of our protocol to other brokers over their proven peer links,
one cached connection per broker (the transaction coordinator's markers,
a partition leader's verification of a transaction).

``dial(broker_id)`` (the metadata interface's ``peer_dialler()``: None on a
single node) opens a connection that proved this broker's identity; it is
kept for the next call and dialled once at a time per broker, so
concurrent callers never leak one. A failed call closes and forgets the
connection (the next call dials again) and raises; an answer whose
top-level error is set raises that error.
"""

from __future__ import annotations

import asyncio

from ..errors import LogbrokerError, for_code


class PeerCalls:
    def __init__(self, dial, no_peers: type) -> None:
        """``no_peers``: the error raised when there is no dialler (a single node)."""
        self.dial, self._no_peers = dial, no_peers
        self._conns: dict[int, object] = {}
        self._dialling: dict[int, asyncio.Lock] = {}

    async def call(self, broker: int, msg, timeout: float):
        """``msg``'s response from ``broker`` within ``timeout`` s."""
        if self.dial is None:
            raise self._no_peers(f"broker {broker}: a single node has no peers")
        conn = self._conns.get(broker)
        if conn is None or conn.closed:
            lock = self._dialling.setdefault(broker, asyncio.Lock())
            async with lock:  # one dial per broker at a time (no connection leaked)
                conn = self._conns.get(broker)
                if conn is None or conn.closed:
                    conn = self._conns[broker] = await self.dial(broker)
        try:
            resp = await conn.request(msg, timeout)
        except (LogbrokerError, OSError):
            conn.close()
            if self._conns.get(broker) is conn:
                del self._conns[broker]
            raise
        if resp.error:
            raise for_code(resp.error)(resp.message)
        return resp

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()
