"""A logical link to a broker: connect, handshake, reconnect, call.

``BrokerLink`` owns at most one ``BrokerConnection`` at a time. ``connection()``
returns the live one or (re)connects: it tries every address of its list in
turn, with exponential backoff between rounds, until the caller's deadline;
concurrent callers share one attempt. The list is a callable, read at every
round: the bootstrap addresses by default; the routing layer (routing.py)
gives a link to one broker that broker's address from the metadata, and the
control link the live brokers it knows, then the bootstrap list. An address
that failed us (``drop(avoid=True)``) is tried last in the next round.
``call()`` sends one request and raises the response's top-level error as
the registered exception. With ``options.sasl`` every connection is
authenticated (client/net/auth.py) before it is used; a refusal is not
retriable and ends the attempt at once. A broker at a connection limit
answers the handshake with TOO_MANY_CONNECTIONS: retried like an
unreachable broker, and raised as ``TooManyConnectionsError`` (with the
broker's message) when the attempt gives up.

Options (``ClientOptions``) are shared by Producer, Consumer and Admin.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...errors import (BrokerUnavailableError, ClientClosedError, ClusterUnavailableError,
                       LogbrokerError, TooManyConnectionsError, UnsupportedVersionError, for_code)
from ...protocol import messages as m
from .auth import SaslCredentials, authenticate
from .backoff import Backoff
from .connection import BrokerConnection

if TYPE_CHECKING:
    import ssl


async def cancel_and_wait(task: "asyncio.Future | None") -> None:
    """Cancel ``task`` (if any and not done) and wait until it has ended;
    its cancellation or failure is of no interest to the caller."""
    if task is None or task.done():
        return
    task.cancel()
    try:
        await task
    except BaseException:  # noqa: BLE001 - cancelled or failed: either is fine
        pass


def parse_bootstrap(bootstrap: "str | list[str] | tuple") -> list[tuple[str, int]]:
    """``"host:port"``, ``"h1:p1,h2:p2"`` or a list of those -> [(host, port)].
    A missing port means 9555; IPv6 hosts go in brackets (``[::1]:9555``).
    Raises ``ValueError`` for an empty list, an empty or unprintable host or
    a port that is not 1..65535."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        if item.startswith("["):
            host, _, rest = item[1:].partition("]")
            port = rest.lstrip(":") or "9555"
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "9555")
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) <= 65535 or not host \
                or not host.isprintable() or any(c.isspace() for c in host):
            raise ValueError(f"bad bootstrap address {item!r} (want host:port, port 1..65535)")
        out.append((host, int(port)))
    if not out:
        raise ValueError("bootstrap names no broker")
    return out


@dataclass(frozen=True)
class ClientOptions:
    """Connection settings common to every client (seconds, not ms)."""

    bootstrap: tuple = (("127.0.0.1", 9555),)
    client_id: str = "logbroker-python"
    connect_timeout: float = 5.0
    request_timeout: float = 30.0
    reconnect_backoff: float = 0.05
    reconnect_backoff_max: float = 1.0
    max_frame_bytes: int = 256 << 20
    tls: "ssl.SSLContext | None" = None  # TLS to every broker (client_options' tls_* settings)
    sasl: "SaslCredentials | None" = None  # authenticate every connection (client/net/auth.py)

    @classmethod
    def make(cls, bootstrap, **kwargs) -> "ClientOptions":
        return cls(bootstrap=tuple(parse_bootstrap(bootstrap)), **kwargs)


