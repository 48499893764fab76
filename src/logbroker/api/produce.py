"""The Produce request: append every part now, answer when the acks allow.

``produce(handlers, req)`` runs inside the loop turn that read the request
(no task): it appends each part (errors of one part are that part's error)
and returns the response at once for ``acks`` 0 and 1, or for ``acks=-1``
when nothing needs to wait (a lazy log). Otherwise it returns a
``ProduceAnswer``: a future of the response completed by the fsync
callbacks of ``GroupCommit.request_cb`` in the loop turn the last fsync
ends (single node), or by the replicas' futures (cluster: the HW covers
the records), or with REQUEST_TIMED_OUT for the parts still waiting after
``timeout_ms``. The connection writes the answer from that callback, so a
durable send costs the fsync's turn and no more.
"""

from __future__ import annotations

import asyncio

from ..errors import LogbrokerError, RequestTimedOutError
from ..errors import code_and_message as _err
from ..protocol import messages as m

CLOSE_CONNECTION = object()  # an answer meaning: answer nothing, close the connection


class ProduceAnswer:
    """The parts of one acks=-1 produce still waiting; completes with the
    ``ProduceResponse`` once none is (or the timeout passed). It has the
    part of the future API the connection uses (``done``, ``cancelled``,
    ``result``, ``add_done_callback``), but runs its callbacks at once when
    it completes instead of in a later loop turn; ``await`` works too."""

    __slots__ = ("results", "waiting", "response", "timer", "what", "listeners", "future")

    def __init__(self, results: list, what: str) -> None:
        self.results, self.waiting, self.what = results, 0, what
        self.response: "m.ProduceResponse | None" = None
        self.timer: "asyncio.TimerHandle | None" = None
        self.listeners: list = []
        self.future: "asyncio.Future | None" = None  # made only when awaited

    # -- the future API ----------------------------------------------------------------
    def done(self) -> bool:
        return self.response is not None

    def cancelled(self) -> bool:
        return False

    def result(self) -> m.ProduceResponse:
        if self.response is None:
            raise asyncio.InvalidStateError("the produce is not answered yet")
        return self.response

    def add_done_callback(self, fn) -> None:
        """``fn(self)`` when the answer is complete (now, if it is)."""
        if self.response is not None:
            fn(self)
        else:
            self.listeners.append(fn)

    def __await__(self):
        if self.response is None:
            self.future = asyncio.get_running_loop().create_future()
            yield from self.future.__await__()
        return self.response

    # -- completing ----------------------------------------------------------------------
    def callback(self, index: int):
        """A ``request_cb`` callback for part ``index``: ``cb(error | None)``."""
        self.waiting += 1

        def done(exc: "BaseException | None") -> None:
            if self.response is not None:
                return
            self.results[index][2:4] = [0, ""] if exc is None else list(_err(exc))
            self.waiting -= 1
            if not self.waiting:
                self._finish()
        return done

    def wait_future(self, index: int, fut: asyncio.Future) -> None:
        """Part ``index`` is durable when ``fut`` completes (cluster mode)."""
        done = self.callback(index)
        fut.add_done_callback(lambda f: done(None if f.cancelled() else f.exception()))

    def arm(self, loop: asyncio.AbstractEventLoop, timeout_ms: int) -> None:
        self.timer = loop.call_later(max(timeout_ms, 1) / 1000, self._timed_out)

    def _timed_out(self) -> None:
        self.timer = None
        if self.response is not None:
            return
        for r in self.results:
            if r[2] == _WAITING:
                r[2:4] = [RequestTimedOutError.code, f"timed out waiting for the {self.what}"]
        self._finish()

    def _finish(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.response = _response(self.results)
        if self.future is not None and not self.future.done():
            self.future.set_result(None)
        listeners, self.listeners = self.listeners, []
        for fn in listeners:
            fn(self)


_WAITING = -1000  # a part's code while its ack is outstanding (never sent: always replaced)


def produce(h, req: m.Produce):
    """The response (or None, or CLOSE_CONNECTION for acks=0), or a
    ``ProduceAnswer`` that will complete with it. ``h`` is the ``Handlers``; ``acks`` and
    ``timeout_ms`` were checked at the edge (edge.py)."""
    results, answer = [], None
    wait = req.acks == -1
    loop = asyncio.get_running_loop()
    traffic = h.traffic  # metrics (None when off): bytes and records in, per part
    for (topic, partition, _), data in zip(req.parts, req.payload):
        try:
            if h.replicas is not None:
                fut, lg, info = h.cluster.leader_append(h.commit, topic, partition, data, req.acks)
            else:
                lg = h.log_for(topic, partition, create=h.config.auto_create_topics)
                info = lg.append(data, sync=False)  # whole part checked, then written
                fut = None
        except LogbrokerError as exc:
            results.append([topic, partition, *_err(exc), -1, -1])
            continue
        index = len(results)
        results.append([topic, partition, 0, "", info.first_offset, lg.log_start_offset])
        if traffic is not None and info.batches:  # retried duplicates are not counted again
            traffic.produced(topic, partition, info.size, info.last_offset - info.first_offset + 1)
        if h.replicas is None:
            if wait:
                if answer is None:
                    answer = ProduceAnswer(results, "fsync")
                results[index][2] = _WAITING
                if not h.commit.request_cb(lg, info.last_offset + 1, answer.callback(index)):
                    results[index][2] = 0  # already durable
                    answer.waiting -= 1
            else:
                h.commit.request_cb(lg, info.last_offset + 1, _ignore)  # durable soon, unwaited
        elif fut is not None:
            if wait:
                if answer is None:
                    answer = ProduceAnswer(results, "in-sync replicas")
                results[index][2] = _WAITING
                answer.wait_future(index, fut)
            else:
                fut.add_done_callback(consume_outcome)
    if answer is not None and answer.waiting:
        answer.arm(loop, req.timeout_ms)
        return answer
    if req.acks == 0:
        # nobody hears an acks=0 error: a client learns of any (a leader that
        # moved, a topic this broker does not know yet, a corrupt batch) when
        # the connection closes, and refreshes its metadata (Kafka's rule)
        failed = any(r[2] for r in results)
        return CLOSE_CONNECTION if failed else None
    return _response(results)


def _response(results: list) -> m.ProduceResponse:
    return m.ProduceResponse(parts=tuple(tuple(r) for r in results))


def _ignore(exc) -> None:
    """An unwaited fsync (acks 0/1): a failure shows as a partition offline."""


def consume_outcome(fut: asyncio.Future) -> None:
    """A done callback retrieving an unwaited future's error (no 'never retrieved' log)."""
    if not fut.cancelled():
        fut.exception()
