"""One TCP connection to a broker: pipelined requests matched by correlation id.

Reading happens on the connection's asyncio loop (``add_reader`` on a
non-blocking socket): the socket reads straight into the ``FrameReader``'s
buffer (a big fetch response lands in a buffer of its own, never copied in
Python); frames are decoded on the loop and handed to the callback of their
correlation id, in the same loop turn.

Writing is thread-safe and direct: ``request_cb()`` may be called from any
thread (the sync producer's caller thread sends its own requests, saving
the hand-off to the I/O thread, which measured ~50 us per round trip). It
``sendmsg``s at once under a lock; what the kernel does not take is queued
and written by the loop when the socket is writable, so writes never block.

Failure contract: when the connection is lost, or a request outlives its
timeout (the pipeline behind it is then stuck, so the connection is closed,
as Kafka clients do), every pending request's callback gets a retriable
error: ``RequestTimedOutError`` for the one that timed out,
``BrokerUnavailableError`` for the others. A frame the client cannot decode
closes the connection the same way. Timeouts are checked by a watchdog
every ``WATCHDOG_S`` seconds (the oldest pending request first: the broker
answers in order).

The socket's reads and writes are a strategy of the connection's: ``PLAIN``
(plain_io.py: ``sendmsg`` of the buffers, one read per readable event) or, with
TLS (``open(..., tls=context)``: the handshake runs on the non-blocking
socket first), ``TLS`` from tls_connection.py, which reads and writes
through the ``ssl.SSLSocket``. The strategy holds no state: the socket, the
queue and the lock are the connection's.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
import time
from collections import deque
from contextlib import nullcontext
from typing import TYPE_CHECKING

from ...errors import BrokerUnavailableError, LogbrokerError, RequestTimedOutError
from ...protocol.codec import FrameReader, decode, encode
from ...protocol.messages import Message
from .plain_io import PLAIN
from .tls_connection import TLS, handshake

if TYPE_CHECKING:
    import ssl

log = logging.getLogger("logbroker.client")
WATCHDOG_S = 0.1
_UNLOCKED = nullcontext()


class BrokerConnection:
    """Use ``await BrokerConnection.open(...)``; then ``request()`` / ``request_cb()``
    / ``send_only()``; ``close()`` on the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, sock: socket.socket, address: str,
                 max_frame_bytes: int, io=PLAIN) -> None:
        self.loop, self.address, self._sock, self._io = loop, address, sock, io
        self._fd = sock.fileno()
        self._reader = FrameReader(max_frame_bytes=max_frame_bytes, trusted=True)  # answers we asked for
        self._pending: dict[int, tuple] = {}  # cid -> (callback, deadline), in send order
        self._next_cid = 1
        self._wlock = threading.Lock()
        self._out: deque = deque()  # bytes the kernel did not take yet
        self._writer_armed = False
        self._loop_thread = threading.get_ident()  # constructed on the loop
        self.error: "LogbrokerError | None" = None  # set once closed
        loop.add_reader(self._fd, self._on_readable)
        self._watchdog = loop.call_later(WATCHDOG_S, self._check_timeouts)

    @classmethod
    async def open(cls, host: str, port: int, *, timeout: float, max_frame_bytes: int,
                   tls: "ssl.SSLContext | None" = None) -> "BrokerConnection":
        """Connect (and with ``tls`` do the TLS handshake, ``host`` being the
        name the broker's certificate must carry) within ``timeout`` s;
        raises ``BrokerUnavailableError`` whose message is the reason alone
        (``connection refused``, ``timed out``, ...): the caller names the
        address; or ``TlsError`` (not retriable) naming the address."""
        loop = asyncio.get_running_loop()
        sock = None
        try:
            async with asyncio.timeout(timeout):
                family, type_, proto, addr = _numeric(host, port) or \
                    _first(await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM))
                sock = socket.socket(family, type_, proto)
                sock.setblocking(False)
                await loop.sock_connect(sock, addr)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if tls is not None:
                    sock = await handshake(loop, sock, tls, host, f"{host}:{port}")
                    return cls(loop, sock, f"{host}:{port}", max_frame_bytes, TLS)
        except BaseException as exc:  # cancelled too: the socket is never left open
            if sock is not None:
                sock.close()
            if isinstance(exc, (OSError, TimeoutError, ValueError, OverflowError)):
                raise BrokerUnavailableError(_reason(exc)) from None
            raise
        return cls(loop, sock, f"{host}:{port}", max_frame_bytes)

    @property
    def closed(self) -> bool:
        return self.error is not None

    @property
    def pending(self) -> int:
        return len(self._pending)

    # -- requests (any thread) ---------------------------------------------------------------
    def request(self, message: Message, timeout: "float | None" = None) -> asyncio.Future:
        """Send ``message`` (loop thread); the future resolves to the response
        message or fails as the module docstring says."""
        fut = self.loop.create_future()
        try:
            self.request_cb(message, timeout, _Resolver(fut))
        except LogbrokerError as exc:
            fut.set_exception(exc)
        return fut

    def request_cb(self, message: Message, timeout: "float | None", callback) -> None:
        """Send ``message`` from any thread; ``callback(response, None)`` or
        ``callback(None, error)`` runs later on the loop. Raises
        ``BrokerUnavailableError`` at once if the connection is closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._wlock:
            cid = self._take_cid()
            bufs = encode(message, cid)  # may raise InvalidRequestError: nothing sent
            self._pending[cid] = (callback, deadline)
            self._write(bufs)

    def send_only(self, message: Message) -> None:
        """Send a request that gets no response (acks=0 produce); raises
        ``BrokerUnavailableError`` when the connection is closed."""
        with self._wlock:
            self._write(encode(message, self._take_cid()))

    def _take_cid(self) -> int:
        if self.error is not None:
            raise self._lost()
        cid = self._next_cid
        self._next_cid += 1
        return cid

    def _write(self, bufs: list) -> None:
        """Write now what the kernel takes, queue the rest (lock held)."""
        bufs = self._io.prepare(bufs)
        if not self._out:
            try:
                bufs = self._io.send_now(self._sock, bufs)
            except OSError as exc:
                self._failed_write(exc)
                return
            if not bufs:
                return
        self._queue(bufs)

    def _queue(self, bufs: list) -> None:
        """Queue ``bufs`` for the loop to write when the socket is writable (lock held)."""
        self._out.extend(bufs)
        if not self._writer_armed:
            self._writer_armed = True
            self._on_loop(self._arm_writer)

    def _failed_write(self, exc: OSError) -> None:
        self.error = BrokerUnavailableError(f"connection to {self.address} lost: {exc}")
        self._on_loop(self._teardown)

    def _on_loop(self, fn) -> None:
        try:
            self.loop.call_soon_threadsafe(fn)
        except RuntimeError:  # loop closed: nothing left to do
            pass

    # -- loop side --------------------------------------------------------------------------
    def _arm_writer(self) -> None:
        if self.error is None:
            self.loop.add_writer(self._fd, self._on_writable)

    def _on_writable(self) -> None:
        with self._wlock:
            while self._out and self.error is None:
                try:
                    if not self._io.send_queued(self._sock, self._out):
                        return
                except OSError as exc:
                    self._failed_write(exc)
                    return
            self._writer_armed = False
            if self._sock is not None:
                self.loop.remove_writer(self._fd)

    def _on_readable(self) -> None:
        """Read what is there: one read (plaintext), or with TLS until the
        socket has nothing or ``reads_per_event`` reads found nothing more
        decrypted (the loop calls again while the socket stays readable)."""
        io, reader, reads = self._io, self._reader, 0
        while True:
            error: "LogbrokerError | None" = None
            with self._wlock if io.locked_reads else _UNLOCKED:
                sock = self._sock
                if sock is None:
                    return
                try:
                    n = io.recv_into(sock, reader.get_buffer(), self.address)
                except LogbrokerError as exc:
                    n, error = 0, exc
                if n is None:
                    return
                more = error is None and io.pending(sock)
            if error is not None:
                if io.log_read_errors:
                    log.warning("closing connection to %s: %s", self.address, error.message)
                self.close(error)
                return
            if n == 0:
                self._closed_by_broker()
                return
            self._received(n)
            reads += 1
            if not more and reads >= io.reads_per_event:
                return

    def _closed_by_broker(self) -> None:
        hint = "" if self._reader.frames_read else self._io.closed_hint
        self.close(BrokerUnavailableError(f"connection to {self.address} closed by the broker"
                                          f"{hint}"))

    def _received(self, n: int) -> None:
        """``n`` bytes landed in the reader's buffer: dispatch the frames completed."""
        try:
            self._reader.buffer_updated(n)
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
        try:
            entry[0](envelope.message, None)
        except Exception:  # noqa: BLE001 - a bug in a callback must not kill the connection
            log.exception("response callback failed")

    def _check_timeouts(self) -> None:
        self._watchdog = None
        if self.error is not None:
            return
        now = time.monotonic()
        for cid, (callback, deadline) in list(self._pending.items()):
            if deadline is None or deadline > now:
                if deadline is not None:
                    break  # answered in order: later ones are younger
                continue
            del self._pending[cid]
            _call(callback, None, RequestTimedOutError(f"no response from {self.address} in time"))
            self.close(BrokerUnavailableError(
                f"connection to {self.address} closed after a request timed out"))
            return
        self._watchdog = self.loop.call_later(WATCHDOG_S, self._check_timeouts)

    def close(self, error: "LogbrokerError | None" = None) -> None:
        """Close (any thread; the socket is released on the loop); pending
        requests fail with ``error`` (default: ``BrokerUnavailableError``)."""
        with self._wlock:
            if self.error is None:
                self.error = error or BrokerUnavailableError(f"connection to {self.address} closed")
        if threading.get_ident() == self._loop_thread:
            self._teardown()
        else:
            self._on_loop(self._teardown)

    def _teardown(self) -> None:
        if self._sock is None:
            return
        with self._wlock:
            sock, self._sock = self._sock, None
            self._out.clear()
        self.loop.remove_reader(self._fd)
        self.loop.remove_writer(self._fd)
        if self._watchdog is not None:
            self._watchdog.cancel()
        sock.close()
        pending, self._pending = self._pending, {}
        for callback, _ in pending.values():
            _call(callback, None, self._lost())

    def _lost(self) -> LogbrokerError:
        err = self.error
        return type(err)(err.message)


