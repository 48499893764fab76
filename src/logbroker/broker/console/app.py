"""The web console's HTTP server: aiohttp on the broker's loop (docs/console.md).

``Console(broker).start()`` (Broker.start, on the loop) serves the pages and
their JSON API on ``config.host:config.console_port`` (0 picks a free port;
``port`` and ``url`` tell which) and starts the sampler of the charts
(history.py); ``close()`` stops both. Read-only: every route is a GET (and
its HEAD); there is no route that changes anything.

Each API handler takes the broker's state on the loop (state.take: no I/O)
and answers a pure view of it (views.py); the message browser reads one
bounded page in the console's own reader thread (messages.py). Every query
parameter is checked at the edge (inputs.py): a bad one is HTTP 400 with
``{"code", "message"}``, an unknown topic or group 404, a bug 500 with a
line in the broker log; never a traceback to the browser.

With ``auth_required`` the console refuses to start (INVALID_CONFIG) until
it can authenticate its users.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from aiohttp import web

from ...errors import (GroupNotFoundError, InvalidConfigError, LogbrokerError,
                       UnknownTopicOrPartitionError)
from ..metrics_stats import TrafficStats
from . import inputs, views
from .history import SAMPLE_S, History
from .messages import read_page
from .state import take

log = logging.getLogger("logbroker.console")
STATIC = Path(__file__).parent / "static"
CLOSE_TIMEOUT_S = 2.0
CONSOLE = web.AppKey("console", object)
HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
           "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
           "Referrer-Policy": "no-referrer", "Cache-Control": "no-store"}


class Console:
    def __init__(self, broker, sample_s: float = SAMPLE_S) -> None:
        self.broker, self.sample_s = broker, sample_s
        self.port: "int | None" = None
        self.history = History()
        self.traffic: "TrafficStats | None" = None
        self._runner: "web.AppRunner | None" = None
        self._sampler: "asyncio.Task | None" = None
        self._reader: "ThreadPoolExecutor | None" = None

    @property
    def url(self) -> str:
        host = self.broker.config.host
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/"

    async def start(self) -> None:
        b = self.broker
        if b.config.auth_required:
            raise InvalidConfigError("console with auth_required is not supported yet")
        # the traffic counters: the metrics' when they are on, else ours on the same hook
        self.traffic = b.metrics.traffic if b.metrics is not None else TrafficStats()
        if b.handlers.traffic is None:
            b.handlers.traffic = self.traffic
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="logbroker-console")
        self._runner = web.AppRunner(make_app(self), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, b.config.host, b.config.console_port, reuse_address=True)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._sampler = asyncio.get_running_loop().create_task(
            self.history.run(self.state, self.sample_s))
        log.info("console on %s", self.url)

    def state(self):
        return take(self.broker, self.traffic)

    async def close(self) -> None:
        """Stop the sampler and the server (bounded); idempotent, never raises."""
        sampler, self._sampler = self._sampler, None
        runner, self._runner = self._runner, None
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

    async def read_messages(self, q: inputs.MessageQuery) -> dict:
        lg = self.broker.store.get_log(q.topic, q.partition)  # UNKNOWN_TOPIC_OR_PARTITION
        return await asyncio.get_running_loop().run_in_executor(self._reader, read_page, lg, q)


def make_app(console: Console) -> web.Application:
    app = web.Application(middlewares=[_errors], client_max_size=4096)
    app[CONSOLE] = console
    r = app.router
    r.add_get("/", _index)
    r.add_get("/api/overview", _api(lambda c, q: views.overview(c.state())))
    r.add_get("/api/topics", _api(lambda c, q: views.topics(c.state())))
    r.add_get("/api/topic", _api(lambda c, q: views.topic(
        c.state(), inputs.check_topic(inputs.param(q, "name", "")))))
    r.add_get("/api/groups", _api(lambda c, q: views.groups(c.state())))
    r.add_get("/api/group", _api(lambda c, q: views.group(
        c.state(), inputs.check_group(inputs.param(q, "name", "")), c.history)))
    r.add_get("/api/throughput", _api(lambda c, q: {**views.throughput(c.history.traffic),
                                                     "sample_s": c.sample_s}))
    r.add_get("/api/messages", _messages)
    r.add_static("/static/", STATIC, show_index=False, follow_symlinks=False)
    app.on_response_prepare.append(_headers)
    return app


def _api(view):
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(view(request.app[CONSOLE], request.query))
    return handler


async def _messages(request: web.Request) -> web.Response:
    q = inputs.check_messages(request.query)
    return web.json_response(await request.app[CONSOLE].read_messages(q))


async def _index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html")


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)


@web.middleware
async def _errors(request: web.Request, handler):
    try:
        return await handler(request)
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
