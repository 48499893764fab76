"""The one request pipeline: every request of both listeners, in the
order read, passes the same stages to exactly one handler.

A listener turns a frame into one of our requests (the Kafka listener
through its translator's ``Plan``, api/registry.py) and calls
``start(conn, answer, msg, loop, tasks_ok)``. The stages:

1. **Session** (security/auth.py): with ``auth_required``, a request of
   an unauthenticated connection is refused (SASL_AUTHENTICATION_FAILED;
   an acks=0 Produce closes the connection) — but the SASL exchange and
   user/ACL administration, whose handlers authorize themselves
   (``SELF_AUTHORIZED``: the bootstrap rule).
2. **Authorization**: when ACLs are enforced (``auth.enforcing``), the
   request is checked against them (security/acl_rules.py) as the
   session's ``acl_principal`` (``User:ANONYMOUS`` before authentication):
   denied (answered with its response class and 29/30/31), narrowed to the topics the principal may
   describe, partly denied (a ``Partial``: the others served, the denied
   parts put back into the answer) or, on the Kafka listener, a listing
   narrowed by its answer (``Narrowed``, Kafka's ListGroups rule).
3. **Quotas** (security/quotas.py): a Produce's bytes are metered as read,
   a Fetch's when answered; the answer carries the throttle and the
   connection reads nothing for that long (KIP-219); a fetch already in
   debt is answered empty at once.
4. **Edge** (api/edge.py): the request's top-level fields checked.
   A Produce with compressed Kafka batches (``Inflation.wanted``) is
   inspected first: in this turn when it inflates to little, else in the
   inflation thread, its connection's reading held meanwhile
   (api/inflation.py: compression bombs off the loop).
5. **The handler** of its kind (api/registry.OURS), with the services
   and the requester's session: inline handlers (Produce, the SASL steps)
   in the reading turn, the others as tasks started in the order read.

The answer (the listener's ``Answer``) gets ``response`` or ``waiting``
(a ProduceAnswer or a task), ``throttle`` and ``close_after`` (close the
connection once answered: a failed authentication, a denied acks=0
Produce whose ``response`` is None). Nothing here raises: a refused
request gets its error code, a bug UNKNOWN (logged).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time

from ..errors import (ClusterAuthorizationFailedError, InvalidRequestError, LogbrokerError,
                      UnknownError)
from ..protocol import messages as m
from ..security.acl_rules import Narrowed, Partial
from ..security.auth import CLOSING_ERRORS, SASL, SELF_AUTHORIZED
from ..security.quotas import principal_of
from .edge import check_request
from .produce import ProduceAnswer
from .registry import OURS

log = logging.getLogger("logbroker.broker")
_METERED = (m.Produce, m.Fetch)  # the requests quotas apply to


class Pipeline:
    def __init__(self, services, quotas=None, inflation=None) -> None:
        """``services``: what handlers work with (api/services.py);
        ``quotas``: the broker's Quotas, None without quotas;
        ``inflation``: the broker's api/inflation.Inflation (None: compressed
        batches are checked inline, as in tests of the handlers alone)."""
        self.svc, self.quotas, self.inflation = services, quotas, inflation

    def start(self, conn, answer, msg: m.Message, loop, tasks_ok: bool,
              narrow: bool = False) -> None:
        """Run ``msg`` through the stages (module docstring), filling
        ``answer``. ``conn``: the connection (its ``session``, ``mute(ms)``,
        ``task(coro)``, ``count_reads(msg)``); ``tasks_ok`` False: an
        earlier request of this read became a task not yet started, so an
        inline handler waits its turn as a task too (the SASL steps never
        wait: the listener reads the next frame by their outcome);
        ``narrow``: Kafka's listing rule (``Narrowed``)."""
        session, cls = conn.session, msg.__class__
        wrap = None
        if cls not in SELF_AUTHORIZED:
            if session.gated:
                if cls is not m.Handshake:
                    answer.response, answer.close_after = session.refuse_anonymous(msg)
                    return
            elif session.auth.enforcing:
                got = session.authorize(msg, narrow)
                if got.__class__ is tuple:  # denied
                    answer.response, answer.close_after = got
                    return
                if got.__class__ is Partial or got.__class__ is Narrowed:
                    wrap, msg = got, got.request
                elif got is not None:  # narrowed to what the principal may describe
                    msg = got
        if self.quotas is not None and msg.__class__ in _METERED:
            msg, answer.throttle = self.quotas.meter(msg, principal_of(session.principal),
                                                     loop.time())
            if answer.throttle > 0:
                conn.mute(answer.throttle)
            if msg.__class__ is m.FetchResponse:  # over the fetch quota: answered empty
                if wrap is None:
                    answer.response = msg
                else:
                    answer.waiting = conn.task(wrap.answer(_ready(msg)))
                return
        if msg.__class__ is m.Fetch:
            conn.count_reads(msg)
        elif msg.__class__ is m.Produce and self.inflation is not None:
            job = self.inflation.wanted(msg)  # None on the hot path: nothing to inflate
            if job is not None:
                checked = self.inflation.on_loop(conn, job, msg)  # small: in this turn
                if checked is None:
                    coro = self._inflated(conn, job, msg, session, answer)
                    answer.waiting = conn.hold(coro if wrap is None else wrap.answer(coro))
                    return
                msg = checked
        entry = OURS.get(msg.__class__)
        if wrap is not None:
            answer.waiting = conn.task(wrap.answer(self.dispatch(msg, session)))
        elif entry is not None and entry.inline and (tasks_ok or cls in SASL):
            out = self._inline(entry, msg, session, answer)
            if out.__class__ is ProduceAnswer:
                answer.waiting = out
            elif inspect.iscoroutine(out):  # a PLAIN step: its password checked off the loop
                answer.waiting = conn.task(self._settled(out, msg, session, answer))
            else:
                answer.response = out
        else:
            answer.waiting = conn.task(self.dispatch(msg, session))

    async def _inflated(self, conn, job, msg: m.Produce, session, answer):
        """Produce ``msg``'s ``job`` inspected off the loop, then the
        handler as inline; ``conn`` reads again once it has appended."""
        try:
            msg = await self.inflation.inspect(conn, job, msg)
        except Exception as exc:  # noqa: BLE001 - answered, never raised (_refusal)
            return self._refusal(msg, session, exc, answer)
        out = self._inline(OURS[m.Produce], msg, session, answer)
        conn.unhold()
        return (await out) if out.__class__ is ProduceAnswer else out

    async def _settled(self, coro, msg: m.Message, session, answer):
        """An inline handler's coroutine (a SASL PLAIN step), its failure answered."""
        try:
            return await coro
        except Exception as exc:  # noqa: BLE001 - answered, never raised (_refusal)
            return self._refusal(msg, session, exc, answer)

    def _inline(self, entry, msg: m.Message, session, answer):
        """An inline handler's answer (a response, None, CLOSE_CONNECTION,
        a ProduceAnswer, or the coroutine of a SASL PLAIN step), counted in the request metrics
        once complete (a waiting produce's fsync included)."""
        stats = self.svc.requests
        start = time.perf_counter() if stats is not None else 0.0
        cls = msg.__class__
        try:
            check_request(msg)
            out = entry.handler(self.svc, msg, session)
        except Exception as exc:  # noqa: BLE001 - answered, never raised (_refusal)
            out = self._refusal(msg, session, exc, answer)
        if stats is not None:
            if isinstance(out, ProduceAnswer):
                out.add_done_callback(lambda _a: stats.observe(cls, time.perf_counter() - start))
                return out
            stats.observe(cls, time.perf_counter() - start)
            if isinstance(out, m.Response) and out.error:
                stats.error(cls)
        return out

    async def dispatch(self, msg: m.Message, session) -> "m.Message | None":
        """The response to request ``msg`` from its handler (None for an
        acks=0 produce); never raises. With metrics on, each call is counted
        with its latency (a long-poll fetch's wait included) and a top-level
        error."""
        stats = self.svc.requests
        start = time.perf_counter() if stats is not None else 0.0
        failed = False
        try:
            check_request(msg)
            entry = OURS.get(msg.__class__)
            if entry is None:
                raise InvalidRequestError(f"{type(msg).__name__} is not a request")
            out = entry.handler(self.svc, msg, session)
            if inspect.isawaitable(out):
                out = await out
        except Exception as exc:  # noqa: BLE001 - answered, never raised (_refusal)
            out, failed = self._refusal(msg, session, exc), True
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():
                raise  # the connection is going away, or the broker is stopping
            # something the handler awaited was cancelled under it: answered as a bug,
            # never a silent stall of this connection's answers (they leave in order)
            out, failed = self._refusal(msg, session, RuntimeError(
                f"a step of {type(msg).__name__}'s handling was cancelled")), True
        if stats is not None:
            stats.observe(msg.__class__, time.perf_counter() - start)
            if failed:
                stats.error(msg.__class__)
        return out

    @staticmethod
    def _refusal(msg: m.Message, session, exc: Exception, answer=None) -> m.Message:
        """``msg``'s response carrying ``exc`` (a bug: UNKNOWN, logged). A
        failed SASL step closes the connection once answered; a cluster
        authorization failure is counted as a denial."""
        if not isinstance(exc, LogbrokerError):
            log.exception("handler for %s failed", type(msg).__name__, exc_info=exc)
            return m.RESPONSES[msg.API](error=UnknownError.code,
                                        message="internal error (see broker log)")
        if isinstance(exc, CLOSING_ERRORS):
            session.fail(exc.message)
            if answer is not None:
                answer.close_after = True
        elif isinstance(exc, ClusterAuthorizationFailedError):
            session.denied(msg.__class__)
        return m.RESPONSES[msg.API](error=exc.code, message=exc.message)


async def _ready(response):
    return response
