"""A plaintext broker connection's socket strategy (connection.py): the
request's buffers go out with ``sendmsg`` (no copy), one read per readable
event. ``tls_connection.TlsIO`` is its TLS twin; both are stateless (the
socket, the queue and the lock are the connection's).
"""

from __future__ import annotations

import socket
from collections import deque

from ...errors import BrokerUnavailableError

_MAX_IOV = 512


class PlainIO:
    """A plaintext socket's reads and writes (stateless; the TLS twin is
    tls_connection.TlsIO). ``send_now`` / ``send_queued`` raise ``OSError``
    when the connection is lost; ``recv_into`` returns the bytes read, 0 at
    the end of the stream, None when nothing is there, and raises the
    ``LogbrokerError`` that closes the connection."""

    closed_hint = " before answering (is it a TLS listener? then pass tls_ca)"
    locked_reads = False  # reads may run while another thread writes
    reads_per_event = 1
    log_read_errors = False

    @staticmethod
    def prepare(bufs: list) -> list:
        return bufs

    @staticmethod
    def send_now(sock: socket.socket, bufs: list) -> list:
        """Write what the kernel takes now; returns the rest."""
        try:
            sent = sock.sendmsg(bufs) if len(bufs) <= _MAX_IOV else 0
        except (BlockingIOError, InterruptedError):
            sent = 0
        return _skip(bufs, sent)

    @staticmethod
    def send_queued(sock: socket.socket, out: deque) -> bool:
        """Write from the head of ``out`` (dropping what was written); False
        when the socket takes no more now."""
        bufs = list(out)[:_MAX_IOV]
        try:
            sent = sock.sendmsg(bufs)
        except (BlockingIOError, InterruptedError):
            return False
        for _ in range(len(bufs)):
            out.popleft()
        rest = _skip(bufs, sent)
        out.extendleft(reversed(rest))
        return not rest

    @staticmethod
    def recv_into(sock: socket.socket, buf, address: str) -> "int | None":
        try:
            return sock.recv_into(buf)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as exc:
            raise BrokerUnavailableError(f"connection to {address} lost: {exc}") from None

    @staticmethod
    def pending(sock: socket.socket) -> bool:
        return False


PLAIN = PlainIO()


def _skip(bufs: list, sent: int) -> list:
    """``bufs`` without their first ``sent`` bytes."""
    for i, buf in enumerate(bufs):
        n = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
        if sent < n:
            rest = bufs[i:]
            if sent:
                rest[0] = memoryview(buf)[sent:]
            return rest
        sent -= n
    return []