class BrokerLink:
    """One reconnecting connection (see module docstring); loop-bound."""

    def __init__(self, options: ClientOptions, addresses=None, name: str = "") -> None:
        """``addresses()``: the (host, port) pairs to try, in order (default:
        the bootstrap list); ``name`` what messages call the peer when the
        list is empty (``broker 3``)."""
        self.options = options
        self._addresses = addresses or (lambda: options.bootstrap)
        self.name = name
        self._conn: "BrokerConnection | None" = None
        self._connecting: "asyncio.Task | None" = None
        self._closed = False
        self._failures = 0
        self._next_try = 0.0
        self._avoid: "tuple | None" = None  # an address to try last next time
        self.last_reason = ""  # why the last connection attempt failed (no address prefix)
        self._refused = False  # ... and it was the broker's TOO_MANY_CONNECTIONS
        self.server = ""
        self.broker_id = -1  # of the broker connected to (its handshake)
        self.address: "tuple[str, int] | None" = None  # connected to

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed

    def current(self) -> "BrokerConnection | None":
        """The live connection or None (never connects)."""
        return self._conn if self.connected else None

    async def connection(self, timeout: "float | None" = None) -> BrokerConnection:
        """The live connection, or one connection attempt (every bootstrap
        address once, after the backoff since the last failed attempt) within
        ``timeout`` s (default ``connect_timeout``). Raises
        ``BrokerUnavailableError`` (``cannot connect to ADDRS within T s:
        REASON``) or ``ClientClosedError``; concurrent callers share one
        attempt."""
        if self.connected:
            return self._conn
        self._check_open()
        if self._connecting is None or self._connecting.done():
            self._connecting = asyncio.ensure_future(self._connect_round())
            self._connecting.add_done_callback(_retrieve)
        timeout = self.options.connect_timeout if timeout is None else timeout
        try:
            async with asyncio.timeout(max(timeout, 0.0)):
                return await asyncio.shield(self._connecting)
        except TimeoutError:
            raise self._gave_up(self.unreachable(timeout)) from None

    def _gave_up(self, message: str) -> LogbrokerError:
        """The error of giving up connecting: TOO_MANY_CONNECTIONS if the
        broker refused the last attempt so (retriable), else BROKER_UNAVAILABLE."""
        return (TooManyConnectionsError if self._refused else BrokerUnavailableError)(message)

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the client is closed")

    def unreachable(self, seconds: "float | None" = None) -> str:
        """``cannot connect to ADDRS[ within T s]: REASON``: the message of
        giving up (after ``seconds``), REASON the last attempt's failure."""
        addrs = ", ".join(f"{h}:{p}" for h, p in self._addresses()) or self.name or "the cluster"
        within = "" if seconds is None else f" within {_secs(seconds)} s"
        return f"cannot connect to {addrs}{within}: {self.last_reason or 'timed out'}"

    async def _connect_round(self) -> BrokerConnection:
        delay = self._next_try - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        self._check_open()
        addresses = list(dict.fromkeys(self._addresses()))
        if self._avoid in addresses and len(addresses) > 1:
            addresses.remove(self._avoid)
            addresses.append(self._avoid)
        many = len(addresses) > 1
        if not addresses:
            self.last_reason = "not among the live brokers"
        for host, port in addresses:
            try:
                conn = await self._open(host, port)
            except LogbrokerError as exc:
                if not exc.retriable:
                    raise
                self.last_reason = f"{host}:{port}: {exc.message}" if many else exc.message
                self._refused = isinstance(exc, TooManyConnectionsError)
                continue
            self._conn, self._failures, self.last_reason, self._refused = conn, 0, "", False
            self.address, self._avoid = (host, port), None
            return conn
        self._failures += 1
        backoff = Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max)
        self._next_try = time.monotonic() + backoff.delay(self._failures)
        raise self._gave_up(self.unreachable())

    async def _open(self, host: str, port: int) -> BrokerConnection:
        opts = self.options
        conn = await BrokerConnection.open(host, port, timeout=opts.connect_timeout,
                                           max_frame_bytes=opts.max_frame_bytes, tls=opts.tls)
        try:
            resp = await conn.request(m.Handshake(client_id=opts.client_id), opts.connect_timeout)
        except BaseException:  # failed or cancelled (the client closing): not left open
            conn.close()
            raise
        if resp.error:
            conn.close()
            err = for_code(resp.error)(resp.message)
            if isinstance(err, (UnsupportedVersionError, TooManyConnectionsError)):
                raise err  # a connection limit: retriable, with the broker's message
            raise BrokerUnavailableError(f"handshake with {host}:{port} refused: {err}")
        if opts.sasl is not None:
            try:
                await authenticate(conn, opts.sasl, opts.connect_timeout)
            except BaseException:
                conn.close()
                raise
        self.server, self.broker_id = resp.server, resp.broker_id
        return conn

    async def call(self, message: m.Message, timeout: "float | None" = None, *,
                   retry: bool = True) -> m.Response:
        """Send ``message`` and return its response within ``timeout`` s
        (default ``request_timeout``). With ``retry`` (idempotent requests)
        a lost connection or a retriable top-level error is retried until the
        deadline. Raises the response's error as its registered exception,
        ``RequestTimedOutError``, or ``BrokerUnavailableError`` (when no
        connection could be made: ``cannot connect to ADDRS within
        TIMEOUT s: REASON``, TIMEOUT being this call's)."""
        timeout = self.options.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        lost: "LogbrokerError | None" = None  # the last failure of a connection we had
        backoff = Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max)
        while True:
            connecting = True
            try:
                left = deadline - time.monotonic()
                conn = await self.connection(min(left, self.options.connect_timeout))
                connecting = False
                resp = await conn.request(message, max(deadline - time.monotonic(), 0.001))
                if resp.error:
                    raise for_code(resp.error)(resp.message)
                return resp
            except LogbrokerError as exc:
                if not (retry and exc.retriable) or time.monotonic() >= deadline:
                    if connecting and isinstance(exc, (BrokerUnavailableError,
                                                       TooManyConnectionsError)):
                        if lost is not None and not self.last_reason:
                            raise type(lost)(f"{lost.message} (retried for {_secs(timeout)} s)")
                        raise self._gave_up(self.unreachable(timeout)) from None
                    raise
                if not connecting:
                    lost = exc
                if isinstance(exc, ClusterUnavailableError):
                    self.drop(avoid=True)  # this broker cannot reach etcd: ask another
                await asyncio.sleep(min(backoff.next(), max(deadline - time.monotonic(), 0)))

    def drop(self, error: "LogbrokerError | None" = None, *, avoid: bool = False) -> None:
        """Close the current connection (pending requests fail); the next
        ``connection()`` reconnects, trying the address just dropped last
        if ``avoid``."""
        if self._conn is not None:
            self._conn.close(error)
            self._conn = None
            if avoid:
                self._avoid = self.address

    async def aclose(self) -> None:
        """Close for good; later calls raise ``ClientClosedError``."""
        self._closed = True
        await cancel_and_wait(self._connecting)
        self.drop()


def _secs(seconds: float) -> str:
    return f"{seconds:.1f}" if seconds >= 0.1 else f"{seconds:.3f}"


def _retrieve(task: asyncio.Task) -> None:
    """Mark a background task's outcome as seen (its waiters report it)."""
    if not task.cancelled():
        task.exception()
