"""Prometheus metrics of a broker (``metrics_port``; docs/metrics.md).

``BrokerMetrics(broker).start()`` serves ``/metrics`` on
``config.host:config.metrics_port``; ``port`` is the bound port then
(``metrics_port`` 0 picks a free one). ``close()`` stops serving (bounded);
it is idempotent. Counters are bumped where requests are handled
(metrics/stats.py); the rest is read from the broker's state.

``start()`` runs on the broker's loop after the handlers and the group
commit exist (Broker.start) and hands them their counters; with metrics
off they stay None and the request path pays one ``is None`` check.

A scrape (``scrape(principal)``) costs the broker's loop at most one
gather of its state per ``metrics_refresh_s``, in slices of ~1 ms
(snapshot.py), whatever the number of scrapers. Everything else runs off
that loop: the HTTP server on a loop of its own in one thread (server.py:
bounded connections and timeouts; HTTPS with ``metrics_tls``; HTTP Basic
with ``metrics_auth``, basic_auth.py), and the text is rendered in one
render thread, once per snapshot and principal (``Names``: the topics and
groups the principal may describe), shared by the scrapes that want it.
The counters (collect.py ``collect()``) are read fresh at each scrape.
A scrape never raises into the broker: it answers what it could collect.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from ..errors import InvalidRequestError
from .basic_auth import BasicAuth
from .collect import BrokerCollector, Names
from .server import MetricsServer
from .snapshot import SnapshotCache
from .state_text import state_text
from .stats import CommitStats, RequestStats, TrafficStats

log = logging.getLogger("logbroker.metrics")
RENDERS = 4  # rendered snapshots kept, one per principal (the last snapshot's)
PATH = "/metrics"


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.port: "int | None" = None  # bound port once started (0 in the config picks one)
        self.requests, self.traffic, self.commit = RequestStats(), TrafficStats(), CommitStats()
        self.auth_failures = 0  # logbroker_auth_failures_total: see auth_failed()
        self.auth_throttles = 0  # logbroker_auth_throttled_total: see auth_throttled()
        self.authz_denials: dict[str, int] = {}  # request kind -> denials: see authz_denied()
        self.collector = BrokerCollector(broker, self)
        self.cache: "SnapshotCache | None" = None  # on the broker's loop, from start()
        self.broker_loop: "asyncio.AbstractEventLoop | None" = None
        self.timeout_s = 10.0
        self._server: "MetricsServer | None" = None
        self._basic: "BasicAuth | None" = None
        self._render = ThreadPoolExecutor(max_workers=1,
                                          thread_name_prefix="logbroker-metrics-render")
        self._texts: "OrderedDict" = OrderedDict()  # principal -> (snapshot, its text's future)

    @property
    def url(self) -> str:
        config = self.broker.config
        host, scheme = config.host, "https" if config.metrics_tls else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}{PATH}"

    def auth_failed(self) -> None:
        """Count one failed authentication (a TLS handshake or SASL exchange
        refused); authentication calls it once it lands (docs/security.md).
        Any thread."""
        self.auth_failures += 1

    def auth_throttled(self) -> None:
        """Count one authentication attempt refused by the password-guessing
        throttle (security/auth_throttle.py). The broker's loop."""
        self.auth_throttles += 1

    def authz_denied(self, kind: "type | str") -> None:
        """Count one request of class ``kind`` (or named ``kind``: "Console"
        for a console page) refused by authorization
        (``logbroker_authorization_denials_total{request=...}``). The broker's loop."""
        name = kind if kind.__class__ is str else kind.__name__
        self.authz_denials[name] = self.authz_denials.get(name, 0) + 1

    def start(self) -> None:
        """Hook the counters into the broker and serve (on the broker's loop)."""
        b, config = self.broker, self.broker.config
        self.broker_loop = asyncio.get_running_loop()
        self.cache = SnapshotCache(b, config.metrics_refresh_s)
        self.timeout_s = config.metrics_timeout_ms / 1000
        if config.metrics_auth:
            self._basic = BasicAuth(b.services.auth, self.auth_failed)
        context = None
        if config.metrics_tls:
            from ..tls import server_context

            context = server_context(config.tls_cert, config.tls_key, config.tls_ca,
                                     config.tls_client_auth)
        self._server = MetricsServer(config.host, config.metrics_port, self._handle, context,
                                     config.metrics_max_connections, self.timeout_s)
        self.port = self._server.start()
        b.services.requests, b.services.traffic, b.commit.stats = \
            self.requests, self.traffic, self.commit
        log.info("metrics on %s", self.url)
        if config.auth_required and not config.metrics_auth:
            log.warning("metrics on %s are open: whoever reaches the port reads every topic and "
                        "group name whatever the ACLs (metrics_auth asks for a user, "
                        "docs/metrics.md)", self.url)

    def close(self) -> None:
        """Stop serving (on the broker's loop); a render under way finishes
        in its own thread."""
        server, self._server = self._server, None
        if server is None:
            return
        try:
            server.close()
            self.cache.close()
            self._render.shutdown(wait=False, cancel_futures=True)
            if self._basic is not None:
                self._basic.close()
        except Exception:  # noqa: BLE001 - closing metrics must not fail a shutdown
            log.exception("closing the metrics server failed")

    # -- a scrape (the metrics server's loop) -------------------------------------------------
    async def _handle(self, request):
        server = self._server
        if request.path != PATH or request.method not in ("GET", "HEAD"):
            status, why = ((404, f"no such path: metrics are at {PATH}") if request.path != PATH
                           else (405, f"method {request.method} not allowed: GET {PATH}"))
            log.debug("metrics: %s refused: %s", request.remote, why)
            return await server.write(request, f"{InvalidRequestError.name}: {why}\n".encode(),
                                      {"Content-Type": "text/plain", "Allow": "GET, HEAD"}, status)
        principal = None
        if self._basic is not None:
            verdict = await self._basic.check(request.headers.get("Authorization"),
                                              request.remote)
            if verdict.principal is None:
                return await server.write(request, verdict.why.encode() + b"\n",
                                          {"Content-Type": "text/plain", **dict(verdict.headers)},
                                          verdict.status)
            principal = verdict.principal
        fresh, state = await self.parts(principal)
        return await server.write(request, (fresh, state), {"Content-Type": CONTENT_TYPE_LATEST})

    async def scrape(self, principal: "str | None") -> bytes:
        """The exposition text for ``principal`` (None: every name)."""
        return b"".join(await self.parts(principal))

    async def parts(self, principal: "str | None") -> tuple:
        """The exposition text for ``principal`` as (the counters, the
        state's text shared by every scrape of its snapshot): written as
        two parts, never joined, so a scrape holds no copy of the state."""
        loop = asyncio.get_running_loop()
        try:
            snap = await asyncio.wait_for(self._snapshot(), self.timeout_s)
            state = await self._state_text(snap, principal)
        except Exception:  # noqa: BLE001 - a scrape answers whatever it could collect
            self.collector.failed("the broker's state")
            state = b""
        fresh = await loop.run_in_executor(self._render, _text, self.collector.collect)
        return fresh, state

    async def _snapshot(self):
        """The broker's snapshot (SnapshotCache.get, run on the broker's loop)."""
        get = self.cache.get()
        try:
            fut = asyncio.run_coroutine_threadsafe(get, self.broker_loop)
        except RuntimeError:  # the broker's loop is closed
            get.close()
            raise
        return await asyncio.wrap_future(fut)

    async def _state_text(self, snap, principal: "str | None") -> bytes:
        """The text of ``snap``'s families for ``principal``: rendered once
        (render thread), shared by the scrapes that ask for it meanwhile."""
        entry = self._texts.get(principal)
        if entry is None or entry[0] is not snap:
            fut = asyncio.get_running_loop().run_in_executor(
                self._render, self._render_state, snap, principal)
            self._texts[principal] = entry = (snap, fut)
            self._texts.move_to_end(principal)
            while len(self._texts) > RENDERS:
                self._texts.popitem(last=False)
        return await asyncio.shield(entry[1])


    def _render_state(self, snap, principal: "str | None") -> bytes:
        """(the render thread)"""
        b = self.broker
        return state_text(snap, self.traffic, b.store,
                          Names(b.services.auth, principal)).encode("utf-8")


class _Families(list):
    def collect(self):
        return self


def _text(families) -> bytes:
    """The Prometheus text format of ``families()`` (the render thread)."""
    return generate_latest(_Families(families()))
