"""One connection of our protocol: frames in, responses out, in request order.

This module is our protocol's part only: framing (``FrameReader``),
decoding, and encoding the answers. Every request then goes through the
broker's one pipeline (api/pipeline.py: session, ACLs, quotas, edge
checks, its handler), as the Kafka listener's do. Requests start as soon
as they are read, in order (so the appends of pipelined produce requests
share an fsync), and are answered strictly in order. The ordering, writing
(sendfile; over TLS, slices read into bytes), backpressure, timeouts and
the servers' API (``pause()``, ``drain()``, ``close(why)``, ``abort(why)``,
``idle_check(now)``) are ``answering.AnsweringConnection``'s.

Memory: an idle connection holds no buffer (the broker's readers share one
receive buffer; a frame in progress holds only the bytes that arrived), and
no task or future exists until there is a request to answer.
"""

from __future__ import annotations


from ..protocol import messages as m
from ..protocol.codec import DecodeError, FrameReader, decode, encode
from .answering import Answer, AnsweringConnection


class ClientConnection(AnsweringConnection):
    __slots__ = ()

    def __init__(self, listener) -> None:
        """``listener``: the net.listener.Listener that accepted it (its registry)."""
        broker = listener.broker
        super().__init__(broker, listener, FrameReader(
            max_frame_bytes=broker.config.max_frame_bytes, scratch=broker.scratch))

    def _lost(self, exc) -> None:
        self.close(f"{exc}")

    # -- work ----------------------------------------------------------------------------
    def _start(self, frame, loop, tasks_ok: bool) -> "_Answer":
        """Decode one request and start it through the broker's pipeline
        (api/pipeline.py): answered now, by a future (a produce waiting for
        its fsync) or by a task. An unreadable frame closes the connection;
        a readable header with a bad body is answered with its error."""
        size = len(frame)
        try:
            env = decode(frame)
        except DecodeError as exc:
            if exc.cid is None:
                return _Answer(-1, size, None)
            code = exc.cause.code if exc.cause is not None else exc.code
            cls = m.RESPONSES.get(exc.api, m.HandshakeResponse)
            return _Answer(exc.cid, size, cls(error=code, message=exc.message))
        answer = _Answer(env.cid, size, None)
        self.broker.pipeline.start(self, answer, env.message, loop, tasks_ok)
        return answer

    def _encode(self, a: "_Answer"):
        """The buffers of a ready answer (AnsweringConnection._pump)."""
        if a.cid < 0:
            self.close("unreadable request")
            return False
        if a.close_after:  # a failed authentication (or a refused acks=0 produce): then close
            if a.response is not None:
                for buf in encode(a.response, a.cid):
                    self.transport.write(buf)
            self.close("authentication failed")
            return False
        if a.response is m.CLOSE_CONNECTION:
            self.close("acks=0 produce to a partition this broker does not lead")
            return False
        if a.response is None:
            return None
        return encode(a.response, a.cid)


class _Answer(Answer):
    """One request read, in order (answering.Answer), and its cid."""

    __slots__ = ("cid",)

    def __init__(self, cid: int, size: int, response, waiting=None):
        self.cid, self.size, self.response, self.waiting, self.hooked = \
            cid, size, response, waiting, False
        self.close_after = cid < 0  # close the connection once answered (unreadable)
        self.throttle = 0  # ms its answer carries, or quotas.ACCOUNT (Quotas.meter)
