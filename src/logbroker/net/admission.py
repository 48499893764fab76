"""Which connections the broker takes: ``max_connections`` in all and
``max_connections_per_ip`` (with per-address overrides) from one address
(docs/security.md, "Quotas and limits").

``Admission.admit(ip)`` counts an accepted connection (a TLS handshake in
progress counts too) or says why it is refused; ``release(ip)`` uncounts
it. A refused connection is not just dropped: ``refuse(transport, why,
ip)`` hands it to a ``Refusal``, which reads the first request (within
``REFUSAL_S`` or ``frame_timeout_ms``, the shorter), answers it with its
response class carrying TOO_MANY_CONNECTIONS (1002) and a message naming
the limit, and closes. At most ``MAX_REFUSING`` refusals run at a time;
beyond that a refused connection is closed at once, without an answer
(the client then reports a lost connection). A refusal holds no buffer
but the shared receive scratch and the first ``HEAD_MAX`` bytes of the
request, whose header is all it decodes; it never dispatches anything.

Counters for the metrics: ``refused[reason]`` (``max_connections`` or
``per_ip``), answered or not.
"""

from __future__ import annotations

import asyncio
import logging
import struct
import time

from ..errors import TooManyConnectionsError
from ..protocol import messages as m
from ..protocol.codec import DecodeError, decode, encode
from ..limits import canonical_ip

log = logging.getLogger("logbroker.connection")
MAX_REFUSING = 8  # refusals answering at the same time
REFUSAL_S = 2.0  # longest a refusal waits for the first request (and then for the peer to close)
HEAD_MAX = 4096  # bytes of the first request a refusal keeps: its prefix and header
MAX_CONNECTIONS, PER_IP = "max_connections", "per_ip"
_PREFIX = struct.Struct(">II")


def peer_ip(transport) -> str:
    """The canonical IP of a transport's peer ("?" when it has none)."""
    peer = transport.get_extra_info("peername")
    try:
        return canonical_ip(peer[0])
    except (TypeError, ValueError, IndexError):
        return "?"


class Admission:
    """The broker's connection counts; used on its loop only."""

    def __init__(self, config) -> None:
        self.config = config
        self.max_connections = config.max_connections
        self.per_ip = config.max_connections_per_ip
        self.overrides = dict(config.max_connections_per_ip_overrides)
        self.total = 0
        self.by_ip: dict[str, int] = {}  # only addresses with connections open
        self.refusing = 0  # refusals answering now
        self.refused = {MAX_CONNECTIONS: 0, PER_IP: 0}
        self.timeout = min(REFUSAL_S, config.frame_timeout_ms / 1000)
        self.logged_at, self.unlogged = -1e9, 0  # refusals logged at most once a second

    def limit_of(self, ip: str) -> int:
        return self.overrides.get(ip, self.per_ip)

    def admit(self, ip: str) -> "str | None":
        """Count a connection from ``ip``; None, or the reason it is
        refused (``MAX_CONNECTIONS`` or ``PER_IP``), counted as refused."""
        if self.total >= self.max_connections:
            why = MAX_CONNECTIONS
        elif self.by_ip.get(ip, 0) >= self.limit_of(ip):
            why = PER_IP
        else:
            self.total += 1
            self.by_ip[ip] = self.by_ip.get(ip, 0) + 1
            return None
        self.refused[why] += 1
        return why

    def release(self, ip: str) -> None:
        """Uncount a connection ``admit`` counted."""
        self.total -= 1
        left = self.by_ip.get(ip, 1) - 1
        if left > 0:
            self.by_ip[ip] = left
        else:
            self.by_ip.pop(ip, None)

    def message(self, why: str, ip: str) -> str:
        if why == PER_IP:
            limit = self.limit_of(ip)
            setting = "max_connections_per_ip_overrides" if ip in self.overrides \
                else "max_connections_per_ip"
            return (f"too many connections from {ip}: its limit is {limit} ({setting}); "
                    "close some or retry later")
        return (f"too many connections: the broker is at max_connections "
                f"{self.max_connections}; retry later")

    def refusal(self, why: str, ip: str, scratch) -> "Refusal | None":
        """A ``Refusal`` protocol to answer a refused connection with, or
        None when ``MAX_REFUSING`` are answering already (close it at once)."""
        self._log(why, ip)
        if self.refusing >= MAX_REFUSING:
            return None
        return Refusal(self, self.message(why, ip), scratch)

    def _log(self, why: str, ip: str) -> None:
        """One warning per second at most (a client retrying, or a flood)."""
        now = time.monotonic()
        if now - self.logged_at < 1.0:
            self.unlogged += 1
            return
        more = f" ({self.unlogged} more refused since the last such line)" if self.unlogged else ""
        log.warning("refused a connection from %s: %s%s", ip, self.message(why, ip), more)
        self.logged_at, self.unlogged = now, 0

    def refuse(self, transport, why: str, ip: str, scratch) -> None:
        """Hand ``transport`` (just accepted, refused for ``why``) to a
        ``Refusal``, or abort it when too many are answering."""
        refusal = self.refusal(why, ip, scratch)
        if refusal is None:
            transport.abort()
            return
        transport.set_protocol(refusal)
        refusal.connection_made(transport)


