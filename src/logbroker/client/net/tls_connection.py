"""A broker connection over TLS: the handshake and the SSLSocket's reads and writes.

``handshake()`` wraps a connected non-blocking socket and drives the
handshake on the loop (``SSLWantReadError`` / ``SSLWantWriteError`` wait
for the socket); a failure is a ``TlsError`` naming the address and the
reason (untrusted certificate, host name mismatch, refused client
certificate), or a retriable ``BrokerUnavailableError`` if the broker just
closed the connection.

``TlsBrokerConnection`` keeps ``BrokerConnection``'s contract; what differs:

- an ``SSLSocket`` has no ``sendmsg``: a request's buffers are joined and
  sent as one; what the socket does not take is queued whole, and retried
  with the same bytes first (OpenSSL's rule for a write that must wait);
- OpenSSL is not safe for a read and a write at once from two threads, so
  reads take the write lock too (writes come from any thread);
- OpenSSL decrypts whole records and may hold bytes the socket no longer
  signals: a readable event reads until ``pending()`` is empty.
"""

from __future__ import annotations

import asyncio
import socket
import ssl

from ...errors import BrokerUnavailableError, TlsError
from ...tls import handshake_error, reason
from .connection import BrokerConnection, log

_WOULD_BLOCK = (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError)
_READS_PER_EVENT = 64  # records read per readable event (more while OpenSSL holds decrypted bytes)


async def handshake(loop: asyncio.AbstractEventLoop, sock: socket.socket, context: ssl.SSLContext,
                    host: str, address: str) -> ssl.SSLSocket:
    """``sock`` (connected, non-blocking) wrapped and through the handshake
    with ``host``'s certificate checked; closes it and raises on failure."""
    tls = context.wrap_socket(sock, server_hostname=host, do_handshake_on_connect=False)
    try:
        while True:
            try:
                tls.do_handshake()
                return tls
            except ssl.SSLWantReadError:
                await _ready(loop, tls.fileno(), write=False)
            except ssl.SSLWantWriteError:
                await _ready(loop, tls.fileno(), write=True)
    except BaseException as exc:
        tls.close()
        if isinstance(exc, (OSError, ValueError)):
            raise handshake_error(exc, address) from None
        raise


async def _ready(loop: asyncio.AbstractEventLoop, fd: int, write: bool) -> None:
    fut = loop.create_future()
    add, remove = (loop.add_writer, loop.remove_writer) if write else \
        (loop.add_reader, loop.remove_reader)
    add(fd, lambda: fut.done() or fut.set_result(None))
    try:
        await fut
    finally:
        remove(fd)


class TlsBrokerConnection(BrokerConnection):
    """``BrokerConnection`` over an ``ssl.SSLSocket`` (see the module docstring)."""

    def _write(self, bufs: list) -> None:
        data = bufs[0] if len(bufs) == 1 and isinstance(bufs[0], bytes) else b"".join(bufs)
        if not self._out:
            try:
                sent = self._sock.send(data)
            except _WOULD_BLOCK:
                sent = 0
            except OSError as exc:
                self._failed_write(exc)
                return
            if sent >= len(data):
                return
            if sent:
                data = memoryview(data)[sent:]
        self._queue([data])

    def _on_writable(self) -> None:
        with self._wlock:
            while self._out and self.error is None:
                data = self._out[0]
                try:
                    sent = self._sock.send(data)
                except _WOULD_BLOCK:
                    return
                except OSError as exc:
                    self._failed_write(exc)
                    return
                if sent < len(data):
                    self._out[0] = memoryview(data)[sent:]
                else:
                    self._out.popleft()
            self._writer_armed = False
            if self._sock is not None:
                self.loop.remove_writer(self._fd)

    def _on_readable(self) -> None:
        reader = self._reader
        reads = 0
        while True:
            error = None
            with self._wlock:
                sock = self._sock
                if sock is None:
                    return
                try:
                    n = sock.recv_into(reader.get_buffer())
                except _WOULD_BLOCK:
                    return
                except ssl.SSLZeroReturnError:
                    n = 0
                except ssl.SSLError as exc:
                    error = TlsError(f"TLS error on the connection to {self.address}: "
                                     f"{reason(exc)}")
                except OSError as exc:
                    error = BrokerUnavailableError(f"connection to {self.address} lost: {exc}")
                more = error is None and sock.pending()
            if error is not None:
                log.warning("closing connection to %s: %s", self.address, error.message)
                self.close(error)
                return
            if n == 0:
                self._closed_by_broker()
                return
            self._received(n)
            reads += 1
            if not more and reads >= _READS_PER_EVENT:
                return  # the socket is still readable: the loop calls again

    def _closed_by_broker(self) -> None:
        hint = "" if self._reader.frames_read else \
            " before answering (does it require a client certificate? pass tls_cert and tls_key)"
        self.close(BrokerUnavailableError(f"connection to {self.address} closed by the broker"
                                          f"{hint}"))
