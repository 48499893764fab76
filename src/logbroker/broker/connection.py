"""One client connection: frames in, responses out, in request order.

Requests are started as soon as they are read, in order (so the appends of
pipelined produce requests share an fsync), and answered strictly in order.
Reading pauses while too many bytes or requests are unanswered
(backpressure) and while the socket's write buffer is full.

Memory: an idle connection holds no buffer (the broker's readers share one
receive buffer; a frame in progress holds only the bytes that arrived), and
no task or future exists until there is a request to answer.

The server uses only the public API: ``pause()`` (stop reading),
``drain()`` (wait until what was read is answered), ``close(why)``,
``abort(why)`` and ``idle_check(now)``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from typing import TYPE_CHECKING

from ..errors import LogbrokerError
from ..protocol import messages as m
from ..protocol.codec import DecodeError, FrameReader, decode, encode
from ..coordinator.requests import PEER
from ..storage.results import FileSlice
from .handlers import CLOSE_CONNECTION

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger("logbroker.connection")
MAX_PENDING = 64


class ClientConnection(asyncio.BufferedProtocol):
    __slots__ = ("broker", "reader", "transport", "pending", "inflight_bytes", "read_paused",
                 "paused", "can_write", "writer", "peer", "last_frame_at", "partial_since")

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.reader = FrameReader(max_frame_bytes=broker.config.max_frame_bytes,
                                  scratch=broker.scratch)
        self.transport: "asyncio.Transport | None" = None
        self.pending: deque = deque()  # tasks answering the requests read, in order
        self.inflight_bytes = 0
        self.read_paused = False  # reading is paused (backpressure or pause())
        self.paused = False  # pause() was called: reading stays paused
        self.can_write: "asyncio.Future | None" = None  # while the write buffer is full
        self.writer: "asyncio.Task | None" = None
        self.peer = "?"
        self.last_frame_at = 0.0
        self.partial_since: "float | None" = None  # when the incomplete frame began

    # -- public API (the server's) ----------------------------------------------------
    def pause(self) -> None:
        """Read no more requests; those already read are still answered."""
        self.paused = True
        self._flow()

    async def drain(self) -> None:
        """Return once every request read so far is answered (or the
        connection is gone); never raises."""
        while self.writer is not None:
            await asyncio.wait([self.writer])

    def close(self, why: str) -> None:
        """Close after what is already written is sent."""
        if self.transport is not None and not self.transport.is_closing():
            log.info("closing connection from %s: %s", self.peer, why)
            self.transport.close()

    def abort(self, why: str) -> None:
        """Close at once, dropping what is unsent."""
        if self.transport is not None and not self.transport.is_closing():
            log.debug("aborting connection from %s: %s", self.peer, why)
        if self.transport is not None:
            self.transport.abort()

    def idle_check(self, now: float) -> None:
        """Close the connection if a frame is late or it has been idle too long."""
        cfg = self.broker.config
        if self.partial_since is not None and now - self.partial_since > cfg.frame_timeout_ms / 1000:
            self.close("request not completed within frame_timeout_ms")
        elif not self.pending and now - self.last_frame_at > cfg.idle_timeout_ms / 1000:
            self.close("idle")

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.last_frame_at = asyncio.get_running_loop().time()
        if not self.broker.register(self):
            log.warning("refused %s: max_connections %d reached", self.peer,
                        self.broker.config.max_connections)
            transport.abort()
            return
        log.debug("connection from %s", self.peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        loop = asyncio.get_running_loop()
        reader, before = self.reader, self.reader.frames_read
        try:
            reader.buffer_updated(nbytes)
        except LogbrokerError as exc:
            self.close(f"{exc}")
            return
        now = loop.time()
        while (frame := reader.next_frame()) is not None:
            self.last_frame_at = now
            self.inflight_bytes += len(frame)
            self.pending.append(loop.create_task(self._handle(frame)))
        if not reader.in_frame:
            self.partial_since = None
        elif self.partial_since is None or reader.frames_read != before:
            self.partial_since = now  # a new frame began in these bytes
        if self.pending and self.writer is None:
            self.writer = loop.create_task(self._write_responses())
        self._flow()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc) -> None:
        self.broker.unregister(self)
        for task in self.pending:
            task.cancel()
        if self.writer is not None:
            self.writer.cancel()
        if self.can_write is not None and not self.can_write.done():
            self.can_write.cancel()
        log.debug("connection from %s closed", self.peer)

    def pause_writing(self) -> None:
        if self.can_write is None:
            self.can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.can_write is not None and not self.can_write.done():
            self.can_write.set_result(None)
        self.can_write = None

    # -- work ----------------------------------------------------------------------------
    def _flow(self) -> None:
        limit = self.broker.config.max_inflight_bytes
        stop = self.paused or self.inflight_bytes > limit or len(self.pending) >= MAX_PENDING
        if self.transport is None or self.transport.is_closing() or stop == self.read_paused:
            return
        self.read_paused = stop
        if stop:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()
            self.partial_since = None if self.partial_since is None else \
                asyncio.get_running_loop().time()  # the frame's clock stood still meanwhile

    async def _handle(self, frame) -> "tuple[int, m.Message | None, int]":
        size = len(frame)
        try:
            env = decode(frame)
        except DecodeError as exc:
            if exc.cid is None:
                return -1, None, size
            code = exc.cause.code if exc.cause is not None else exc.code
            cls = m.RESPONSES.get(exc.api, m.HandshakeResponse)
            return exc.cid, cls(error=code, message=exc.message), size
        PEER.set(self.peer)  # this task's context: a JoinGroup records the member's host
        return env.cid, await self.broker.dispatch(env.message), size

    async def _write_responses(self) -> None:
        try:
            while self.pending:
                cid, response, size = await self.pending[0]
                self.pending.popleft()
                self.inflight_bytes -= size
                self._flow()
                if cid < 0:
                    self.close("unreadable request")
                    return
                if response is CLOSE_CONNECTION:
                    self.close("acks=0 produce to a partition this broker does not lead")
                    return
                if response is not None and not self.transport.is_closing():
                    await self._send(encode(response, cid))
        except (OSError, RuntimeError) as exc:  # the peer left mid-response (e.g. in a sendfile)
            self.abort(f"lost while answering: {exc!r}")
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug must not leave a task exception unretrieved
            log.exception("answering %s failed", self.peer)
            self.abort("internal error")
        finally:
            self.writer = None

    async def _send(self, buffers: list) -> None:
        for buf in buffers:
            if isinstance(buf, FileSlice):
                await self._sendfile(buf)
            else:
                self.transport.write(buf)
        if self.can_write is not None:
            await self.can_write

    async def _sendfile(self, part: FileSlice) -> None:
        """Send a segment slice as it lies on disk (os.sendfile on plain TCP;
        asyncio falls back to read + write where it cannot)."""
        loop = asyncio.get_running_loop()
        with part.fd() as fd, os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
            await loop.sendfile(self.transport, fh, part.position, part.size)
