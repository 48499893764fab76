"""One client connection: frames in, responses out, in request order.

Requests are started as soon as they are read, in order (so the appends of
pipelined produce requests share an fsync), and answered strictly in order.
Reading pauses while too many bytes or requests are unanswered
(backpressure) and while the socket's write buffer is full.
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
from ..storage.results import FileSlice

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger("logbroker.connection")
MAX_PENDING = 64


class ClientConnection(asyncio.BufferedProtocol):
    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        cfg = broker.config
        self.reader = FrameReader(max_frame_bytes=cfg.max_frame_bytes)
        self.transport: "asyncio.Transport | None" = None
        self.pending: deque = deque()
        self.inflight_bytes = 0
        self.read_paused = False
        self.write_ready: "asyncio.Event | None" = None
        self.writer: "asyncio.Task | None" = None
        self.peer = "?"
        self.last_frame_at = 0.0
        self.partial_since: "float | None" = None

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.write_ready = asyncio.Event()
        self.write_ready.set()
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
        try:
            self.reader.buffer_updated(nbytes)
        except LogbrokerError as exc:
            self.close(f"{exc}")
            return
        while (frame := self.reader.next_frame()) is not None:
            self.last_frame_at = loop.time()
            self.inflight_bytes += len(frame)
            self.pending.append(loop.create_task(self._handle(frame)))
        self.partial_since = (self.partial_since or loop.time()) if self.reader.buffered_bytes else None
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
        log.debug("connection from %s closed", self.peer)

    def pause_writing(self) -> None:
        self.write_ready.clear()

    def resume_writing(self) -> None:
        self.write_ready.set()

    # -- work ----------------------------------------------------------------------------
    def _flow(self) -> None:
        limit = self.broker.config.max_inflight_bytes
        busy = self.inflight_bytes > limit or len(self.pending) >= MAX_PENDING
        if busy and not self.read_paused and self.transport is not None:
            self.read_paused = True
            self.transport.pause_reading()
        elif not busy and self.read_paused and self.transport is not None:
            self.read_paused = False
            self.transport.resume_reading()

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
                if response is not None and self.transport is not None:
                    for buf in encode(response, cid):
                        if isinstance(buf, FileSlice):
                            await self._sendfile(buf)
                        else:
                            self.transport.write(buf)
                    await self.write_ready.wait()
        finally:
            self.writer = None

    async def _sendfile(self, part: FileSlice) -> None:
        """Send a segment slice as it lies on disk (os.sendfile on plain TCP;
        asyncio falls back to read + write where it cannot)."""
        loop = asyncio.get_running_loop()
        with part.fd() as fd, os.fdopen(fd, "rb", buffering=0, closefd=False) as fh:
            await loop.sendfile(self.transport, fh, part.position, part.size)

    def close(self, why: str) -> None:
        if self.transport is not None and not self.transport.is_closing():
            log.info("closing connection from %s: %s", self.peer, why)
            self.transport.close()

    def idle_check(self, now: float) -> None:
        cfg = self.broker.config
        if self.partial_since is not None and now - self.partial_since > cfg.frame_timeout_ms / 1000:
            self.close("request not completed within frame_timeout_ms")
        elif not self.pending and now - self.last_frame_at > cfg.idle_timeout_ms / 1000:
            self.close("idle")
