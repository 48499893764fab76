"""The web console's HTTP server: aiohttp on the broker's loop (docs/console.md).

``Console(broker).start()`` (Broker.start, on the loop) serves the pages and
their JSON API on ``config.host:config.console_port`` (0 picks a free port;
``port`` and ``url`` tell which) and starts the sampler of the charts
(history.py); ``close()`` stops both. Read-only: every route is a GET (and
its HEAD); there is no route that changes anything.

Each API handler gathers the broker's state on the loop (``refresh``:
state.gather, in ~1 ms slices that yield to the loop; requests arriving
while one gather runs share it; no I/O) and answers a pure view of it
(views.py); the message browser reads one
bounded page in the console's own reader thread (messages.py), as does
the transactions page (txn_views.py: up to 100,000 ids sorted). Every query
parameter is checked at the edge (inputs.py): a bad one is HTTP 400 with
``{"code", "message"}``, an unknown topic or group 404, a bug 500 with a
line in the broker log; never a traceback to the browser.

Security (docs/console.md, "Security"): with ``auth_required`` every page
and API call needs a login session (login.py: the broker's SCRAM users;
``/login`` and ``/logout`` are the only POST routes, ``/static/`` the only
paths open without one), and with ACLs enforced each answer is checked and
narrowed for the session's principal (pages.py, access.py); a denial is 403.
With ``tls_cert`` the console is served over HTTPS with the listener's
certificate (and client-certificate requirement); ``auth_required`` without
TLS is refused (INVALID_CONFIG) unless the host is a loopback address.
A console on a loopback address answers only requests whose Host names an
IP address or ``localhost`` (else 421): a web page of another site whose
name was re-pointed at 127.0.0.1 (DNS rebinding) cannot read it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from ..errors import (ClusterAuthorizationFailedError, GroupAuthorizationFailedError,
                       GroupNotFoundError, InvalidConfigError, LogbrokerError,
                       TopicAuthorizationFailedError, UnknownTopicOrPartitionError)
from ..limits import is_loopback_host
from ..metrics.stats import TrafficStats
from . import inputs, pages
from .access import Access
from .history import SAMPLE_S, History
from .login import Gate
from .messages import read_page
from .state import gather, txn_ids

log = logging.getLogger("logbroker.console")
STATIC = Path(__file__).parent / "static"
CLOSE_TIMEOUT_S = 2.0
CONSOLE = web.AppKey("console", object)
ACCESS = web.RequestKey("access", Access)  # what the request's user may see
DENIED = (TopicAuthorizationFailedError, GroupAuthorizationFailedError,
          ClusterAuthorizationFailedError)
OPEN_PATHS = frozenset({"/login", "/logout"})  # and /static/: reachable without a session
HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
           "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


class Console:
    def __init__(self, broker, sample_s: float = SAMPLE_S) -> None:
        self.broker, self.sample_s = broker, sample_s
        self.port: "int | None" = None
        self.history = History()
        self.traffic: "TrafficStats | None" = None
        self._runner: "web.AppRunner | None" = None
        self._sampler: "asyncio.Task | None" = None
        self._reader: "ThreadPoolExecutor | None" = None
        self._state = None  # the last state gathered (refresh)
        self._gathering: "asyncio.Task | None" = None
        self.gate: "Gate | None" = None  # the login, with auth_required
        self.secure = broker.config.tls_cert is not None  # HTTPS
        self.loopback = _loopback(broker.config.host)  # Host must name an IP or localhost

    @property
    def url(self) -> str:
        host = self.broker.config.host
        scheme = "https" if self.secure else "http"
        return f"{scheme}://{f'[{host}]' if ':' in host else host}:{self.port}/"

    async def start(self) -> None:
        b = self.broker
        ssl_context = _tls(b.config)
        if b.config.auth_required:
            metrics = b.metrics
            self.gate = Gate(b.services.auth, None if metrics is None else metrics.auth_failed,
                             secure=ssl_context is not None)
        # the traffic counters: the metrics' when they are on, else ours on the same hook
        self.traffic = b.metrics.traffic if b.metrics is not None else TrafficStats()
        if b.services.traffic is None:
            b.services.traffic = self.traffic
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logbroker-console")
        self._runner = web.AppRunner(make_app(self), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, b.config.host, b.config.console_port,
                           reuse_address=True, ssl_context=ssl_context)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._sampler = asyncio.get_running_loop().create_task(
            self.history.run(self._sample, self.sample_s))
        log.info("console on %s", self.url)

    async def refresh(self) -> None:
        """Gather the state (state.gather, in slices); a call while a gather
        runs waits for that one. Every handler calls it, then its page,
        which reads ``state()`` with no await in between (so it sees what
        its own refresh gathered)."""
        if self._gathering is None or self._gathering.done():
            self._gathering = asyncio.get_running_loop().create_task(
                gather(self.broker, self.traffic))
        self._state = await asyncio.shield(self._gathering)

    def state(self):
        """The state the last ``refresh`` gathered."""
        return self._state

    async def _sample(self):
        await self.refresh()
        return self._state

    async def close(self) -> None:
        """Stop the sampler and the server (bounded); idempotent, never raises."""
        sampler, self._sampler = self._sampler, None
        runner, self._runner = self._runner, None
        if self._gathering is not None:
            self._gathering.cancel()
        try:
            if sampler is not None:
                sampler.cancel()
                await asyncio.gather(sampler, return_exceptions=True)
            if runner is not None:
                await asyncio.wait_for(runner.cleanup(), CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - closing the console must not fail a shutdown
            log.exception("closing the console failed")
        if self._reader is not None:
            self._reader.shutdown(wait=False, cancel_futures=True)
            self._reader = None
        if self.gate is not None:
            self.gate.close()

    async def transactions(self, a: Access) -> dict:
        """The transactions page for ``a``: the state and the coordinator's
        ids copied on the loop, the page computed in the reader thread."""
        await self.refresh()
        state, ids = a.narrow(self.state()), txn_ids(self.broker)
        counts = dict(getattr(getattr(self.broker, "txns", None), "outcomes", None) or {})
        return await asyncio.get_running_loop().run_in_executor(
            self._reader, pages.transactions, state, ids, counts, a)

    async def read_messages(self, q: inputs.MessageQuery) -> dict:
        lg = self.broker.store.get_log(q.topic, q.partition)  # UNKNOWN_TOPIC_OR_PARTITION
        return await asyncio.get_running_loop().run_in_executor(self._reader, read_page, lg, q)


def make_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[_errors, _rebinding, _session], client_max_size=4096)
    app[CONSOLE] = console
    r = app.router
    r.add_get("/", _index)
    for path, page in (("overview", pages.overview), ("topics", pages.topics),
                       ("topic", pages.topic), ("groups", pages.groups), ("group", pages.group),
                       ("throughput", pages.throughput), ("session", pages.session)):
        r.add_get(f"/api/{path}", _api(page))
    r.add_get("/api/messages", _messages)
    r.add_get("/api/transactions", _transactions)
    r.add_get("/login", _gated("login_form"))
    r.add_post("/login", _gated("login"))  # the only POSTs: login and logout (login.py)
    r.add_post("/logout", _gated("logout"))
    r.add_static("/static/", STATIC, show_index=False, follow_symlinks=False)
    app.on_response_prepare.append(_headers)
    return app


def _api(page):
    async def handler(request: web.Request) -> web.Response:
        console = request.app[CONSOLE]
        refresh = getattr(console, "refresh", None)  # a test's console may hold a fixed state
        if refresh is not None:
            await refresh()
        return web.json_response(page(console, request.query, request[ACCESS]))
    return handler


def _gated(name: str):
    """The gate's handler ``name``; without a login (auth_required off), 404."""
    async def handler(request: web.Request) -> web.StreamResponse:
        gate = getattr(request.app[CONSOLE], "gate", None)
        if gate is None:
            raise web.HTTPNotFound()
        return await getattr(gate, name)(request)
    return handler


