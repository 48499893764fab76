"""Ordered answering: what our listener's connections and the Kafka
listener's share (net/connection.py, net/kafka_connection.py).

``AnsweringConnection`` is the part of a client connection that does not
depend on the protocol: the ``pending`` deque of requests read and not yet
answered, in order; the pump that writes each answer as soon as it and
every earlier one are ready; the writer task for a response with file
slices (``sendfile``; over TLS the slices are read into bytes instead:
``sendfile`` would bypass the encryption) or a full write buffer; the
limits (reading pauses while more than ``max_inflight_bytes`` or
``MAX_PENDING`` requests are unanswered, while the socket's write buffer
is full, while throttled by a quota, while a request ``hold``s it (a
produce whose batches are inflated off the loop: nothing read after it
starts before it is appended, as Kafka takes a connection's requests one
at a time), and after ``pause()``); the frame and
idle timeouts; the session (auth.py) and its metrics; and the public API
the servers use: ``pause()``, ``drain()``, ``close(why)``, ``abort(why)``,
``idle_check(now)``.

A protocol's subclass reads and decodes frames, starts requests (appending
``Answer`` objects to ``pending`` in the order read, then calling
``_pump()``), and turns a ready answer into buffers: ``_encode(answer)``
returns the buffers to write, None (nothing to write for it) or False (it
closed the connection: stop). ``registry`` (our ``Broker`` or the
``KafkaListener``) counts connections: ``register(conn, transport)`` (False:
refused, let go of the transport) and ``unregister(conn)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from functools import partial

from ..errors import LogbrokerError
from ..metrics.stats import ReadPositions
from ..protocol import messages as m
from ..storage.results import FileSlice
from ..security.auth import Session
from ..security.quotas import principal_of
from .refusals import log_refusals
from .sendfile import cork, read_slices, send_slices

MAX_PENDING = 64  # requests unanswered before reading pauses


def _auth_failed(broker) -> None:
    """A session's failed authentication, counted (metrics)."""
    if broker.metrics is not None:
        broker.metrics.auth_failed()


def _throttled(broker) -> None:
    """A session's attempt refused by the password-guessing throttle, counted (metrics)."""
    if broker.metrics is not None:
        broker.metrics.auth_throttled()


def _denied(broker, kind: type) -> None:
    """A session's request refused by authorization, counted (metrics)."""
    if broker.metrics is not None:
        broker.metrics.authz_denied(kind)


class Answer:
    """One request read, in order: its frame ``size``, its ``response`` or
    what will give it (``waiting``: a task or a ``ProduceAnswer``, which the
    pump hooks once, ``hooked``), and the throttle its answer carries (ms,
    or quotas.ACCOUNT). Subclasses add their protocol's fields and set every
    slot in their own ``__init__`` (no chained call on the hot path)."""

    __slots__ = ("size", "response", "waiting", "hooked", "throttle", "close_after")