class Refusal(asyncio.BufferedProtocol):
    """One refused connection: the first request's header is read and
    answered with TOO_MANY_CONNECTIONS, then the connection closes once the
    peer has closed its side or ``Admission.timeout`` passed (closing with
    unread bytes would reset the connection and could lose the answer)."""

    def __init__(self, admission: Admission, message: str, scratch) -> None:
        self.admission, self.message, self.scratch = admission, message, scratch
        admission.refusing += 1
        self.head: "bytearray | None" = bytearray()  # None once answered
        self.transport = None
        self.timer: "asyncio.TimerHandle | None" = None

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.timer = asyncio.get_running_loop().call_later(self.admission.timeout, self._expire)
        if self.head:
            self._parse()  # over TLS the request may come with the handshake, before this

    def get_buffer(self, sizehint: int) -> memoryview:
        return memoryview(self.scratch)

    def buffer_updated(self, nbytes: int) -> None:
        head = self.head
        if head is None:
            return  # answered: what follows is read and dropped
        head += self.scratch[:min(nbytes, HEAD_MAX - len(head))]
        if self.transport is not None:
            self._parse()

    def _parse(self) -> None:
        head = self.head
        if len(head) < 8:
            return
        length, hlen = _PREFIX.unpack_from(head)
        if length < 4 or hlen > min(length - 4, HEAD_MAX - 8):
            self._close("its first request is not a frame this broker answers")
        elif len(head) >= 8 + hlen:
            self._answer(bytes(head[4:8 + hlen]))

    def _answer(self, frame: bytes) -> None:
        """Answer the request whose frame (payload left out) is ``frame``."""
        try:
            env = decode(frame)
            cid, api = env.cid, env.message.API
        except DecodeError as exc:  # a Produce without its payload, or garbage
            if exc.cid is None:
                self._close("its first request is unreadable")
                return
            cid, api = exc.cid, exc.api
        response = m.RESPONSES.get(api, m.HandshakeResponse)(
            error=TooManyConnectionsError.code, message=self.message)
        self.head = None
        transport = self.transport
        for buf in encode(response, cid):
            transport.write(buf)
        if transport.can_write_eof():
            transport.write_eof()  # the peer sees the answer, then the end

    def eof_received(self) -> bool:
        return False  # the transport closes (after writing the answer)

    def _expire(self) -> None:
        self.timer = None
        self._close("not closed by the peer in time" if self.head is None
                    else "no request in time")

    def _close(self, why: str) -> None:
        log.debug("refusal: closing: %s", why)
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc) -> None:
        self.forget()

    def forget(self) -> None:
        """Free the refusal's slot (once): its connection is gone."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.admission is not None:
            self.admission.refusing -= 1
            self.admission = None
