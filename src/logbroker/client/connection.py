"""One TCP connection to a broker: pipelined requests matched by correlation id.

An asyncio ``BufferedProtocol``: the socket reads straight into the
``FrameReader``'s buffer (big fetch responses land in a buffer of their own,
never copied in Python), frames are decoded on the loop and resolve the
future of their correlation id. Requests are written as they come; the
broker answers them in order.

Failure contract: when the connection is lost, or a request outlives its
timeout (the pipeline behind it is then stuck, so the connection is closed,
as Kafka clients do), every pending request fails with a retriable error:
``RequestTimedOutError`` for the one that timed out, ``BrokerUnavailableError``
for the others. A frame the client cannot decode closes the connection the
same way.
"""

from __future__ import annotations

import asyncio
import logging
import socket

from ..errors import BrokerUnavailableError, LogbrokerError, RequestTimedOutError
from ..protocol.codec import FrameReader, decode, encode
from ..protocol.messages import Message

log = logging.getLogger("logbroker.client")


class Connection(asyncio.BufferedProtocol):
    """Use ``await Connection.open(...)``; then ``request()`` / ``send_only()``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, address: str, max_frame_bytes: int) -> None:
        self.loop, self.address = loop, address
        self._reader = FrameReader(max_frame_bytes=max_frame_bytes)
        self._pending: dict[int, tuple[asyncio.Future, "asyncio.TimerHandle | None"]] = {}
        self._next_cid = 1
        self._transport: "asyncio.Transport | None" = None
        self.error: "LogbrokerError | None" = None  # set once closed

    @classmethod
    async def open(cls, host: str, port: int, *, timeout: float,
                   max_frame_bytes: int) -> "Connection":
        """Connect within ``timeout`` s; raises ``BrokerUnavailableError``."""
        loop = asyncio.get_running_loop()
        conn = cls(loop, f"{host}:{port}", max_frame_bytes)
        try:
            async with asyncio.timeout(timeout):
                await loop.create_connection(lambda: conn, host, port)
        except (OSError, TimeoutError) as exc:
            reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or str(exc))
            raise BrokerUnavailableError(f"cannot connect to {host}:{port}: {reason}") from None
        return conn

    @property
    def closed(self) -> bool:
        return self.error is not None

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- requests ----------------------------------------------------------------------
    def request(self, message: Message, timeout: "float | None" = None) -> asyncio.Future:
        """Send ``message``; the future resolves to its response message or
        fails as the module docstring says. Never raises itself."""
        fut = self.loop.create_future()
        if self.error is not None:
            fut.set_exception(self._lost())
            return fut
        cid = self._next_cid
        self._next_cid += 1
        timer = None if timeout is None else self.loop.call_later(timeout, self._timed_out, cid)
        self._pending[cid] = (fut, timer)
        self._write(message, cid)
        return fut

    def send_only(self, message: Message) -> None:
        """Send a request that gets no response (acks=0 produce); raises
        ``BrokerUnavailableError`` when the connection is closed."""
        if self.error is not None:
            raise self._lost()
        cid = self._next_cid
        self._next_cid += 1
        self._write(message, cid)

    def _write(self, message: Message, cid: int) -> None:
        write = self._transport.write
        for buf in encode(message, cid):
            write(buf)

    def close(self, error: "LogbrokerError | None" = None) -> None:
        """Close now; pending requests fail with ``error`` (default: unavailable)."""
        if self.error is None:
            self.error = error or BrokerUnavailableError(f"connection to {self.address} closed")
            if self._transport is not None:
                self._transport.abort()
            self._fail_pending()

    def _lost(self) -> LogbrokerError:
        err = self.error
        return type(err)(err.message)

    def _timed_out(self, cid: int) -> None:
        entry = self._pending.pop(cid, None)
        if entry is None:
            return
        fut = entry[0]
        if not fut.done():
            fut.set_exception(RequestTimedOutError(f"no response from {self.address} in time"))
        self.close(BrokerUnavailableError(
            f"connection to {self.address} closed after a request timed out"))

    def _fail_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for fut, timer in pending.values():
            if timer is not None:
                timer.cancel()
            if not fut.done():
                fut.set_exception(self._lost())

    # -- asyncio protocol -------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:  # pragma: no cover - not TCP
                pass

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        try:
            self._reader.buffer_updated(nbytes)
            frame = self._reader.next_frame()
            while frame is not None:
                self._dispatch(frame)
                frame = self._reader.next_frame()
        except LogbrokerError as exc:
            log.warning("closing connection to %s: %s", self.address, exc)
            self.close(BrokerUnavailableError(f"bad response from {self.address}: {exc.message}"))

    def _dispatch(self, frame) -> None:
        envelope = decode(frame)
        entry = self._pending.pop(envelope.cid, None)
        if entry is None:
            return  # its request timed out already
        fut, timer = entry
        if timer is not None:
            timer.cancel()
        if not fut.done():
            fut.set_result(envelope.message)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: "Exception | None") -> None:
        reason = f": {exc}" if exc else ""
        self.close(BrokerUnavailableError(f"connection to {self.address} lost{reason}"))
