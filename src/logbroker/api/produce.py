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

from ..errors import (InvalidTxnStateError, LogbrokerError, RequestTimedOutError,
                      TransactionalIdAuthorizationFailedError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import ProducedPart
from ..records import format as fmt
from ..records.walker import header_positions
from ..storage.incoming import part_buffers
from .edge import check_partition_key
from .produce_fence import ProduceFences



class ProduceAnswer:
    """The parts of one acks=-1 produce still waiting; completes with the
    ``ProduceResponse`` once none is (or the timeout passed). It has the
    part of the future API the connection uses (``done``, ``cancelled``,
    ``result``, ``add_done_callback``), but runs its callbacks at once when
    it completes instead of in a later loop turn; ``await`` works too."""

    __slots__ = ("results", "waiting", "response", "timer", "what", "listeners", "future")

    def __init__(self, results: list, what: str) -> None:
        """``results``: the response's ProducedParts, in order, a waiting
        one's error ``_WAITING`` until its callback replaces it."""
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
            error, message = (0, "") if exc is None else _err(exc)
            topic, partition, _, _, base, start = self.results[index]
            # built, not ``_replace``d: 1,000 parts a request, ~1.5 us each saved
            self.results[index] = ProducedPart(topic, partition, error, message, base, start)
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
        for i, r in enumerate(self.results):
            if r.error == _WAITING:
                self.results[i] = r._replace(error=RequestTimedOutError.code,
                                             message=f"timed out waiting for the {self.what}")
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


def produce(svc, req: m.Produce, session):
    """The response (or None, or CLOSE_CONNECTION for acks=0), or a
    ``ProduceAnswer`` that will complete with it. ``acks`` and
    ``timeout_ms`` were checked at the edge (edge.py); each part is
    appended through the metadata interface (a single node's log, or as
    the partition's leader), and an acks=-1 answer waits for what it says
    (``when_acked``: the fsync, or the in-sync replicas). A transactional
    batch (it opens or continues its producer's transaction: storage's
    rules, fencing errors per part) needs the request's ``transactional_id``
    when ACLs are enforced (TRANSACTIONAL_ID_AUTHORIZATION_FAILED per part
    without one: its WRITE is what the ACLs check, Kafka's rule). With
    ``svc.verifier`` (api/txn_verify.py), a producer's first transactional
    batch on a partition is appended only once its transaction coordinator
    confirmed the transaction holds the partition, in a later turn: its
    part waits (a ``ProduceAnswer`` whatever the acks; acks=0 is refused)."""
    results, answer, deferred = [], None, []
    wait = req.acks == -1
    meta, verifier = svc.meta, svc.verifier
    traffic = svc.traffic  # metrics (None when off): bytes and records in, per part
    # ACLs enforced: a transactional batch needs a transactional id, whose WRITE the ACLs checked
    anonymous = req.transactional_id is None and session is not None and session.auth.enforcing
    fences = None if session is None else session.produce_fences  # None: nothing refused yet
    for (topic, partition, _), data in zip(req.parts, req.payload):
        try:
            check_partition_key(topic, partition)
            if fences is not None:
                fences.check(topic, partition, data)
            if anonymous and transactional(data):
                raise TransactionalIdAuthorizationFailedError(
                    f"{topic}-{partition}: a transactional batch needs the request's "
                    "transactional_id (its WRITE ACL is checked; Kafka's rule)")
            if verifier is not None:
                need = verifier.needed(topic, partition, data, req.transactional_id)
                if need is not None:  # verified with its coordinator first (api/txn_verify.py)
                    if req.acks == 0:
                        raise InvalidTxnStateError(f"{topic}-{partition}: a transaction's "
                                                   "first batch here needs acks 1 or -1")
                    deferred.append((len(results), topic, partition, data, need))
                    results.append(ProducedPart(topic, partition, _WAITING, "", -1, -1))
                    continue
            appended = meta.append(topic, partition, data, req.acks)
        except LogbrokerError as exc:
            results.append(ProducedPart(topic, partition, *_err(exc), -1, -1))
            if exc.retriable and session is not None:  # later batches wait for its retry
                if fences is None:
                    fences = session.produce_fences = ProduceFences()
                fences.refused(topic, partition, data, exc)
            continue
        info = appended.info
        if traffic is not None and info.batches:  # retried duplicates are not counted again
            traffic.produced(topic, partition, info.size, info.last_offset - info.first_offset + 1)
        code = 0
        if not wait:
            meta.when_acked(appended, req.acks, None)
        else:
            if answer is None:
                answer = ProduceAnswer(results, meta.ack_wait)
            # the callback runs in a later turn: the part is in ``results`` by then
            if meta.when_acked(appended, req.acks, answer.callback(len(results))):
                code = _WAITING
            else:
                answer.waiting -= 1  # already durable
        results.append(ProducedPart(topic, partition, code, "", info.first_offset,
                                    appended.log.log_start_offset))
    if deferred:
        if answer is None:
            answer = ProduceAnswer(results, meta.ack_wait)
        verifier.defer(answer, req.acks, req.transactional_id, deferred)
    if answer is not None and answer.waiting:
        answer.arm(asyncio.get_running_loop(), req.timeout_ms)
        return answer
    if req.acks == 0:
        # nobody hears an acks=0 error: a client learns of any (a leader that
        # moved, a topic this broker does not know yet, a corrupt batch) when
        # the connection closes, and refreshes its metadata (Kafka's rule)
        failed = any(r.error for r in results)
        return m.CLOSE_CONNECTION if failed else None
    return _response(results)


def transactional(data) -> bool:
    """Whether a batch of the part ``data`` (either magic, in any form the
    handler gets it: ``incoming.part_buffers``) has its transactional bit:
    a walk of the headers' lengths (what is not a whole batch is storage's
    to refuse)."""
    return any(_transactional_bytes(raw) for raw in part_buffers(data))


def _transactional_bytes(data) -> bool:
    for pos in header_positions(data):
        # the magic follows the stamp; the attributes open the CRC's bytes
        bit = fmt.TRANSACTIONAL if data[pos + fmt.STAMP_SIZE] == fmt.MAGIC \
            else fmt.KAFKA_TRANSACTIONAL
        if (data[pos + fmt.CRC_START] << 8 | data[pos + fmt.CRC_START + 1]) & bit:
            return True
    return False


def _response(results: list) -> m.ProduceResponse:
    return m.ProduceResponse(parts=tuple(results))