class AnsweringConnection(asyncio.BufferedProtocol):
    """The shared core (module docstring). ``KIND`` names the protocol in log lines."""

    __slots__ = ("broker", "registry", "reader", "transport", "pending", "inflight_bytes", "read_paused",
                 "paused", "can_write", "writer", "idle", "peer", "last_frame_at",
                 "partial_since", "tls", "session", "ip", "muted", "reads", "held", "inflation")
    KIND = ""
    log = logging.getLogger("logbroker.connection")

    def __init__(self, broker, registry, reader) -> None:
        """``reader``: the protocol's sans-I/O frame reader (``get_buffer``,
        ``buffer_updated``, ``next_frame``, ``in_frame``, ``discard``)."""
        self.broker, self.registry, self.reader = broker, registry, reader
        self.transport: "asyncio.Transport | None" = None
        self.pending: deque = deque()  # the requests read and not yet answered, in order
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
        # the session's callbacks hold the broker, not this connection: no
        # reference cycle, so a closed connection is freed at once, not by a GC pass
        self.session = Session(broker.services.auth, "?", partial(_auth_failed, broker),
                               partial(_denied, broker), partial(_throttled, broker))
        self.session.tls = getattr(registry, "tls", False)  # the listener's (PLAIN over TLS)
        self.ip: "str | None" = None  # the peer's address while counted (registry)
        self.muted: "asyncio.TimerHandle | None" = None  # throttled: reading stops until then
        self.reads: "ReadPositions | None" = None  # records read, with traffic counted (metrics)
        self.held: "asyncio.Task | None" = None  # a request that holds reading (hold())
        self.inflation = None  # this connection's inflation credit (api/inflation.py), made on first use

    # -- public API (the servers') ------------------------------------------------------
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
            self.log.info("closing %sconnection from %s: %s", self.KIND, self.peer, why)
            self.transport.close()

    def abort(self, why: str) -> None:
        """Close at once, dropping what is unsent."""
        if self.transport is not None:
            self.log.debug("aborting %sconnection from %s: %s", self.KIND, self.peer, why)
            self.transport.abort()

    def idle_check(self, now: float) -> None:
        """Close the connection if a frame is late, its authentication
        outlived ``frame_timeout_ms``, or it has been idle too long."""
        cfg = self.broker.config
        if self.partial_since is not None and now - self.partial_since > cfg.frame_timeout_ms / 1000:
            self.close("request not completed within frame_timeout_ms")
        elif self.session.expired(now):
            self.close("authentication not completed within frame_timeout_ms")
        elif not self.pending and now - self.last_frame_at > cfg.idle_timeout_ms / 1000:
            self.close("idle")

    # -- asyncio callbacks ----------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.tls = transport.get_extra_info("sslcontext") is not None
        self.last_frame_at = asyncio.get_running_loop().time()
        if not self.registry.register(self, transport):
            self.transport = None  # refused (admission.py): answered or closed there
            return
        self.session.set_peer(self.peer)
        self.log.debug("%sconnection from %s", self.KIND, self.peer)
        if self.pending:  # read before this call (start_tls hands over data first): answer it
            self._pump()

    def eof_received(self) -> bool:
        return False

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        """Frames in: each whole frame is started (``_start``) in the order
        read; a request whose answer closes the connection stops reading."""
        if self.transport is None and self.ip is None:  # refused (a TLS one is counted
            return  # by its handshake and may get bytes before connection_made)
        reader = self.reader
        try:
            reader.buffer_updated(nbytes)
        except LogbrokerError as exc:  # a size prefix out of range: the stream is lost
            self._lost(exc)
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        got = self._frames(loop, now)
        if not reader.in_frame:
            self.partial_since = None
        elif self.partial_since is None or got:
            self.partial_since = now  # a new frame began in these bytes
        self._pump()

    def _frames(self, loop, now: float) -> bool:
        """Start each whole frame read, in order, until none is left, one
        closes the connection or one holds reading; whether any was."""
        reader, tasks_ok, got = self.reader, True, False
        while self.held is None and (frame := reader.next_frame()) is not None:
            got = True
            self.last_frame_at = now
            self.inflight_bytes += len(frame)
            answer = self._start(frame, loop, tasks_ok)
            self.pending.append(answer)
            if isinstance(answer.waiting, asyncio.Task):
                tasks_ok = False
            if answer.close_after:
                self.pause()  # nothing after a bad frame or a failed authentication is read
                break
        return got

    def hold(self, coro) -> asyncio.Task:
        """Run ``coro`` as a task that holds reading: no frame read after
        this one starts, and no more bytes are read, until it calls
        ``unhold()`` or ends; then the frames already read are started."""
        task = self.task(coro)
        self.held = task
        task.add_done_callback(self.unhold)
        self._flow()
        return task

    def unhold(self, task: "asyncio.Task | None" = None) -> None:
        """The holding request (``task``, else whichever holds) is through:
        go on reading (soon, not inside the caller's turn)."""
        if self.held is not None and (task is None or task is self.held):
            self.held = None
            asyncio.get_running_loop().call_soon(self._resume)

    def _resume(self) -> None:
        if self.held is not None or self.paused or self.transport is None \
                or self.transport.is_closing():
            return
        self._frames(asyncio.get_running_loop(), asyncio.get_running_loop().time())
        self._pump()

    def connection_lost(self, exc) -> None:
        self.registry.unregister(self)
        self.reader.discard()  # its buffers go now, not when a GC pass finds the connection
        if self.session.fetch_session is not None:  # its partitions are watched no more
            self.session.fetch_session.close()
            self.session.fetch_session = None
        for answer in self.pending:
            if isinstance(answer.waiting, asyncio.Task):
                answer.waiting.cancel()
        if self.writer is not None:
            self.writer.cancel()
        if self.muted is not None:
            self.muted.cancel()
        self._set_idle()
        if self.can_write is not None and not self.can_write.done():
            self.can_write.cancel()
        self.log.debug("%sconnection from %s closed", self.KIND, self.peer)

    def pause_writing(self) -> None:
        if self.can_write is None:
            self.can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.can_write is not None and not self.can_write.done():
            self.can_write.set_result(None)
        self.can_write = None

    # -- limits -----------------------------------------------------------------------------
    def _flow(self) -> None:
        limit = self.broker.config.max_inflight_bytes
        stop = self.paused or self.muted is not None or self.inflight_bytes > limit \
            or len(self.pending) >= MAX_PENDING or self.held is not None
        if self.transport is None or self.transport.is_closing() or stop == self.read_paused:
            return
        self.read_paused = stop
        if stop:
            self.transport.pause_reading()
        else:
            self.transport.resume_reading()
            if self.partial_since is not None:  # the frame's clock stood still meanwhile
                self.partial_since = asyncio.get_running_loop().time()

    def _throttled(self, response, throttle: int):
        """``response`` carrying its throttle (Quotas.answer: a fetch's bytes
        are accounted now, and its throttle mutes the connection from now)."""
        response, mute = self.broker.quotas.answer(response, throttle, principal_of(
            self.session.principal), asyncio.get_running_loop().time())
        if mute:
            self.mute(mute)
        return response

    def mute(self, ms: int) -> None:
        """Read nothing for ``ms`` from now (KIP-219: the throttled client
        is slowed, never disconnected); a longer mute under way stands."""
        loop = asyncio.get_running_loop()
        when = loop.time() + ms / 1000
        if self.muted is not None:
            if self.muted.when() >= when:
                return
            self.muted.cancel()
        self.muted = loop.call_at(when, self._unmute)
        self._flow()

    def _unmute(self) -> None:
        self.muted = None
        self._flow()

    def task(self, coro) -> asyncio.Task:
        """Run ``coro`` (a request's handling) as a task of the loop."""
        return asyncio.get_running_loop().create_task(coro)

    def count_reads(self, msg) -> None:
        """A Fetch about to be served: count the records its client read
        since its previous one (metrics.stats.ReadPositions), when traffic
        is counted (metrics or the console on)."""
        if msg.__class__ is m.Fetch:
            if self.reads is None:
                traffic = self.broker.services.traffic
                if traffic is None:
                    return
                self.reads = ReadPositions(traffic)
            self.reads.fetch(msg.parts)

    # -- the protocol's part ----------------------------------------------------------------
    def _start(self, frame, loop, tasks_ok: bool) -> Answer:
        """Decode one frame and start its request (api/pipeline.py). The protocol's."""
        raise NotImplementedError

    def _lost(self, exc) -> None:
        """The byte stream cannot be framed any more (``exc``). The protocol's."""
        raise NotImplementedError

    # -- writing, in order ------------------------------------------------------------------
    def _encode(self, answer: Answer):
        """The buffers of a ready answer, None (nothing to write) or False
        (the connection is closing: stop). The protocol's."""
        raise NotImplementedError

    def _pump(self) -> None:
        """Write every answer at the head of ``pending`` that is ready, in
        order; a head still waiting calls back here when it is done. A
        response with a file slice (sendfile) or a full write buffer hands
        over to the writer task, which calls back here when it is through."""
        if self.writer is not None or self.transport is None:
            return
        pending, transport = self.pending, self.transport
        debug = self.log.isEnabledFor(logging.DEBUG)
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
                if self.reads is not None and a.response.__class__ is m.FetchResponse \
                        and a.response.resolved:
                    self.reads.resolved(a.response.resolved)  # where its next Fetch counts from
                if debug:
                    log_refusals(self.log, self, a.response)
                buffers = self._encode(a)
                if buffers is False:
                    return
                if buffers is None or transport.is_closing():
                    continue
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
            self.log.exception("answering %s%s failed", self.KIND, self.peer)
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
        corked = False
        try:
            if sum(1 for buf in buffers if buf.__class__ is FileSlice) > 1:
                corked = cork(self.transport, True)  # segments filled across the slices
            await send_slices(self.transport, buffers)
            if corked:  # sent now, not after the cork's 200 ms
                corked = False
                cork(self.transport, False)
            if self.can_write is not None:
                await self.can_write
        except (OSError, RuntimeError) as exc:  # the peer left mid-response (e.g. in a sendfile)
            self.abort(f"lost while answering: {exc!r}")
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - a bug must not leave a task exception unretrieved
            self.log.exception("answering %s%s failed", self.KIND, self.peer)
            self.abort("internal error")
            return
        finally:
            self.writer = None
            if corked:
                cork(self.transport, False)
        self._ready(None)

    def _set_idle(self) -> None:
        if self.idle is not None:
            if not self.idle.done():
                self.idle.set_result(None)
            self.idle = None
