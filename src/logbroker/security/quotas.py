"""Client quotas: per-principal produce and fetch byte rates
(docs/security.md, "Quotas and limits").

A ``ByteRate`` accounts the bytes each principal produced (or was sent by
its fetches) against the principal's rate with a virtual clock (GCRA: a
token bucket kept as one number). A principal's entry is the time ``due``
by which its bytes so far are paid for at its rate. Recording ``n`` bytes
at ``now`` moves it to ``max(due, now - BURST_S) + n / rate``, and the
throttle is how far ``due`` then lies ahead of ``now``: a principal that
was idle may send ``BURST_S`` seconds' worth at once, beyond that it is
slowed to its rate. ``due`` never runs more than ``MAX_THROTTLE_S`` ahead
(older debt is forgiven, as Kafka's quota window forgets old samples), so
one throttle is at most that long however big one request was.

Contract: pure logic (no I/O, no clock of its own: ``now`` is seconds of
any monotonic clock, the broker's loop time), used on the broker's loop
only. A principal without a quota costs one dict lookup and never gets an
entry; an entry whose debt is paid means the same as none, and
``forget(now)`` drops those (the broker's sweep, every second), so memory
follows the principals that were throttled in the last seconds. Quotas
are per broker, as Kafka's: a principal producing to three brokers may
send three times its rate in all.
"""

from __future__ import annotations

import dataclasses
import math

from ..protocol import messages as m
from ..protocol.parts import FetchedPart
from .acl import ANONYMOUS

BURST_S = 1.0  # seconds of a principal's rate it may send at once after being idle
MAX_THROTTLE_S = 10.0  # the longest throttle (and debt) a principal can run up (Kafka: ~11 s)
PRODUCE, FETCH = "produce", "fetch"
ACCOUNT = -1  # Quotas.meter's throttle of a fetch: its bytes are accounted when answered


def principal_of(session_principal: str) -> str:
    """The quota principal of a connection: its ``User:NAME`` once
    authenticated, ``User:ANONYMOUS`` before (auth.py leaves it "")."""
    return session_principal or ANONYMOUS


class ByteRate:
    """One kind's (produce or fetch) byte rates: ``default`` bytes/s for
    every principal (0: none), ``overrides`` {principal: bytes/s} (0: that
    principal has no quota)."""

    __slots__ = ("kind", "default", "overrides", "due", "throttled_s")

    def __init__(self, kind: str, default: int, overrides: "dict[str, int] | None" = None) -> None:
        self.kind, self.default = kind, default
        self.overrides = dict(overrides or {})
        self.due: dict[str, float] = {}  # principal -> when its bytes so far are paid for
        self.throttled_s = 0.0  # throttle handed out, in all (metrics)

    def rate(self, principal: str) -> int:
        """The principal's bytes per second; 0: no quota."""
        return self.overrides.get(principal, self.default)

    def record(self, principal: str, nbytes: int, now: float) -> int:
        """Account ``nbytes`` at ``now``; the throttle in ms (0 when within
        the quota or without one), rounded up so that a client waiting that
        long finds its debt paid."""
        rate = self.overrides.get(principal, self.default)
        if not rate:
            return 0
        due = max(self.due.get(principal, now - BURST_S), now - BURST_S) + nbytes / rate
        due = min(due, now + MAX_THROTTLE_S)
        self.due[principal] = due
        if due <= now:
            return 0
        ms = math.ceil((due - now) * 1000)
        self.throttled_s += ms / 1000
        return ms

    def delay(self, principal: str, now: float) -> int:
        """Whole ms until the principal's debt is paid (0: it may be served
        now; under 1 ms of debt counts as paid, timers run that early)."""
        due = self.due.get(principal)
        if due is None or due <= now:
            return 0
        return int((due - now) * 1000)

    def refuse(self, principal: str, now: float) -> int:
        """``delay`` handed out as a throttle (a fetch answered empty): counted."""
        ms = self.delay(principal, now)
        self.throttled_s += ms / 1000
        return ms

    def window(self, principal: str) -> int:
        """The most bytes one answer should carry: ``BURST_S`` of the rate
        (at least 1), or 0 without a quota."""
        rate = self.rate(principal)
        return max(int(rate * BURST_S), 1) if rate else 0

    def forget(self, now: float) -> int:
        """Drop the entries whose debt is paid; how many were dropped."""
        paid = [p for p, due in self.due.items() if due <= now - BURST_S]
        for p in paid:
            del self.due[p]
        return len(paid)

    def __len__(self) -> int:
        return len(self.due)


