"""One client connection: frames in, responses out, in request order.

Requests are started as soon as they are read, in order (so the appends of
pipelined produce requests share an fsync), and answered strictly in order.
A produce runs in the loop turn that read it and is answered from its
fsync's callback, without a task (produce.py); other requests run as tasks.
Answers are written as soon as they and every earlier one are ready; only
a sendfile or a full write buffer needs the writer task. Over TLS
(broker/tls.py) a fetch's file slices are read (``pread``, in the loop
turn, as ``sendfile`` would read them) and written as bytes, unchanged:
``sendfile`` would bypass the encryption.
Reading pauses while too many bytes or requests are unanswered
(backpressure) and while the socket's write buffer is full.

Authentication (auth.py): each request passes the connection's
``Session`` as it is read, in order; SASL steps and user administration
are answered there, anonymous requests refused when ``auth_required``,
requests checked against the ACLs when they are enforced (a denial is
answered there too), and a failed authentication closes the connection
once answered.

Memory: an idle connection holds no buffer (the broker's readers share one
receive buffer; a frame in progress holds only the bytes that arrived), and
no task or future exists until there is a request to answer.

The server uses only the public API: ``pause()`` (stop reading),
``drain()`` (wait until what was read is answered), ``close(why)``,
``abort(why)`` and ``idle_check(now)``.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections import deque
from typing import TYPE_CHECKING

from ..errors import LogbrokerError
from ..protocol import messages as m
from ..protocol.codec import DecodeError, FrameReader, decode, encode
from ..coordinator.requests import PEER
from ..storage.results import FileSlice
from .acl_rules import Partial
from .auth import INTERCEPTED, Session
from .produce import CLOSE_CONNECTION, ProduceAnswer
from .metrics_stats import ReadPositions
from .quotas import principal_of
from .sendfile import read_slices, sendfile

if TYPE_CHECKING:
    from .server import Broker

log = logging.getLogger("logbroker.connection")
MAX_PENDING = 64
_METERED = (m.Produce, m.Fetch)  # the requests quotas apply to


class ClientConnection(asyncio.BufferedProtocol):
    __slots__ = ("broker", "reader", "transport", "pending", "inflight_bytes", "read_paused",
                 "paused", "can_write", "writer", "peer", "last_frame_at", "partial_since", "idle",
                 "tls", "session", "ip", "mute", "reads")

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker
        self.reader = FrameReader(max_frame_bytes=broker.config.max_frame_bytes,
                                  scratch=broker.scratch)
        self.transport: "asyncio.Transport | None" = None
        self.pending: deque[_Answer] = deque()  # the requests read and not yet answered, in order
        self.inflight_bytes = 0
        self.read_paused = False  # reading is paused (backpressure or pause())
        self.paused = False  # pause() was called: reading stays paused
        self.can_write: "asyncio.Future | None" = None  # while the write buffer is full
        self.writer: "asyncio.Task | None" = None  # writing an answer that must wait
        self.idle: "asyncio.Future | None" = None  # drain() waits for pending to empty
        self.peer = "?"
        self.last_frame_at = 0.0
        self.partial_since: "float | None" = None  # when the incomplete frame began
        self.tls = False  # the transport is TLS: no sendfile
        # authentication (auth.py); over TLS the first request may be read before
        # connection_made names the peer (then it is not loopback: safe)
        self.session = Session(broker.handlers.auth, "?", self._auth_failed, self._denied)
        self.ip: "str | None" = None  # the peer's address while counted (server.register)
        self.mute: "asyncio.TimerHandle | None" = None  # throttled: reading stops until then
        self.reads: "ReadPositions | None" = None  # records read, with traffic counted (metrics)

    # -- public API (the server's) ----------------------------------------------------
    def pause(self) -> None:
        """Read no more requests; those already read are still answered."""
        self.paused = True
        self._flow()

    async def drain(self) -> None:
        """Return once every request read so far is answered (or the
        connection is gone); never raises."""
        while (self.pending or self.writer is not None) and self.transport is not None \
                and not self.transport.is_closing():
            if self.idle is None:
                self.idle = asyncio.get_running_loop().create_future()
            await self.idle

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
        elif self.session.expired(now):
            self.close("authentication not completed within frame_timeout_ms")
        elif not self.pending and now - self.last_frame_at > cfg.idle_timeout_ms / 1000:
            self.close("idle")

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("sslcontext") is not None
        self.last_frame_at = asyncio.get_running_loop().time()
        if not self.broker.register(self, transport):
            self.transport = None  # refused: answered TOO_MANY_CONNECTIONS or closed (admission.py)
            return
        self.session.set_peer(self.peer)
        log.debug("connection from %s", self.peer)

    def _auth_failed(self) -> None:
        metrics = self.broker.metrics
        if metrics is not None:
            metrics.auth_failed()

    def _denied(self, kind: type) -> None:
        metrics = self.broker.metrics
        if metrics is not None:
            metrics.authz_denied(kind)

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
        tasks_ok = True
        while (frame := reader.next_frame()) is not None:
            self.last_frame_at = now
            self.inflight_bytes += len(frame)
            answer = self._start(frame, loop, tasks_ok)
            self.pending.append(answer)
            if isinstance(answer.waiting, asyncio.Task):
                tasks_ok = False
        if not reader.in_frame:
            self.partial_since = None
        elif self.partial_since is None or reader.frames_read != before:
            self.partial_since = now  # a new frame began in these bytes
        self._pump()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc) -> None:
        self.broker.unregister(self)
        for answer in self.pending:
            if isinstance(answer.waiting, asyncio.Task):
                answer.waiting.cancel()
        if self.writer is not None:
            self.writer.cancel()
        if self.mute is not None:
            self.mute.cancel()
        self._set_idle()
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
        stop = self.paused or self.mute is not None or self.inflight_bytes > limit \
            or len(self.pending) >= MAX_PENDING
        if self.transport is None or self.transport.is_closing() or stop == self.read_paused:
            return
        self.read_paused = stop
        if stop:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()
            self.partial_since = None if self.partial_since is None else \
                asyncio.get_running_loop().time()  # the frame's clock stood still meanwhile

    def _start(self, frame, loop, tasks_ok: bool) -> "_Answer":
        """Decode one request and start it: answered now, by a future (a
        produce waiting for its fsync) or by a task. ``tasks_ok`` False: an
        earlier request of this read became a task that has not started yet,
        so this one must be a task too (requests start in the order read)."""
        size = len(frame)
        try:
            env = decode(frame)
        except DecodeError as exc:
            if exc.cid is None:
                return _Answer(-1, size, None)
            code = exc.cause.code if exc.cause is not None else exc.code
            cls = m.RESPONSES.get(exc.api, m.HandshakeResponse)
            return _Answer(exc.cid, size, cls(error=code, message=exc.message))
        msg, throttle = env.message, 0
        if self.broker.quotas is not None and msg.__class__ in _METERED:  # quotas.py
            msg, throttle = self.broker.quotas.meter(msg, principal_of(self.session.principal),
                                                     loop.time())
            if throttle > 0:
                self._mute(throttle)
            if msg.__class__ is m.FetchResponse:  # over the fetch quota: answered empty
                return _Answer(env.cid, size, msg)
        if self.session.screen or msg.__class__ in INTERCEPTED:
            got = self.session.intercept(msg, loop.time())
            if got.__class__ is tuple:  # answered here (auth.py): SASL, users, ACLs, a refusal
                if asyncio.iscoroutine(got[0]):  # a user or ACL change: answered once stored
                    return _Answer(env.cid, size, None, self._task(loop, got[0]))
                answer = _Answer(env.cid, size, got[0])
                answer.close_after, answer.throttle = got[1], throttle
                return answer
            if got.__class__ is Partial:  # some parts denied: the others served, then merged
                self._count_reads(got.request)
                answer = _Answer(env.cid, size, None,
                                 self._task(loop, got.answer(self.broker.dispatch(got.request))))
                answer.throttle = throttle
                return answer
            if got is not None:  # the request narrowed to what the principal may see
                msg = got
        self._count_reads(msg)
        answer = self._run(env.cid, size, msg, loop, tasks_ok)
        answer.throttle = throttle
        return answer

    def _count_reads(self, msg) -> None:
        """A Fetch about to be served: count the records its client read
        since its previous one (metrics_stats.ReadPositions), when traffic
        is counted (metrics or the console on)."""
        if msg.__class__ is m.Fetch:
            if self.reads is None:
                traffic = self.broker.handlers.traffic
                if traffic is None:
                    return
                self.reads = ReadPositions(traffic)
            self.reads.fetch(msg.parts)

    def _run(self, cid: int, size: int, msg, loop, tasks_ok: bool) -> "_Answer":
        if not tasks_ok:
            return _Answer(cid, size, None, self._task(loop, self.broker.dispatch(msg)))
        out = self.broker.dispatch_now(msg)
        if asyncio.iscoroutine(out):
            return _Answer(cid, size, None, self._task(loop, out))
        if isinstance(out, ProduceAnswer):
            return _Answer(cid, size, None, out)
        return _Answer(cid, size, out)

    # -- quotas (quotas.py) ----------------------------------------------------------------
    def _throttled(self, response, throttle: int):
        """``response`` carrying its throttle (Quotas.answer: a fetch's bytes
        are accounted now, and its throttle mutes the connection from now)."""
        response, mute = self.broker.quotas.answer(response, throttle, principal_of(
            self.session.principal), asyncio.get_running_loop().time())
        if mute:
            self._mute(mute)
        return response

    def _mute(self, ms: int) -> None:
        """Read nothing for ``ms`` from now (KIP-219: the throttled client
        is slowed, never disconnected); a longer mute under way stands."""
        loop = asyncio.get_running_loop()
        when = loop.time() + ms / 1000
        if self.mute is not None:
            if self.mute.when() >= when:
                return
            self.mute.cancel()
        self.mute = loop.call_at(when, self._unmute)
        self._flow()

    def _unmute(self) -> None:
        self.mute = None
        self._flow()

    def _task(self, loop, coro) -> asyncio.Task:
        ctx = contextvars.copy_context()
        ctx.run(PEER.set, self.peer)  # a JoinGroup records the member's host
        return loop.create_task(coro, context=ctx)

    def _pump(self) -> None:
        """Write every answer at the head of ``pending`` that is ready, in
        order; a head still waiting calls back here when it is done. A
        response with a file slice (sendfile) or a full write buffer hands
        over to the writer task, which calls back here when it is through."""
        if self.writer is not None:
            return
        pending, transport = self.pending, self.transport
        try:
            while pending:
                a = pending[0]
                if a.waiting is not None:
                    if not a.waiting.done():
                        if not a.hooked:
                            a.hooked = True
                            a.waiting.add_done_callback(self._ready)
                        return
                    if a.waiting.cancelled():
                        return  # the connection is going away
                    a.response, a.waiting = a.waiting.result(), None
                pending.popleft()
                self.inflight_bytes -= a.size
                if a.throttle:
                    a.response = self._throttled(a.response, a.throttle)
                if a.cid < 0:
                    self.close("unreadable request")
                    return
                if a.close_after:  # a failed authentication: its answer, then close
                    if a.response is not None:
                        for buf in encode(a.response, a.cid):
                            transport.write(buf)
                    self.close("authentication failed")
                    return
                if a.response is CLOSE_CONNECTION:
                    self.close("acks=0 produce to a partition this broker does not lead")
                    return
                if a.response is None or transport.is_closing():
                    continue
                buffers = encode(a.response, a.cid)
                slices = any(isinstance(b, FileSlice) for b in buffers)
                if slices and self.tls:
                    buffers, slices = read_slices(buffers), False
                    if buffers is None:
                        self.abort("a segment was shorter than its fetch slice")
                        return
                if self.can_write is not None or slices:
                    self.writer = asyncio.get_running_loop().create_task(self._write(buffers))
                    return
                for buf in buffers:
                    transport.write(buf)
        except Exception:  # noqa: BLE001 - a bug must not leave a callback exception behind
            log.exception("answering %s failed", self.peer)
            self.abort("internal error")
        finally:
            if self.writer is None:
                self._flow()
                if not pending:
                    self._set_idle()

    def _ready(self, _fut) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self._pump()

    async def _write(self, buffers: list) -> None:
        try:
            await self._send(buffers)
        except (OSError, RuntimeError) as exc:  # the peer left mid-response (e.g. in a sendfile)
            self.abort(f"lost while answering: {exc!r}")
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug must not leave a task exception unretrieved
            log.exception("answering %s failed", self.peer)
            self.abort("internal error")
            return
        finally:
            self.writer = None
        self._ready(None)

    def _set_idle(self) -> None:
        if self.idle is not None:
            if not self.idle.done():
                self.idle.set_result(None)
            self.idle = None

    async def _send(self, buffers: list) -> None:
        for buf in buffers:
            if isinstance(buf, FileSlice):
                await sendfile(self.transport, buf)
            else:
                self.transport.write(buf)
        if self.can_write is not None:
            await self.can_write


class _Answer:
    """One request read, in order: its cid and frame size, and its response
    (``waiting``: the task or ``ProduceAnswer`` that will give it)."""

    __slots__ = ("cid", "size", "response", "waiting", "hooked", "close_after", "throttle")

    def __init__(self, cid: int, size: int, response, waiting=None):
        self.cid, self.size, self.response, self.waiting, self.hooked = \
            cid, size, response, waiting, False
        self.close_after = False  # close the connection once this is answered
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)
