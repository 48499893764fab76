"""Prometheus metrics of a broker (``metrics_port``; docs/metrics.md).

``BrokerMetrics(broker).start()`` serves ``/metrics`` on
``config.host:config.metrics_port`` from a registry of its own (never the
process-global one); ``port`` is the bound port then (``metrics_port`` 0
picks a free one). ``close()`` stops serving (within ~0.1 s); it is
idempotent. Collection is cheap for the hot path: counters are bumped
where requests are handled (metrics_stats.py), gauges are read from the
broker's state when scraped (metrics_collect.py).

``start()`` runs on the broker's loop after the handlers and the group
commit exist (Broker.start) and hands them their counters; with metrics
off they stay None and the request path pays one ``is None`` check.
A scrape never raises into the broker: the server runs in its own daemon
thread and the collector answers what it could collect.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from .collect import BrokerCollector
from .stats import CommitStats, RequestStats, TrafficStats

log = logging.getLogger("logbroker.metrics")
POLL_INTERVAL_S = 0.1  # how soon close() stops the server thread


class BrokerMetrics:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.port: "int | None" = None  # bound port once started (0 in the config picks one)
        self.registry = CollectorRegistry(auto_describe=False)
        self.requests, self.traffic, self.commit = RequestStats(), TrafficStats(), CommitStats()
        self.auth_failures = 0  # logbroker_auth_failures_total: see auth_failed()
        self.auth_throttles = 0  # logbroker_auth_throttled_total: see auth_throttled()
        self.authz_denials: dict[str, int] = {}  # request kind -> denials: see authz_denied()
        self._server = None
        self._thread: "threading.Thread | None" = None

    @property
    def url(self) -> str:
        host = self.broker.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

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
        b = self.broker
        self.registry.register(BrokerCollector(b, asyncio.get_running_loop(), self))
        self._server = _server(b.config.host, b.config.metrics_port, self.registry)
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": POLL_INTERVAL_S},
                                        name="logbroker-metrics", daemon=True)
        self._thread.start()
        b.services.requests, b.services.traffic, b.commit.stats = \
            self.requests, self.traffic, self.commit
        log.info("metrics on %s", self.url)

    def close(self) -> None:
        """Stop serving; a scrape under way finishes in its own thread."""
        server, self._server = self._server, None
        if server is None:
            return
        try:
            server.shutdown()  # waits for serve_forever to return (<= POLL_INTERVAL_S)
            server.server_close()
        except Exception:  # noqa: BLE001 - closing metrics must not fail a shutdown
            log.exception("closing the metrics server failed")


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        """Scrapes are not logged (one line on stderr each, by default)."""


def _server(host: str, port: int, registry: CollectorRegistry):
    """prometheus_client's WSGI app on a threading WSGI server bound to ``host:port``."""

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    return make_server(host, port, make_wsgi_app(registry), Server, handler_class=_QuietHandler)