async def _messages(request: web.Request) -> web.Response:
    q = pages.messages_query(request.query, request[ACCESS])
    return web.json_response(await request.app[CONSOLE].read_messages(q))


async def _transactions(request: web.Request) -> web.Response:
    return web.json_response(await request.app[CONSOLE].transactions(request[ACCESS]))


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)


@web.middleware
async def _session(request: web.Request, handler):
    """``request[ACCESS]``: what the request's user may see; without a
    live session (with a login), 401 for the API and 303 to /login for pages."""
    gate = getattr(request.app[CONSOLE], "gate", None)
    principal = None
    if gate is not None and not (request.path in OPEN_PATHS
                                 or request.path.startswith("/static/")):
        principal = gate.principal(request)
        if principal is None:
            if request.path.startswith("/api/"):
                return _error(401, "LOGIN_REQUIRED", "log in first (/login)")
            return web.Response(status=303, headers={"Location": "/login"})
    request[ACCESS] = Access(None if gate is None else gate.auth, principal)
    return await handler(request)


@web.middleware
async def _rebinding(request: web.Request, handler):
    """421 for a loopback console asked under a name other than an IP or localhost."""
    if getattr(request.app[CONSOLE], "loopback", False) and not _local_name(request.host):
        return _error(421, "MISDIRECTED_REQUEST", "this console answers only to its IP address "
                      "or localhost, not to the name in the Host header (DNS rebinding guard)")
    return await handler(request)


def _local_name(host: str) -> bool:
    """``host`` (a Host header, port optional) names an IP address or localhost."""
    name = host.partition("]")[0][1:] if host.startswith("[") else host.rpartition(":")[0] \
        if host.count(":") == 1 else host
    if name.lower() in ("localhost", "localhost."):
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
    except DENIED as exc:
        metrics = getattr(getattr(request.app[CONSOLE], "broker", None), "metrics", None)
        if metrics is not None:
            metrics.authz_denied("Console")
        return _error(403, exc.name, exc.message)
    except (UnknownTopicOrPartitionError, GroupNotFoundError) as exc:
        return _error(404, exc.name, exc.message)
    except LogbrokerError as exc:
        return _error(400, exc.name, exc.message)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return _error(exc.status, exc.reason.upper().replace(" ", "_"), exc.reason)
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - a bug answers 500 and is logged, never a traceback
        log.exception("console request %s failed", request.path)
        return _error(500, "UNKNOWN", "internal error (see the broker log)")


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"code": code, "message": message}, status=status)


def _tls(config):
    """The console's TLS context (the listener's certificate and client-
    certificate requirement), or None; INVALID_CONFIG for auth_required
    without TLS on a host other than loopback."""
    if config.tls_cert is not None:
        from ..tls import server_context

        return server_context(config.tls_cert, config.tls_key, config.tls_ca,
                              config.tls_client_auth)
    if config.auth_required and not _loopback(config.host):
        raise InvalidConfigError(
            f"the console with auth_required on host {config.host!r} needs TLS (tls_cert and "
            "tls_key): its login passwords would cross the network in clear; serve it on a "
            "loopback host (127.0.0.1) or turn TLS on (docs/console.md, \"Security\")")
    return None


def _loopback(host: str) -> bool:
    return is_loopback_host(host)
