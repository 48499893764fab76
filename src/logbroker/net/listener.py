"""One listening socket of the broker and its connections, for either
protocol: ours (``port``) and Kafka's (``kafka_port``, kafka_listener.py).

``Listener(broker, kind, host, port, make_conn, answer_refusals)`` binds
with ``start()`` (plain TCP, or TLS with ``tls_cert``: the handshake of
tls.py, bounded by ``frame_timeout_ms``, counted against the limits from
acceptance). Every accepted connection registers here
(``register(conn, transport)``, False: refused) and counts against the
broker's limits (``max_connections``, ``max_connections_per_ip``:
admission.py, shared by both listeners). A refused connection of our
protocol is answered TOO_MANY_CONNECTIONS by a ``Refusal``; a refused
Kafka connection is closed at once, unanswered, as Kafka does (its clients
retry with backoff). A broker that is stopping takes no new connection.
The broker's 1 s sweep calls ``sweep(now)`` for the frame and idle
timeouts; ``close()`` stops accepting (connections stay until the broker
drains them).
"""

from __future__ import annotations

import asyncio
import logging

from .admission import peer_ip
from ..tls import listener_context
from .tls import TlsListener

log = logging.getLogger("logbroker.connection")


class Listener:
    def __init__(self, broker, kind: str, host: str, port: int, make_conn,
                 answer_refusals: bool, tls: "bool | None" = None) -> None:
        """``make_conn(listener)`` makes a connection (its registry is this
        listener); ``tls``: whether to speak TLS (None: with ``tls_cert``)."""
        self.use_tls = tls
        self.broker, self.kind, self.host = broker, kind, host
        self.port = port  # the bound port once started
        self.make_conn, self.answer_refusals = make_conn, answer_refusals
        self.connections: set = set()
        self.server: "asyncio.Server | None" = None
        self.tls = False  # TLS on this listener (set by start)

    async def start(self, start_serving: bool = True) -> None:
        """Bind ``host:port`` (port 0: any free one, read back into ``port``)."""
        context = None if self.use_tls is False else listener_context(self.broker.config)
        self.tls = context is not None
        factory = (lambda: self.make_conn(self)) if context is None else TlsListener(
            self.broker, context, lambda: self.make_conn(self), self,
            answer_refusals=self.answer_refusals).protocol
        self.server = await asyncio.get_running_loop().create_server(
            factory, self.host, self.port, reuse_address=True, backlog=512,
            start_serving=start_serving)
        self.port = self.server.sockets[0].getsockname()[1]

    async def serve(self) -> None:
        await self.server.start_serving()

    def register(self, conn, transport) -> bool:
        """Count ``conn``, whose ``transport`` was just made; False when it is
        refused (over a limit, or the broker stopping): the transport is then
        answered or closed, and ``conn`` must let go of it. A TLS connection
        comes counted by its handshake (``conn.ip`` set)."""
        if transport.is_closing() or self.broker.stopping:
            self.unregister(conn)
            transport.abort()
            return False
        if conn.ip is None:
            ip = peer_ip(transport)
            admission = self.broker.admission
            why = admission.admit(ip)
            if why is not None:
                if self.answer_refusals:
                    admission.refuse(transport, why, ip, self.broker.scratch)
                else:
                    log.debug("refused a %sconnection from %s: %s", self.kind, ip,
                              admission.message(why, ip))
                    transport.abort()
                return False
            conn.ip = ip
        self.connections.add(conn)
        return True

    def unregister(self, conn) -> None:
        """Uncount ``conn`` (closed, or its TLS handshake failed); idempotent."""
        if conn.ip is not None:
            self.broker.admission.release(conn.ip)
            conn.ip = None
        self.connections.discard(conn)
        self.broker.closed_one()

    def sweep(self, now: float) -> None:
        for conn in list(self.connections):
            conn.idle_check(now)

    def close(self) -> None:
        """Stop accepting; connections stay until the broker drains them."""
        if self.server is not None:
            self.server.close()
