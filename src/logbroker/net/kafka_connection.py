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
- Authentication and ACLs (docs/kafka.md §4.7): the connection's
  ``Session`` (broker/auth.py) answers SaslHandshake / SaslAuthenticate
  (planned as our messages, serve_sasl.py) and checks every other planned
  request as on our listener (a denial, a ``Partial`` of the permitted
  parts, a narrowed Metadata), except that a ListGroups without describe
  on the cluster lists the groups the principal may describe (Kafka's
  rule: a ``Narrowed``); a failed authentication is answered, then
  the connection closes. With ``auth_required``, before authentication
  only ApiVersions and the SASL APIs are read: any other request closes
  the connection unanswered (Kafka's rule), counted as a failure. After a
  SaslHandshake v0 the SCRAM messages are raw size-prefixed frames
  (``raw_sasl``), answered the same way.
- Quotas (broker/quotas.py) as on our listener, for the session's
  principal (``User:ANONYMOUS`` until authenticated); a Produce's bytes are metered as read,
  a Fetch's when answered; the answer carries ``throttle_time_ms`` and the
  connection reads nothing for that long (KIP-219); a fetch already in
  debt is answered empty at once.
- Limits as our listener's: ``max_frame_bytes`` (a larger size prefix
  closes the connection), ``frame_timeout_ms`` (a frame begun must arrive
  whole), ``idle_timeout_ms``, and reading pauses while more than
  ``max_inflight_bytes`` or ``MAX_PENDING`` requests are unanswered or the
  socket's write buffer is full. Memory follows the bytes received
  (``KafkaFrameReader``); an idle connection holds no buffer.

