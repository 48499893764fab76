"""A fault-injecting TCP proxy for loopback tests (no test here).

How a cluster test wires it: broker i listens on its own port but advertises
proxy i's address (--advertised-address), so every client and every peer
reaches broker i only through proxy i; broker i reaches etcd through its own
proxy to the one etcd. Cutting proxy i isolates broker i from clients and
peers, cutting its etcd proxy isolates it from etcd.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import struct
import threading

from bench.common.procs import free_port


class _ProxyConn:
    __slots__ = ("client", "upstream", "task", "rst")

    def __init__(self, client: socket.socket) -> None:
        self.client = client
        self.upstream: "socket.socket | None" = None
        self.task: "asyncio.Task | None" = None
        self.rst = False  # close with RST (SO_LINGER 0) instead of FIN


def _close(conn: _ProxyConn) -> None:
    """Close both sockets of ``conn`` (with RST if ``conn.rst``); idempotent."""
    for s in (conn.client, conn.upstream):
        if s is not None and s.fileno() != -1:
            if conn.rst:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            s.close()


class _Reset(Exception):
    """A side of a proxied connection failed: reset the other side too."""


class TcpProxy:
    """A fault-injecting TCP proxy on 127.0.0.1:``listen_port`` (0: a free
    port) to ``target`` ("host:port" or (host, port); settable, for new
    connections, e.g. after the target restarted on another port). It runs
    its own asyncio loop in a daemon thread; every method returns once the
    change is in effect.

    - ``cut("blackhole")``: a network partition. Existing connections stall
      (nothing is forwarded either way; the sockets stay open); new
      connections are accepted and held unconnected. ``heal()`` resumes: what
      was held is delivered, as TCP's retransmissions would after a short
      partition.
    - ``cut("reset")``: existing connections are closed with RST on both
      sides, and new connections are refused (the listening socket stops
      listening but keeps its port, so ``heal()`` listens on it again).
    - ``cut("replies")``: requests still reach the target, but nothing is
      forwarded back to the clients (held, as in a blackhole): the target
      acted on a request whose answer is lost. Then ``cut("reset")`` drops
      the connections with the answers unsent, or ``heal()`` delivers them.
    - A target that refuses a connection: the client's side is reset.

    ``bytes_to_target`` / ``bytes_to_client`` count the bytes forwarded
    each way, ``accepted`` the connections accepted."""

    def __init__(self, target=None, listen_port: int = 0) -> None:
        self.target = target
        self.mode: "str | None" = None  # None: forwarding
        self.bytes_to_target = self.bytes_to_client = self.accepted = 0
        self._conns: set[_ProxyConn] = set()
        self._listener = self._bind(listen_port)
        self.listen_port: int = self._listener.getsockname()[1]
        self._listening = True
        self._accepting: "asyncio.Task | None" = None
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"TcpProxy-{self.listen_port}",
                                        daemon=True)
        self._thread.start()
        self._call(self._begin())

    @property
    def target(self) -> "tuple[str, int] | None":
        return self._target

    @target.setter
    def target(self, value) -> None:
        if isinstance(value, str):
            host, _, port = value.rpartition(":")
            value = (host, int(port))
        self._target = None if value is None else (value[0], int(value[1]))

    @property
    def address(self) -> str:
        """"127.0.0.1:PORT", what a broker behind this proxy advertises."""
        return f"127.0.0.1:{self.listen_port}"

    @property
    def connections(self) -> int:
        return len(self._conns)

    def cut(self, mode: str = "blackhole") -> None:
        if mode not in ("blackhole", "reset", "replies"):
            raise ValueError(f"cut mode must be 'blackhole', 'reset' or 'replies', not {mode!r}")
        self._call(self._set_mode(mode))

    def heal(self) -> None:
        self._call(self._set_mode(None))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._call(self._shutdown())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()
        self._listener.close()

    def __enter__(self) -> "TcpProxy":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- the loop's side -------------------------------------------------------------------
    @staticmethod
    def _bind(port: int) -> socket.socket:
        # An explicit port (not 0), so that shutdown() of the listener keeps it
        # bound: Linux releases a port that bind() picked itself.
        for _ in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port or free_port()))
            except OSError as exc:
                s.close()
                if port or exc.errno != errno.EADDRINUSE:
                    raise
                continue
            s.listen(128)
            s.setblocking(False)
            return s
        raise OSError(errno.EADDRINUSE, "no free port for the proxy")

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def _call(self, coro, timeout: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _begin(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._replying = asyncio.Event()  # cleared: "replies", bytes to the client held
        self._replying.set()
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            accepting = asyncio.ensure_future(loop.sock_accept(self._listener))
            try:
                client, _ = await asyncio.shield(accepting)
            except asyncio.CancelledError:  # stopped listening: a socket accepted just now is closed
                if accepting.done() and not accepting.cancelled() and accepting.exception() is None:
                    accepting.result()[0].close()
                accepting.cancel()
                raise
            client.setblocking(False)
            self.accepted += 1
            conn = _ProxyConn(client)
            self._conns.add(conn)
            conn.task = loop.create_task(self._serve(conn))

    async def _serve(self, conn: _ProxyConn) -> None:
        loop = asyncio.get_running_loop()
        try:
            await self._flowing.wait()  # blackhole: held, not connected yet
            conn.upstream = socket.socket()
            conn.upstream.setblocking(False)
            try:
                if self._target is None:
                    raise OSError(errno.ECONNREFUSED, "no target")
                await loop.sock_connect(conn.upstream, self._target)
            except OSError:
                conn.rst = True
                return
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(self._pump(conn.client, conn.upstream, "bytes_to_target"))
                    tg.create_task(self._pump(conn.upstream, conn.client, "bytes_to_client"))
            except* _Reset:
                conn.rst = True
        finally:
            self._conns.discard(conn)
            _close(conn)

    async def _pump(self, src: socket.socket, dst: socket.socket, counter: str) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                data = await loop.sock_recv(src, 1 << 16)
            except OSError:
                raise _Reset() from None
            await self._flowing.wait()  # blackhole: hold what was read
            if counter == "bytes_to_client":
                await self._replying.wait()
            if not data:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            try:
                await loop.sock_sendall(dst, data)
            except OSError:
                raise _Reset() from None
            setattr(self, counter, getattr(self, counter) + len(data))

    async def _set_mode(self, mode: "str | None") -> None:
        self.mode = mode
        if mode == "reset":
            await self._stop_listening()
            await self._end_conns(rst=True)
        elif not self._listening:
            self._listener.listen(128)
            self._listening = True
            self._accepting = asyncio.get_running_loop().create_task(self._accept())
        if mode in (None, "replies"):
            self._flowing.set()
        else:
            self._flowing.clear()
        if mode == "replies":
            self._replying.clear()
        else:
            self._replying.set()

    async def _stop_listening(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            await asyncio.gather(self._accepting, return_exceptions=True)
            self._accepting = None
        if self._listening:
            # Linux: shutdown() of a listening socket stops listening (new
            # connections are refused) and keeps the port bound.
            self._listener.shutdown(socket.SHUT_RD)
            self._listening = False

    async def _end_conns(self, rst: bool) -> None:
        tasks = []
        for conn in list(self._conns):
            conn.rst = conn.rst or rst
            conn.task.cancel()
            tasks.append(conn.task)
        await asyncio.gather(*tasks, return_exceptions=True)
        for conn in list(self._conns):  # a task cancelled before it ran never reached its finally
            self._conns.discard(conn)
            _close(conn)

    async def _shutdown(self) -> None:
        await self._stop_listening()
        await self._end_conns(rst=False)
