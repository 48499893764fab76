"""TLS on the broker's listener (docs/security.md).

With ``tls_cert`` set, the listener accepts TCP connections and each one
starts as a ``_Handshake``: it runs ``loop.start_tls`` (server side, bounded
by ``frame_timeout_ms``), then hands the TLS transport to a
``ClientConnection`` as if it had been accepted that way. A handshake that
fails (a plaintext client, a client that does not trust our certificate, a
missing or untrusted client certificate under ``tls_client_auth``, a peer
that stalls) closes the connection and logs one line; it never reaches the
broker's connection table, and the broker goes on serving the others.
Handshakes in progress count toward ``max_connections`` and the per-IP
limits (admission.py); a connection over a limit is answered
TOO_MANY_CONNECTIONS after its handshake, as a plaintext one is. The Kafka
listener uses the same handshakes (its connections, closed when over a
limit).

(``create_server(ssl=...)`` would do the handshake too, but asyncio reports
its failures only in debug mode.)
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from ..tls import reason
from .admission import Refusal, peer_ip


log = logging.getLogger("logbroker.tls")


class TlsListener:
    """The protocol factory of a TLS listener: ``create_server(listener.protocol, ...)``.
    ``make_conn()`` makes the connection a handshake hands over to;
    ``registry`` (the net.listener.Listener) (``unregister(conn)``) uncounts it when its
    handshake fails. ``answer_refusals``: a connection over a limit is
    answered TOO_MANY_CONNECTIONS (our protocol) or just closed (Kafka's
    listener, as Kafka does)."""

    def __init__(self, broker, context: ssl.SSLContext, make_conn, registry,
                 answer_refusals: bool = True) -> None:
        self.broker, self.context = broker, context
        self.make_conn = make_conn
        self.registry = registry
        self.answer_refusals = answer_refusals
        self.timeout = broker.config.frame_timeout_ms / 1000
        self.handshakes: set[asyncio.Task] = set()

    def protocol(self) -> "_Handshake":
        return _Handshake(self)


class _Handshake(asyncio.Protocol):
    """One accepted connection until its TLS handshake is through. It is
    counted (admission.py) from acceptance; one over a limit does its
    handshake too, bounded by the refusal's timeout, to be answered
    TOO_MANY_CONNECTIONS by a ``Refusal`` (or is closed at once when too
    many refusals are answering)."""

    def __init__(self, listener: TlsListener) -> None:
        self.listener = listener

    def connection_made(self, transport) -> None:
        lst, broker = self.listener, self.listener.broker
        peer = transport.get_extra_info("peername")
        peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        ip = peer_ip(transport)
        why = broker.admission.admit(ip)
        if why is None:
            app, timeout = lst.make_conn(), lst.timeout
            app.ip = ip  # counted: released by the registry once closed, or below if the handshake fails
        else:
            app, timeout = (broker.admission.refusal(why, ip, broker.scratch)
                            if lst.answer_refusals else None), broker.admission.timeout
            if app is None:
                transport.abort()
                return
        transport.pause_reading()  # start_tls takes the bytes from here on
        task = asyncio.get_running_loop().create_task(self._handshake(transport, peer, app, timeout))
        lst.handshakes.add(task)
        task.add_done_callback(lst.handshakes.discard)

    async def _handshake(self, transport, peer: str, app, timeout: float) -> None:
        lst = self.listener
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, app, lst.context, server_side=True, ssl_handshake_timeout=timeout)
        except asyncio.CancelledError:
            transport.abort()
            self._failed(app)
            raise
        except (OSError, ValueError, RuntimeError, asyncio.TimeoutError) as exc:
            log.warning("TLS handshake with %s failed: %s", peer, _why(exc, timeout))
            transport.abort()
            self._failed(app)
            return
        if tls is None:  # the peer closed the connection during the handshake
            log.info("TLS handshake with %s failed: closed by the peer", peer)
            transport.abort()
            self._failed(app)
            return
        app.connection_made(tls)

    def _failed(self, app) -> None:
        """Uncount a connection whose handshake failed."""
        if isinstance(app, Refusal):
            app.forget()
        else:
            self.listener.registry.unregister(app)

    def data_received(self, data: bytes) -> None:  # reading is paused until start_tls
        pass


_PLAINTEXT = ("wrong version number", "http request", "unknown protocol")


def _why(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, ConnectionAbortedError) and "taking longer" in str(exc):
        return f"not completed within {timeout:g} s (frame_timeout_ms)"
    if isinstance(exc, ssl.SSLError):
        why = reason(exc)
        return f"{why} (a plaintext client?)" if why in _PLAINTEXT else why
    return str(exc) or type(exc).__name__
