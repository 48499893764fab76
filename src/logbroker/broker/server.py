"""The asyncio broker: accepts connections, dispatches requests, keeps house.

``Broker(config).run()`` opens the data dir (recovering it), listens, and
serves until ``stop()`` (SIGTERM/SIGINT in ``logbroker serve``): it then
stops accepting, lets requests in flight finish (bounded by
``shutdown_timeout_ms``), fsyncs and checkpoints every log, writes the
clean-shutdown marker and returns. Background loops (housekeeping, idle
sweeps) log their errors and go on.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor

from ..errors import InvalidRequestError, LogbrokerError
from ..protocol import messages as m
from ..storage.store import Store
from .config import BrokerConfig
from .connection import ClientConnection
from .durability import DataNotifier, GroupCommit
from .handlers import Handlers

log = logging.getLogger("logbroker.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.connections: set[ClientConnection] = set()
        self.port = config.port
        self._stopping: "asyncio.Event | None" = None
        self.store: "Store | None" = None

    # -- connections -------------------------------------------------------------------
    def register(self, conn: ClientConnection) -> bool:
        if len(self.connections) >= self.config.max_connections or self._stopping.is_set():
            return False
        self.connections.add(conn)
        return True

    def unregister(self, conn: ClientConnection) -> None:
        self.connections.discard(conn)

    async def dispatch(self, msg: m.Message) -> "m.Message | None":
        """The response to ``msg`` (None for an acks=0 produce); never raises."""
        try:
            if isinstance(msg, m.Produce):
                return await self.handlers.produce(msg)
            if isinstance(msg, m.Fetch):
                return await self.handlers.fetch(msg)
            handler = self.handlers.table.get(type(msg))
            if handler is None:
                raise InvalidRequestError(f"{type(msg).__name__} is not a request")
            return handler(msg)
        except LogbrokerError as exc:
            return m.RESPONSES[msg.API](error=exc.code, message=exc.message)
        except Exception:  # noqa: BLE001 - a bug must not take the broker down
            log.exception("handler for %s failed", type(msg).__name__)
            return m.RESPONSES[msg.API](error=-1, message="internal error (see broker log)")

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self.store = Store.open(self.config.data_dir, self.config.storage)
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="logbroker-io")
        self.notifier = DataNotifier()
        self.commit = GroupCommit(self.executor, self.notifier)
        self.handlers = Handlers(self.store, self.config, self.commit, self.notifier)
        self.server = await loop.create_server(lambda: ClientConnection(self), self.config.host,
                                               self.config.port, reuse_address=True, backlog=512)
        self.port = self.handlers.port = self.server.sockets[0].getsockname()[1]
        self._tasks = [loop.create_task(self._every(self.config.housekeeping_ms / 1000, self._housekeep)),
                       loop.create_task(self._every(1.0, self._sweep))]
        log.info("listening on %s:%d data_dir=%s partitions=%d clean_start=%s", self.config.host,
                 self.port, self.config.data_dir, len(self.store.logs()), self.store.was_clean)

    def stop(self) -> None:
        if self._stopping is not None:
            self._stopping.set()

    async def run(self, ready=None) -> None:
        """Start, call ``ready(broker)``, serve until ``stop()``, shut down."""
        await self.start()
        if ready is not None:
            ready(self)
        await self._stopping.wait()
        await self.shutdown()

    async def shutdown(self) -> None:
        log.info("shutting down: %d connection(s)", len(self.connections))
        self.server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.pause_reading()
        writers = [c.writer for c in self.connections if c.writer is not None]
        if writers:
            await asyncio.wait(writers, timeout=self.config.shutdown_timeout_ms / 1000)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.executor.shutdown(wait=True)
        self.store.close()
        log.info("stopped cleanly")

    # -- background loops ------------------------------------------------------------------
    async def _every(self, period: float, work) -> None:
        while True:
            await asyncio.sleep(period)
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:  # noqa: BLE001 - keep the loop alive
                log.exception("background task %s failed", work.__name__)

    async def _housekeep(self) -> None:
        stats = await asyncio.get_running_loop().run_in_executor(self.executor, self.store.tick)
        if stats["deleted_segments"] or stats["errors"]:
            log.info("housekeeping: %s", stats)

    async def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections):
            conn.idle_check(now)
