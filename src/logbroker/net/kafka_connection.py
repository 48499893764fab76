"""One Kafka client connection: frames in, answers out, in request order.

This module is the Kafka protocol's part only: each frame is decoded
(``codec.decode_request``), turned into a ``Plan`` by its API's translator
(api/registry.KAFKA: kafka/serve_*.py), its request run through the
broker's one pipeline (api/pipeline.py: session, ACLs, quotas, edge
checks, its handler, exactly as our listener's), and the plan's answer
encoded with ``codec.encode_response_buffers``.

- Order: Kafka clients pipeline, and answers go out strictly in the order
  of the requests (answering.py).
- No answer for an acks=0 Produce (Kafka's rule); a connection whose acks=0
  Produce failed is closed.
- Decode errors: an ApiVersions request at a newer version gets Kafka's v0
  UNSUPPORTED_VERSION answer (api_versions.py); any other unsupported API
  or version, and any malformed frame, closes the connection once the
  answers before it are written (Kafka closes too). An unsupported API or
  version is named in a debug line (refusals.log_unsupported). Nothing of a bad
  request reaches the pipeline; a bug in a translator closes only this
  connection.
- Authentication (docs/kafka.md §4.7): on a SASL listener (SASL_PLAINTEXT,
  SASL_SSL; the single listener with ``auth_required``), before
  authentication only ApiVersions and the SASL APIs are read: any other
  request closes the connection unanswered (Kafka's rule), counted as a
  failure. After a SaslHandshake v0 the SCRAM messages are raw
  size-prefixed frames (``raw_sasl``), answered by the session the same
  way. The pipeline runs with Kafka's listing rule (``narrow``: a
  ListGroups without describe on the cluster lists the groups the
  principal may describe).
- Limits as our listener's (answering.py); memory follows the bytes
  received (``KafkaFrameReader``); an idle connection holds no buffer.
"""

from __future__ import annotations

import inspect
import logging

from .answering import Answer, AnsweringConnection
from .refusals import log_listener_refusal, log_unsupported
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
    __slots__ = ("listener", "raw_sasl")
    KIND = "Kafka "
    log = logging.getLogger("logbroker.kafka")

    def __init__(self, listener) -> None:
        """``listener``: the KafkaListener (its site, translators, registration)."""
        broker = listener.broker
        super().__init__(broker, listener, KafkaFrameReader(broker.config.max_frame_bytes,
                                                            scratch=broker.scratch))
        self.listener = listener
        self.session.gated = listener.sasl  # a SASL_* listener: authenticate first
        self.raw_sasl = False  # after a SaslHandshake v0: frames are raw SASL tokens

    def _lost(self, exc) -> None:
        """A size prefix out of range: the answers before it go out, then close."""
        self.pending.append(_Answer(None, 0, _CLOSE_AFTER, why=_unreadable(exc.message)))
        self.pause()
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
            if self.log.isEnabledFor(logging.DEBUG):
                log_unsupported(self.log, self, exc.header, exc.message)
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
        answer.frame = frame  # records are views of the frame: kept until answered
        if plan.request is None:
            answer.response = _ANSWERED_NONE
            if self.log.isEnabledFor(logging.DEBUG):
                log_listener_refusal(self.log, self, header, plan.answer(None))
            return answer
        # the broker's one pipeline (api/pipeline.py), with Kafka's listing rule
        self.broker.pipeline.start(self, answer, plan.request, loop, tasks_ok, narrow=True)
        if header.api_key == SASL_HANDSHAKE.key and header.api_version == 0 \
                and answer.response is not None and not answer.response.error:
            self.raw_sasl = True  # SCRAM's messages follow as raw size-prefixed frames
        return answer

    def _raw_token(self, frame, size: int, loop) -> "_Answer":
        """A SASL token after a SaslHandshake v0: a size-prefixed frame with
        no header, answered the same way; a failure closes the connection
        unanswered (the v0 wire has no error field)."""
        try:
            response = self.session.step(m.SaslAuthenticate(auth_bytes=bytes(frame)),
                                         loop.time())
        except LogbrokerError as exc:
            return self._raw_failed(exc, size)
        if inspect.iscoroutine(response):  # PLAIN: the password is checked off the loop
            answer = _Answer(None, size, None, why="SASL authentication failed")
            answer.waiting = self.task(self._raw_later(response))
            return answer
        return self._raw_answer(response, size)

    async def _raw_later(self, coro):
        try:
            response = await coro
        except LogbrokerError as exc:
            return self._raw_failed(exc, 0).response
        return self._raw_answer(response, 0).response

    def _raw_failed(self, exc: LogbrokerError, size: int) -> "_Answer":
        self.session.fail(exc.message)
        self.raw_sasl = False
        return _Answer(None, size, _CLOSE_AFTER, why="SASL authentication failed")

    def _raw_answer(self, response, size: int) -> "_Answer":
        if self.session.principal:  # the exchange is complete: Kafka requests follow
            self.raw_sasl = False
        token = response.auth_bytes
        return _Answer(None, size, [len(token).to_bytes(4, "big") + token])

    def _encode(self, a: "_Answer"):
        """The buffers of a ready answer (AnsweringConnection._pump)."""
        if a.response is _CLOSE_AFTER:
            self.close(a.why)
            return False
        if a.close_after and a.response is None:  # a denied acks=0 Produce: no answer
            self.close("acks=0 produce refused")
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


class _Answer(Answer):
    """One request read, in order (answering.Answer): its header (None: no
    Kafka answer of its own), and the plan's ``answer`` that makes the Kafka
    body of our response."""

    __slots__ = ("header", "make", "why", "frame")

    def __init__(self, header, size: int, response, make=None, *, why: str = "") -> None:
        self.header, self.size, self.response, self.make = header, size, response, make
        self.waiting, self.hooked, self.why, self.frame = None, False, why, None
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)
        self.close_after = response is _CLOSE_AFTER  # close the connection once answered

    def buffers(self):
        """The buffers to write, or NO_ANSWER / CLOSE."""
        if self.header is None:
            return self.response  # a reply encoded already (ApiVersions' newer-version rule)
        body = self.make(None if self.response is _ANSWERED_NONE else self.response)
        if body is NO_ANSWER or body is CLOSE:
            return body
        h = self.header
        return encode_response_buffers(h, h.api_key, h.api_version, body)