def _reason(exc: BaseException) -> str:
    """Why a connect failed, in a few lower-case words."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host ({exc.strerror})"
    if isinstance(exc, OSError) and exc.errno:
        return os.strerror(exc.errno).lower()
    return str(exc) or type(exc).__name__


def _numeric(host: str, port: int) -> "tuple | None":
    """(family, type, proto, address) of an IP address literal, else None:
    no ``getaddrinfo`` (asyncio runs it on a thread pool, whose first use
    costs ~3 ms of a client's first connection)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError, TypeError):
            continue
        addr = (host, port) if family == socket.AF_INET else (host, port, 0, 0)
        return family, socket.SOCK_STREAM, socket.IPPROTO_TCP, addr
    return None


def _first(infos: list) -> tuple:
    family, type_, proto, _, addr = infos[0]
    return family, type_, proto, addr


def _call(callback, response, error) -> None:
    try:
        callback(response, error)
    except Exception:  # noqa: BLE001
        log.exception("response callback failed")


class _Resolver:
    """A ``request_cb`` callback that resolves a future."""

    __slots__ = ("fut",)

    def __init__(self, fut: asyncio.Future) -> None:
        self.fut = fut

    def __call__(self, response, error) -> None:
        if not self.fut.done():
            if error is None:
                self.fut.set_result(response)
            else:
                self.fut.set_exception(error)
