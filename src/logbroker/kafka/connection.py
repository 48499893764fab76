"""One Kafka client connection: frames in, answers out, in request order.

The shape of ``broker/connection.py`` for the Kafka protocol: each frame is
decoded (``codec.decode_request``), turned into a ``Plan`` by its API's
handler (``serve_meta`` / ``serve_data``), run through the broker's
``Handlers`` (so the same edge checks, storage and long polls serve both
protocols) and answered with ``codec.encode_response_buffers``.

- Order: Kafka clients pipeline, and answers go out strictly in the order
  of the requests. Requests start in the order read: a Produce is appended
  in the loop turn that read it (its acks=-1 answer completes from the
  fsync's callback, as ours), unless an earlier request of the same read
  became a task, when it becomes a task too.
- No answer for an acks=0 Produce (Kafka's rule); a connection whose acks=0
  Produce hit a partition this broker does not lead is closed.
- Decode errors: an ApiVersions request at a newer version gets Kafka's v0
  UNSUPPORTED_VERSION answer (api_versions.py); any other unsupported API
  or version, and any malformed frame, closes the connection once the
  answers before it are written (Kafka closes too). Nothing of a bad request
  reaches the handlers; a bug in a handler is logged and aborts only this
  connection.
- Quotas (broker/quotas.py) as on our listener: a Kafka connection is
  ``User:ANONYMOUS`` (no SASL yet); a Produce's bytes are metered as read,
  a Fetch's when answered; the answer carries ``throttle_time_ms`` and the
  connection reads nothing for that long (KIP-219); a fetch already in
  debt is answered empty at once.
- Limits as our listener's: ``max_frame_bytes`` (a larger size prefix
  closes the connection), ``frame_timeout_ms`` (a frame begun must arrive
  whole), ``idle_timeout_ms``, and reading pauses while more than
  ``max_inflight_bytes`` or ``MAX_PENDING`` requests are unanswered or the
  socket's write buffer is full. Memory follows the bytes received
  (``KafkaFrameReader``); an idle connection holds no buffer.

The listener uses ``pause()``, ``drain()``, ``close(why)`` and
``idle_check(now)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque

from ..broker.produce import ProduceAnswer
from ..broker.quotas import ANONYMOUS
from ..broker.sendfile import sendfile
from ..errors import LogbrokerError
from ..protocol import messages as m
from ..storage.results import FileSlice
from .api_versions import unsupported_version_reply
from .codec import decode_request, encode_response_buffers
from .errors import KafkaDecodeError, KafkaUnsupportedVersionError
from .framing import KafkaFrameReader
from .plan import CLOSE, NO_ANSWER

log = logging.getLogger("logbroker.kafka")
MAX_PENDING = 64
_CLOSE_AFTER = object()  # an answer slot: close once the answers before it are out


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, listener) -> None:
        self.listener, self.broker = listener, listener.broker
        cfg = self.broker.config
        self.reader = KafkaFrameReader(cfg.max_frame_bytes, scratch=self.broker.scratch)
        self.transport = None
        self.pending: deque[_Answer] = deque()
        self.inflight_bytes = 0
        self.read_paused = self.paused = False
        self.can_write: "asyncio.Future | None" = None
        self.writer: "asyncio.Task | None" = None
        self.idle: "asyncio.Future | None" = None
        self.peer, self.ip = "?", None
        self.last_frame_at = 0.0
        self.partial_since: "float | None" = None
        self.mute: "asyncio.TimerHandle | None" = None  # throttled: reading stops until then

    # -- the listener's API ----------------------------------------------------------
    def pause(self) -> None:
        """Read no more requests; those already read are still answered."""
        self.paused = True
        self._flow()

    async def drain(self) -> None:
        """Return once every request read is answered or the connection is gone."""
        while (self.pending or self.writer is not None) and self.transport is not None \
                and not self.transport.is_closing():
            if self.idle is None:
                self.idle = asyncio.get_running_loop().create_future()
            await self.idle

    def close(self, why: str) -> None:
        if self.transport is not None and not self.transport.is_closing():
            log.info("closing Kafka connection from %s: %s", self.peer, why)
            self.transport.close()

    def abort(self, why: str) -> None:
        if self.transport is not None:
            log.debug("aborting Kafka connection from %s: %s", self.peer, why)
            self.transport.abort()

    def idle_check(self, now: float) -> None:
        cfg = self.broker.config
        if self.partial_since is not None and now - self.partial_since > cfg.frame_timeout_ms / 1000:
            self.close("request not completed within frame_timeout_ms")
        elif not self.pending and now - self.last_frame_at > cfg.idle_timeout_ms / 1000:
            self.close("idle")

    # -- asyncio callbacks -------------------------------------------------------------
    def connection_made(self, transport) -> None:
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"
        self.last_frame_at = asyncio.get_running_loop().time()
        if self.listener.register(self, transport):
            self.transport = transport

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self.transport is None:
            return
        reader = self.reader
        try:
            reader.buffer_updated(nbytes)
        except KafkaDecodeError as exc:  # a size prefix out of range: the stream is lost
            self.pending.append(_Answer(None, 0, _CLOSE_AFTER, why=str(exc)))
            self.pause()
            self._pump()
            return
        now = asyncio.get_running_loop().time()
        tasks_ok, got = True, False
        while (frame := reader.next_frame()) is not None:
            got = True
            self.last_frame_at = now
            self.inflight_bytes += len(frame)
            answer = self._start(frame, tasks_ok)
            self.pending.append(answer)
            if isinstance(answer.waiting, asyncio.Task):
                tasks_ok = False
            if answer.response is _CLOSE_AFTER:
                self.pause()  # nothing after a bad frame is read
                break
        if not reader.in_frame:
            self.partial_since = None
        elif self.partial_since is None or got:
            self.partial_since = now  # a new frame began in these bytes
        self._pump()

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc) -> None:
        self.listener.unregister(self)
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
        self.transport = None

    def pause_writing(self) -> None:
        if self.can_write is None:
            self.can_write = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self.can_write is not None and not self.can_write.done():
            self.can_write.set_result(None)
        self.can_write = None

    # -- work ----------------------------------------------------------------------------
    def _start(self, frame, tasks_ok: bool) -> "_Answer":
        """Decode one request and start it (see the module docstring)."""
        size = len(frame)
        try:
            header, body = decode_request(frame)
        except KafkaUnsupportedVersionError as exc:
            reply = None if exc.header is None else unsupported_version_reply(exc.header)
            if reply is None:
                return _Answer(None, size, _CLOSE_AFTER, why=exc.message)
            return _Answer(None, size, [reply])
        except KafkaDecodeError as exc:
            return _Answer(None, size, _CLOSE_AFTER, why=exc.message)
        try:
            plan = self.listener.handler(header.api_key)(self.listener.site, header, body)
        except LogbrokerError as exc:  # a value our messages refuse (limits)
            return _Answer(None, size, _CLOSE_AFTER, why=exc.message)
        except Exception:  # noqa: BLE001 - a bug: this connection closes, the broker goes on
            log.exception("planning a Kafka %s v%d request of %s failed", header.api_key,
                          header.api_version, self.peer)
            return _Answer(None, size, _CLOSE_AFTER, why="internal error")
        answer = _Answer(header, size, None, plan.answer)
        msg = plan.request
        if msg.__class__ in _METERED and self.broker.quotas is not None:
            msg, answer.throttle = self.broker.quotas.meter(msg, ANONYMOUS,
                                                            asyncio.get_running_loop().time())
            if answer.throttle > 0:
                self._mute(answer.throttle)
            if msg.__class__ is m.FetchResponse:  # over the fetch quota: answered empty
                answer.response = msg
                return answer
        if msg is None:
            answer.response = _ANSWERED_NONE
        elif msg.__class__ is m.Produce and tasks_ok:
            out = self.broker.dispatch_now(msg)
            if isinstance(out, ProduceAnswer) or asyncio.iscoroutine(out):
                answer.waiting = out if isinstance(out, ProduceAnswer) else self._task(out)
            else:
                answer.response = out
        else:
            answer.waiting = self._task(self.broker.dispatch(msg))
        answer.frame = frame  # records are views of the frame: kept until answered
        return answer

    def _task(self, coro) -> asyncio.Task:
        return asyncio.get_running_loop().create_task(coro)

    def _mute(self, ms: int) -> None:
        """Read nothing for ``ms`` from now; a longer mute under way stands."""
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
            if self.partial_since is not None:
                self.partial_since = asyncio.get_running_loop().time()

    def _pump(self) -> None:
        """Write every ready answer at the head of ``pending``, in order."""
        if self.writer is not None or self.transport is None:
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
                        return
                    a.response, a.waiting = a.waiting.result(), None
                pending.popleft()
                self.inflight_bytes -= a.size
                if a.throttle:
                    a.response, mute = self.broker.quotas.answer(
                        a.response, a.throttle, ANONYMOUS, asyncio.get_running_loop().time())
                    if mute:
                        self._mute(mute)
                if a.response is _CLOSE_AFTER:
                    self.close(f"unreadable request: {a.why}")
                    return
                buffers = a.buffers()
                a.frame = None
                if buffers is CLOSE:
                    self.close("acks=0 produce to a partition this broker does not lead")
                    return
                if buffers is NO_ANSWER or transport.is_closing():
                    continue
                if self.can_write is not None or any(isinstance(b, FileSlice) for b in buffers):
                    self.writer = asyncio.get_running_loop().create_task(self._write(buffers))
                    return
                for buf in buffers:
                    transport.write(buf)
        except Exception:  # noqa: BLE001 - a bug must not leave a callback exception behind
            log.exception("answering Kafka client %s failed", self.peer)
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
            for buf in buffers:
                if isinstance(buf, FileSlice):
                    await sendfile(self.transport, buf)
                else:
                    self.transport.write(buf)
            if self.can_write is not None:
                await self.can_write
        except (OSError, RuntimeError) as exc:
            self.abort(f"lost while answering: {exc!r}")
            return
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001
            log.exception("answering Kafka client %s failed", self.peer)
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


_ANSWERED_NONE = object()  # a plan without a request: its answer takes None
_METERED = (m.Produce, m.Fetch)  # the requests quotas apply to


class _Answer:
    """One request read, in order: its header (None: no Kafka answer of
    its own), frame size, our response or what will give it, and the plan's
    ``answer`` that makes the Kafka body of it."""

    __slots__ = ("header", "size", "response", "waiting", "hooked", "make", "why", "frame",
                 "throttle")

    def __init__(self, header, size: int, response, make=None, *, why: str = "") -> None:
        self.header, self.size, self.response, self.make = header, size, response, make
        self.waiting, self.hooked, self.why, self.frame = None, False, why, None
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)

    def buffers(self):
        """The buffers to write, or NO_ANSWER / CLOSE."""
        if self.header is None:
            return self.response  # a reply encoded already (ApiVersions' newer-version rule)
        body = self.make(None if self.response is _ANSWERED_NONE else self.response)
        if body is NO_ANSWER or body is CLOSE:
            return body
        h = self.header
        return encode_response_buffers(h, h.api_key, h.api_version, body)