class Quotas:
    """The broker's produce and fetch rates; either is None when no
    principal has that quota (the request path then checks nothing)."""

    __slots__ = ("produce", "fetch")

    def __init__(self, produce: "ByteRate | None", fetch: "ByteRate | None") -> None:
        self.produce, self.fetch = produce, fetch

    @classmethod
    def of(cls, config) -> "Quotas | None":
        """From a ``BrokerConfig`` (quota_*_bytes_per_s and quotas, already
        checked); None when no quota is configured at all."""
        rates = []
        for kind, default, column in ((PRODUCE, config.quota_produce_bytes_per_s, 1),
                                      (FETCH, config.quota_fetch_bytes_per_s, 2)):
            overrides = {row[0]: row[column] for row in config.quotas if row[column] is not None}
            limited = default or any(overrides.values())
            rates.append(ByteRate(kind, default, overrides) if limited else None)
        if rates == [None, None]:
            return None
        return cls(*rates)

    def meter(self, msg: "m.Produce | m.Fetch", principal: str, now: float) -> tuple:
        """``(request, throttle)`` for a Produce or Fetch of ``principal``
        read at ``now``. A produce's bytes (its parts' ``nbytes``: no work
        per record) are accounted now; throttle: the ms its answer carries
        and the connection stays muted from now. A fetch of a principal in
        debt becomes its answer: every part empty (error 0, high watermark
        and log start -1) with the ms left, also the mute. Any other fetch
        is capped to ``window`` bytes, throttle ``ACCOUNT``: ``answer``
        accounts its bytes. Without a quota: ``(msg, 0)``."""
        if msg.__class__ is m.Produce:
            if self.produce is None:
                return msg, 0
            return msg, self.produce.record(principal, sum(p.nbytes for p in msg.parts), now)
        rate = self.fetch
        window = 0 if rate is None else rate.window(principal)
        if not window:
            return msg, 0
        ms = rate.refuse(principal, now)
        if ms:
            return m.FetchResponse(parts=tuple(FetchedPart(p.topic, p.partition, 0, "", -1, -1, 0)
                                               for p in msg.parts),
                                   payload=(b"",) * len(msg.parts), throttle_ms=ms), ms
        if msg.max_bytes > window:
            msg = dataclasses.replace(msg, max_bytes=window)
        return msg, ACCOUNT

    def answer(self, response, throttle: int, principal: str, now: float) -> tuple:
        """``(response carrying its throttle, ms to mute from now)`` for the
        answer to a request ``meter`` gave ``throttle`` (> 0 or ``ACCOUNT``);
        the mute is 0 unless a fetch's bytes were accounted here. An answer
        of another class (an error) or none (acks=0) is left as it is."""
        cls = response.__class__
        if cls is not m.ProduceResponse and cls is not m.FetchResponse:
            return response, 0
        mute = 0
        if throttle == ACCOUNT:
            nbytes = sum(p.nbytes for p in response.parts)
            throttle = mute = nbytes and self.fetch.record(principal, nbytes, now)
            if not throttle:
                return response, 0
        return dataclasses.replace(response, throttle_ms=throttle), mute

    def forget(self, now: float) -> None:
        """Drop paid-up entries of both kinds (the broker's sweep)."""
        for rate in (self.produce, self.fetch):
            if rate is not None:
                rate.forget(now)

    def throttled_seconds(self) -> dict[str, float]:
        """Throttle handed out so far per kind (metrics)."""
        return {kind: (rate.throttled_s if rate is not None else 0.0)
                for kind, rate in ((PRODUCE, self.produce), (FETCH, self.fetch))}
