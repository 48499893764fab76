"""The ``/metrics`` HTTP server: aiohttp on an event loop of its own, in one
thread, with bounded connections (docs/metrics.md, "The server").

``MetricsServer(host, port, handle, ssl_context, max_connections,
timeout_s).start()`` binds (raising what binding raised: the port in use,
...) and serves in the daemon thread ``logbroker-metrics``; ``port`` is the
bound port; ``loop`` the server's loop; ``close()`` stops it (bounded, idempotent).
``handle(request)`` is awaited on that loop for every request.

Bounds, so that a peer cannot make the server hold more than a fixed
amount, nor slow the broker's own loop at all:

- at most ``max_connections`` connections at once (TLS handshakes in
  progress included); one more is closed at once, with a warning line
  at most every ``WARN_EVERY_S``. Connections cost no thread: 600 slow
  connections are 600 sockets on one loop, not 600 threads.
- ``timeout_s`` bounds a TLS handshake, an idle connection and a request's
  line and headers not finished (a slowloris: aiohttp's keep-alive timer
  closes a connection still waiting for a whole request), and the writing
  of an answer to a peer that does not read (``write``).
- the request line and each header at most ``MAX_LINE`` bytes, at most
  ``MAX_HEADERS`` headers (else 400); a body is never read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time

from aiohttp import web

log = logging.getLogger("logbroker.metrics")
MAX_LINE = 4096  # bytes of the request line and of each header
MAX_HEADERS = 32
WARN_EVERY_S = 60.0  # at most one warning line per minute about refused connections
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 2.0


class MetricsServer:
    def __init__(self, host: str, port: int, handle, ssl_context=None,
                 max_connections: int = 16, timeout_s: float = 10.0) -> None:
        self.host, self.port, self.handle = host, port, handle
        self.ssl_context, self.max_connections, self.timeout_s = (ssl_context, max_connections,
                                                                  timeout_s)
        self.live: set = set()  # handlers of connections accepted and not closed (handshakes too)
        self.refused = 0  # connections closed at once: max_connections were open
        self.loop: "asyncio.AbstractEventLoop | None" = None
        self._thread: "threading.Thread | None" = None
        self._stop: "asyncio.Event | None" = None
        self._warned = float("-inf")

    def start(self) -> int:
        """Bind and serve in a thread; the bound port (raises what binding raised)."""
        started: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(started,),
                                        name="logbroker-metrics", daemon=True)
        self._thread.start()
        self.port = started.result(START_TIMEOUT_S)
        return self.port

    def close(self) -> None:
        """Stop serving (connections closed; bounded by ``STOP_TIMEOUT_S``)."""
        loop, stop = self.loop, self._stop
        if loop is None or stop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(stop.set)
        except RuntimeError:  # the loop closed meanwhile
            return
        if self._thread is not threading.current_thread():
            self._thread.join(STOP_TIMEOUT_S)

    async def write(self, request: web.BaseRequest, body, headers: dict,
                    status: int = 200) -> web.StreamResponse:
        """Answer ``body`` (bytes, or a tuple of bytes written one after the
        other), within ``timeout_s`` (a peer that does not read is cut off)."""
        parts = body if isinstance(body, tuple) else (body,)
        resp = web.StreamResponse(status=status, headers=headers)
        resp.content_length = sum(len(p) for p in parts)
        try:
            async with asyncio.timeout(self.timeout_s):
                await resp.prepare(request)
                if request.method != "HEAD":
                    for part in parts:
                        await resp.write(part)
                await resp.write_eof()
        except TimeoutError:
            log.debug("metrics: %s did not read its answer within %g s: closed", request.remote,
                      self.timeout_s)
            if request.transport is not None:
                request.transport.abort()
        return resp

    # -- the server's thread -----------------------------------------------------------------
    def _run(self, started: concurrent.futures.Future) -> None:
        loop = self.loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._serve(started))
        except BaseException as exc:  # noqa: BLE001 - handed to start(), or logged
            if not started.done():
                started.set_exception(exc)
            else:
                log.exception("the metrics server stopped")
        finally:
            loop.close()

    async def _serve(self, started: concurrent.futures.Future) -> None:
        self._stop = asyncio.Event()
        server = _Counted(self, self.handle, handler_cancellation=True,
                          keepalive_timeout=self.timeout_s, lingering_time=0,
                          max_line_size=MAX_LINE, max_field_size=MAX_LINE,
                          max_headers=MAX_HEADERS, access_log=None)
        listening = await asyncio.get_running_loop().create_server(
            lambda: _Accepted(self, server), self.host, self.port, reuse_address=True)
        started.set_result(listening.sockets[0].getsockname()[1])
        try:
            await self._stop.wait()
        finally:
            listening.close()
            await server.shutdown(STOP_TIMEOUT_S / 2)

    def _refuse(self, transport) -> None:
        self.refused += 1
        now = time.monotonic()
        if now - self._warned >= WARN_EVERY_S:
            self._warned = now
            log.warning("metrics: connection from %s refused: metrics_max_connections (%d) are "
                        "open (%d refused so far)", _peer(transport), self.max_connections,
                        self.refused)
        else:
            log.debug("metrics: connection from %s refused: metrics_max_connections are open",
                      _peer(transport))
        transport.abort()


class _Counted(web.Server):
    """aiohttp's low-level server, uncounting each connection it closes."""

    def __init__(self, owner: MetricsServer, handler, **kwargs) -> None:
        super().__init__(handler, **kwargs)
        self.owner = owner

    def connection_lost(self, handler, exc) -> None:
        super().connection_lost(handler, exc)
        self.owner.live.discard(handler)


class _Accepted(asyncio.Protocol):
    """One accepted TCP connection: counted (or refused over the bound),
    then its TLS handshake (bounded) if any, then aiohttp's handler."""

    def __init__(self, owner: MetricsServer, server: _Counted) -> None:
        self.owner, self.server = owner, server

    def connection_made(self, transport) -> None:
        owner = self.owner
        if len(owner.live) >= owner.max_connections:
            owner._refuse(transport)
            return
        handler = self.server()
        owner.live.add(handler)
        if owner.ssl_context is None:
            transport.set_protocol(handler)
            handler.connection_made(transport)
            return
        transport.pause_reading()  # start_tls takes the bytes from here on
        asyncio.get_running_loop().create_task(self._handshake(transport, handler))

    async def _handshake(self, transport, handler) -> None:
        owner = self.owner
        try:
            tls = await asyncio.get_running_loop().start_tls(
                transport, handler, owner.ssl_context, server_side=True,
                ssl_handshake_timeout=owner.timeout_s)
        except (OSError, ValueError, RuntimeError, asyncio.TimeoutError,
                asyncio.CancelledError) as exc:
            log.info("metrics: TLS handshake with %s failed: %s", _peer(transport),
                     str(exc) or type(exc).__name__)
            tls = None
        if tls is None:
            transport.abort()
            owner.live.discard(handler)  # (asyncio may or may not tell the handler itself)
            return
        handler.connection_made(tls)

    def data_received(self, data: bytes) -> None:  # refused, or reading is paused
        pass


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername")
    return f"{peer[0]}:{peer[1]}" if peer else "?"
