"""TLS for a broker connection: the handshake, and the SSLSocket's reads and writes.

``handshake()`` wraps a connected non-blocking socket and drives the
handshake on the loop (``SSLWantReadError`` / ``SSLWantWriteError`` wait
for the socket); a failure is a ``TlsError`` naming the address and the
reason (untrusted certificate, host name mismatch, refused client
certificate), or a retriable ``BrokerUnavailableError`` if the broker just
closed the connection.

``TLS`` (a ``TlsIO``) is the ``BrokerConnection``'s socket strategy over
TLS (connection.py keeps its contract; ``PlainIO`` there is the plaintext
one). What differs:

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
from collections import deque

from ...errors import BrokerUnavailableError, TlsError
from ...tls import handshake_error, reason

_WOULD_BLOCK = (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError, InterruptedError)


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


class TlsIO:
    """An ``ssl.SSLSocket``'s reads and writes (see the module docstring;
    the contract of each method is ``connection.PlainIO``'s)."""

    closed_hint = " before answering (does it require a client certificate? pass tls_cert " \
                  "and tls_key)"
    locked_reads = True  # OpenSSL: never a read and a write at once
    reads_per_event = 64  # records read per readable event (more while OpenSSL holds bytes)
    log_read_errors = True

    @staticmethod
    def prepare(bufs: list) -> list:
        """A request's buffers as one (queued whole if the socket takes only part)."""
        return bufs if len(bufs) == 1 and isinstance(bufs[0], bytes) else [b"".join(bufs)]

    @staticmethod
    def send_now(sock: ssl.SSLSocket, bufs: list) -> list:
        data = bufs[0]
        sent = _send(sock, data) or 0
        if sent >= len(data):
            return []
        return [memoryview(data)[sent:] if sent else data]

    @staticmethod
    def send_queued(sock: ssl.SSLSocket, out: deque) -> bool:
        data = out[0]
        sent = _send(sock, data)
        if sent is None:
            return False
        if sent < len(data):
            out[0] = memoryview(data)[sent:]
        else:
            out.popleft()
        return True

    @staticmethod
    def recv_into(sock: ssl.SSLSocket, buf, address: str) -> "int | None":
        try:
            return sock.recv_into(buf)
        except _WOULD_BLOCK:
            return None
        except ssl.SSLZeroReturnError:
            return 0
        except ssl.SSLError as exc:
            raise TlsError(f"TLS error on the connection to {address}: {reason(exc)}") from None
        except OSError as exc:
            raise BrokerUnavailableError(f"connection to {address} lost: {exc}") from None

    @staticmethod
    def pending(sock: ssl.SSLSocket) -> bool:
        return bool(sock.pending())


TLS = TlsIO()


def _send(sock: ssl.SSLSocket, data) -> "int | None":
    """The bytes the socket took, None if it would block (``OSError`` when lost)."""
    try:
        return sock.send(data)
    except _WOULD_BLOCK:
        return None