The ordering, writing, limits, timeouts and the listener's API
(``pause()``, ``drain()``, ``close(why)``, ``idle_check(now)``) are
``broker/answering.AnsweringConnection``'s, shared with our listener; this
module is the Kafka protocol's part: framing, decoding, planning,
screening, metering.
"""

from __future__ import annotations

import asyncio
import logging

from ..security.acl_rules import Narrowed, Partial
from .answering import Answer, AnsweringConnection
from ..security.auth import INTERCEPTED
from ..api.produce import ProduceAnswer
from ..security.quotas import principal_of
from ..errors import LogbrokerError
from ..protocol import messages as m
from ..kafka.api_versions import unsupported_version_reply
from ..kafka.apis import API_VERSIONS, SASL_AUTHENTICATE, SASL_HANDSHAKE
from ..kafka.codec import decode_request, encode_response_buffers
from ..kafka.errors import KafkaDecodeError, KafkaUnsupportedVersionError
from ..kafka.framing import KafkaFrameReader
from ..kafka.plan import CLOSE, NO_ANSWER

_CLOSE_AFTER = object()  # an answer slot: close once the answers before it are out


class KafkaConnection(AnsweringConnection):
    __slots__ = ("listener", "reader", "raw_sasl")
    KIND = "Kafka "
    log = logging.getLogger("logbroker.kafka")

    def __init__(self, listener) -> None:
        super().__init__(listener.broker, listener)
        self.listener = listener
        self.reader = KafkaFrameReader(self.broker.config.max_frame_bytes,
                                       scratch=self.broker.scratch)
        self.raw_sasl = False  # after a SaslHandshake v0: frames are raw SASL tokens

    # -- asyncio callbacks -------------------------------------------------------------
    def get_buffer(self, sizehint: int) -> memoryview:
        return self.reader.get_buffer(sizehint)

    def buffer_updated(self, nbytes: int) -> None:
        if self.transport is None and self.ip is None:  # refused (a TLS one is counted
            return  # by its handshake and may get bytes before connection_made)
        reader = self.reader
        try:
            reader.buffer_updated(nbytes)
        except KafkaDecodeError as exc:  # a size prefix out of range: the stream is lost
            self.pending.append(_Answer(None, 0, _CLOSE_AFTER, why=_unreadable(exc.message)))
            self.pause()
            self._pump()
            return
        loop = asyncio.get_running_loop()
        now = loop.time()
        tasks_ok, got = True, False
        while (frame := reader.next_frame()) is not None:
            got = True
            self.last_frame_at = now
            self.inflight_bytes += len(frame)
            answer = self._start(frame, loop, tasks_ok)
            self.pending.append(answer)
            if isinstance(answer.waiting, asyncio.Task):
                tasks_ok = False
            if answer.response is _CLOSE_AFTER or answer.close_after:
                self.pause()  # nothing after a bad frame or a failed authentication is read
                break
        if not reader.in_frame:
            self.partial_since = None
        elif self.partial_since is None or got:
            self.partial_since = now  # a new frame began in these bytes
        self._pump()

    # -- work ----------------------------------------------------------------------------
    def _start(self, frame, loop, tasks_ok: bool) -> "_Answer":
        """Decode one request and start it (see the module docstring)."""
        size = len(frame)
        if self.raw_sasl:
            return self._raw_token(frame, size, loop)
        try:
            header, body = decode_request(frame)
        except KafkaUnsupportedVersionError as exc:
            reply = None if exc.header is None else unsupported_version_reply(exc.header)
            if reply is None:
                return _Answer(None, size, _CLOSE_AFTER, why=_unreadable(exc.message))
            return _Answer(None, size, [reply])
        except KafkaDecodeError as exc:
            return _Answer(None, size, _CLOSE_AFTER, why=_unreadable(exc.message))
        session = self.session
        if session.gated and header.api_key not in _BEFORE_AUTH:  # Kafka closes, unanswered
            session.failed()
            return _Answer(None, size, _CLOSE_AFTER, why=f"api key {header.api_key} before "
                           "SASL authentication (the broker requires it)")
        try:
            plan = self.listener.handler(header.api_key)(self.listener.site, header, body)
        except LogbrokerError as exc:  # a value our messages refuse (limits)
            return _Answer(None, size, _CLOSE_AFTER, why=_unreadable(exc.message))
        except Exception:  # noqa: BLE001 - a bug: this connection closes, the broker goes on
            self.log.exception("planning a Kafka %s v%d request of %s failed", header.api_key,
                               header.api_version, self.peer)
            return _Answer(None, size, _CLOSE_AFTER, why=_unreadable("internal error"))
        answer = _Answer(header, size, None, plan.answer)
        msg = plan.request
        if msg.__class__ in _METERED and self.broker.quotas is not None:
            msg, answer.throttle = self.broker.quotas.meter(
                msg, principal_of(self.session.principal), loop.time())
            if answer.throttle > 0:
                self._mute(answer.throttle)
            if msg.__class__ is m.FetchResponse:  # over the fetch quota: answered empty
                answer.response = msg
                return answer
        if msg is not None and (session.screen or msg.__class__ in INTERCEPTED):
            got = session.intercept(msg, loop.time(), narrow=True)  # Kafka's listing rule
            if got.__class__ is tuple:  # answered by the session: SASL, or a denial
                return self._screened(answer, got, header, loop)
            if got.__class__ is Partial or got.__class__ is Narrowed:  # some parts denied
                # (the others served, then merged), or a listing filtered (ListGroups)
                answer.waiting = self._task(loop, got.answer(self.broker.dispatch(got.request)))
                answer.frame = frame
                return answer
            if got is not None:  # the request narrowed to what the principal may see
                msg = got
        if msg is None:
            answer.response = _ANSWERED_NONE
        elif msg.__class__ is m.Produce and tasks_ok:
            out = self.broker.dispatch_now(msg)
            if isinstance(out, ProduceAnswer) or asyncio.iscoroutine(out):
                answer.waiting = out if isinstance(out, ProduceAnswer) else self._task(loop, out)
            else:
                answer.response = out
        else:
            answer.waiting = self._task(loop, self.broker.dispatch(msg))
        answer.frame = frame  # records are views of the frame: kept until answered
        return answer

    def _screened(self, answer: "_Answer", got: tuple, header, loop) -> "_Answer":
        """``answer`` given the session's ``(response, close)`` (auth.py)."""
        response, close = got
        if response is None:  # a denied acks=0 Produce: no answer, the connection closes
            return _Answer(None, answer.size, _CLOSE_AFTER, why="acks=0 produce refused")
        if asyncio.iscoroutine(response):  # an admin change (none served here yet)
            answer.waiting = self._task(loop, response)
            return answer
        answer.response, answer.close_after = response, close
        if header.api_key == SASL_HANDSHAKE.key and header.api_version == 0 and not response.error:
            self.raw_sasl = True
        return answer

    def _raw_token(self, frame, size: int, loop) -> "_Answer":
        """A SASL token after a SaslHandshake v0: a size-prefixed frame with
        no header, answered the same way; a failure closes the connection
        unanswered (the v0 wire has no error field)."""
        response, close = self.session.intercept(m.SaslAuthenticate(auth_bytes=bytes(frame)),
                                                 loop.time())
        if close or response.error:
            self.raw_sasl = False
            return _Answer(None, size, _CLOSE_AFTER, why="SASL authentication failed")
        if self.session.principal:  # the exchange is complete: Kafka requests follow
            self.raw_sasl = False
        token = response.auth_bytes
        return _Answer(None, size, [len(token).to_bytes(4, "big") + token])

    def _encode(self, a: "_Answer"):
        """The buffers of a ready answer (AnsweringConnection._pump)."""
        if a.response is _CLOSE_AFTER:
            self.close(a.why)
            return False
        buffers = a.buffers()
        a.frame = None
        if a.close_after:  # a failed authentication: its answer, then close
            for buf in buffers:
                self.transport.write(buf)
            self.close("authentication failed")
            return False
        if buffers is CLOSE:
            self.close("acks=0 produce to a partition this broker does not lead")
            return False
        return None if buffers is NO_ANSWER else buffers


def _unreadable(why: str) -> str:
    return f"unreadable request: {why}"


_BEFORE_AUTH = frozenset({API_VERSIONS.key, SASL_HANDSHAKE.key, SASL_AUTHENTICATE.key})
_ANSWERED_NONE = object()  # a plan without a request: its answer takes None
_METERED = (m.Produce, m.Fetch)  # the requests quotas apply to


class _Answer(Answer):
    """One request read, in order (answering.Answer): its header (None: no
    Kafka answer of its own), and the plan's ``answer`` that makes the Kafka
    body of our response."""

    __slots__ = ("header", "make", "why", "frame", "close_after")

    def __init__(self, header, size: int, response, make=None, *, why: str = "") -> None:
        self.header, self.size, self.response, self.make = header, size, response, make
        self.waiting, self.hooked, self.why, self.frame = None, False, why, None
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)
        self.close_after = False  # close the connection once this is answered

    def buffers(self):
        """The buffers to write, or NO_ANSWER / CLOSE."""
        if self.header is None:
            return self.response  # a reply encoded already (ApiVersions' newer-version rule)
        body = self.make(None if self.response is _ANSWERED_NONE else self.response)
        if body is NO_ANSWER or body is CLOSE:
            return body
        h = self.header
        return encode_response_buffers(h, h.api_key, h.api_version, body)
