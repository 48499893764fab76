"""One client connection: frames in, responses out, in request order.

Requests are started as soon as they are read, in order (so the appends of
pipelined produce requests share an fsync), and answered strictly in order.
A produce runs in the loop turn that read it and is answered from its
fsync's callback, without a task (produce.py); other requests run as tasks.
The ordering, writing (sendfile; over TLS, broker/tls.py, slices read
into bytes), backpressure, timeouts and the servers' API are
``answering.AnsweringConnection``'s, shared with the Kafka listener; this
module is our protocol's part: framing, decoding, the session's screening,
quotas' metering and dispatch.

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
from typing import TYPE_CHECKING

from ..errors import LogbrokerError
from ..protocol import messages as m
from ..protocol.codec import DecodeError, FrameReader, decode, encode
from ..security.acl_rules import Partial
from .answering import Answer, AnsweringConnection
from ..security.auth import INTERCEPTED
from ..api.produce import CLOSE_CONNECTION, ProduceAnswer
from ..metrics.stats import ReadPositions
from ..security.quotas import principal_of

if TYPE_CHECKING:
    from ..broker.server import Broker

_METERED = (m.Produce, m.Fetch)  # the requests quotas apply to


class ClientConnection(AnsweringConnection):
    __slots__ = ("reader", "reads")

    def __init__(self, broker: "Broker") -> None:
        super().__init__(broker, broker)
        self.reader = FrameReader(max_frame_bytes=broker.config.max_frame_bytes,
                                  scratch=broker.scratch)
        self.reads: "ReadPositions | None" = None  # records read, with traffic counted (metrics)

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

    # -- work ----------------------------------------------------------------------------
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

    def _encode(self, a: "_Answer"):
        """The buffers of a ready answer (AnsweringConnection._pump)."""
        if a.cid < 0:
            self.close("unreadable request")
            return False
        if a.close_after:  # a failed authentication: its answer, then close
            if a.response is not None:
                for buf in encode(a.response, a.cid):
                    self.transport.write(buf)
            self.close("authentication failed")
            return False
        if a.response is CLOSE_CONNECTION:
            self.close("acks=0 produce to a partition this broker does not lead")
            return False
        if a.response is None:
            return None
        return encode(a.response, a.cid)


class _Answer(Answer):
    """One request read, in order (answering.Answer), and its cid."""

    __slots__ = ("cid", "close_after")

    def __init__(self, cid: int, size: int, response, waiting=None):
        self.cid, self.size, self.response, self.waiting, self.hooked = \
            cid, size, response, waiting, False
        self.close_after = False  # close the connection once this is answered
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)
