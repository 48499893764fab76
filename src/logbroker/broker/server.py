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
import os
from concurrent.futures import ThreadPoolExecutor

from ..protocol import messages as m
from ..protocol.codec import new_scratch
from ..storage.store import Store
from . import malloc
from ..net.admission import Admission, peer_ip
from .config import BrokerConfig
from ..net.connection import ClientConnection
from ..api.durability import FSYNC_THREADS, DataNotifier, GroupCommit
from ..api.handlers import Handlers
from ..security.quotas import Quotas

log = logging.getLogger("logbroker.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.connections: set[ClientConnection] = set()
        self.admission = Admission(config)  # max_connections and per-IP limits (admission.py)
        self.quotas = Quotas.of(config)  # None without quotas: the request path checks nothing
        self.scratch = new_scratch()  # the receive buffer every connection's reader shares
        self.port = config.port
        self._stopping: "asyncio.Event | None" = None
        self.store: "Store | None" = None
        self.node = None  # the ClusterNode in cluster mode
        self.kafka = None  # the Kafka protocol listener, with kafka_port (docs/kafka.md)
        self._closed_since_trim, self._trimmed_at = 0, 0.0

    # -- connections -------------------------------------------------------------------
    def register(self, conn: ClientConnection, transport) -> bool:
        """Count ``conn``, whose ``transport`` was just made; False when it is
        refused (over ``max_connections`` or its address's limit, or
        shutting down): the transport is then answered TOO_MANY_CONNECTIONS
        by a ``Refusal`` or closed (admission.py), and ``conn`` must let go
        of it. A TLS connection comes counted by its handshake (``conn.ip`` set)."""
        if transport.is_closing():  # lost between its TLS handshake and now
            self.unregister(conn)
            return False
        if self._stopping.is_set():
            self.unregister(conn)
            transport.abort()
            return False
        if conn.ip is None:
            ip = peer_ip(transport)
            why = self.admission.admit(ip)
            if why is not None:
                self.admission.refuse(transport, why, ip, self.scratch)
                return False
            conn.ip = ip
        self.connections.add(conn)
        return True

    def unregister(self, conn: ClientConnection) -> None:
        """Uncount ``conn`` (closed, or its TLS handshake failed); idempotent."""
        if conn.ip is not None:
            self.admission.release(conn.ip)
            conn.ip = None
        self.connections.discard(conn)
        self._closed_since_trim += 1

    async def dispatch(self, msg: m.Message) -> "m.Message | None":
        """The response to ``msg`` (None for an acks=0 produce); never raises."""
        return await self.handlers.dispatch(msg)

    def dispatch_now(self, msg: m.Message):
        """The response to ``msg``, or a future or coroutine of it (Handlers.dispatch_now)."""
        return self.handlers.dispatch_now(msg)

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        malloc.tune()
        fresh = _is_fresh(self.config.data_dir)
        clustered = self.config.etcd is not None
        self.store = Store.open(self.config.data_dir, self.config.storage, auto_hw=not clustered)
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="logbroker-io")
        # fsyncs of many partitions at once overlap (docs/architecture.md 58)
        self.fsync_pool = ThreadPoolExecutor(max_workers=FSYNC_THREADS,
                                             thread_name_prefix="logbroker-fsync")
        self.notifier = DataNotifier()
        self.server = await loop.create_server(self._protocol_factory(), self.config.host,
                                               self.config.port, reuse_address=True, backlog=512,
                                               start_serving=False)
        self.port = self.server.sockets[0].getsockname()[1]
        cluster = None
        if clustered:
            cluster = await self._join_cluster()
        self.commit = GroupCommit(self.fsync_pool, self.notifier,
                                  on_durable=cluster.node.replicas.on_durable if cluster else None)
        self.coordinator, groups = self._group_coordinator(cluster)
        self.handlers = Handlers(self.store, self.config, self.commit, self.notifier, port=self.port,
                                 cluster=cluster, groups=groups)
        self.coordinator.start()
        self.metrics = None
        if self.config.metrics_port is not None:  # docs/metrics.md
            from ..metrics.exporter import BrokerMetrics

            self.metrics = BrokerMetrics(self)
            self.metrics.start()
        self.console = None
        if self.config.console_port is not None:  # docs/console.md
            from ..console.app import Console

            self.console = Console(self)
            await self.console.start()
        if self.config.kafka_port is not None:
            from ..net.kafka_listener import KafkaListener

            self.kafka = KafkaListener(self)
            await self.kafka.start()
            if self.node is not None:  # its Kafka address joins our registration (docs/cluster.md)
                await self.node.advertise_kafka(self.kafka.site.host, self.kafka.site.port)
        await self.server.start_serving()
        self._tasks = [loop.create_task(self._every(self.config.housekeeping_ms / 1000, self._housekeep)),
                       loop.create_task(self._every(1.0, self._sweep))]
        log.info("listening on %s:%d data_dir=%s partitions=%d %s", self.config.host, self.port,
                 self.config.data_dir, len(self.store.logs()),
                 "fresh data dir" if fresh else f"clean_start={self.store.was_clean}")

    def _protocol_factory(self):
        """Each accepted connection's protocol: a ``ClientConnection``, or
        with ``tls_cert`` a TLS handshake that hands over to one (broker/tls.py)."""
        from ..net.tls import TlsListener, listener_context

        context = listener_context(self.config)
        if context is None:
            return lambda: ClientConnection(self)
        return TlsListener(self, context).protocol

    def _group_coordinator(self, cluster):
        """The consumer groups' coordinator over the offsets topic
        (docs/groups.md), and the handlers of its requests."""
        from ..coordinator.manager import Coordinator
        from ..api.groups import GroupRequests
        from ..metadata.group_host import ClusterHost, LocalHost

        host = ClusterHost(cluster, self.commit, self.config) if cluster is not None \
            else LocalHost(self.store, self.commit, self.config)
        coordinator = Coordinator(host, self.config.group_limits(),
                                  self.config.offsets_commit_timeout_ms)
        return coordinator, GroupRequests(coordinator)

    async def _join_cluster(self):
        """Cluster mode: register in etcd (advertising ``advertised_address``
        or the bound address) and start replicating."""
        from ..cluster.node import ClusterNode
        from ..api.cluster_handlers import ClusterHandlers
        from .config import parse_address

        self.node = ClusterNode(self.config, self.store, self.notifier.notify, self.executor)
        host, port = (parse_address(self.config.advertised_address) if self.config.advertised_address
                      else (self.config.host, self.port))
        await self.node.start(host, port)
        return ClusterHandlers(self.node, self.config, DataNotifier())

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
        if self.console is not None:
            await self.console.close()
        if self.node is not None:
            # leave the cluster first (the controller hands our leaderships to
            # in-sync followers at once), then drain: a long poll being drained
            # must not keep us leading while our followers cannot fetch
            await self.node.leave()
        await self.coordinator.close()  # parked joins and syncs answer NOT_COORDINATOR
        self.server.close()
        connections = list(self.connections)
        if self.kafka is not None:
            self.kafka.close()
            connections += self.kafka.connections
        loop = asyncio.get_running_loop()
        for conn in connections:
            conn.pause()
        drains = [loop.create_task(conn.drain()) for conn in connections]
        if drains:
            await asyncio.wait(drains, timeout=self.config.shutdown_timeout_ms / 1000)
        for conn in connections:
            conn.close("shutting down")
        for task in drains:
            task.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.node is not None:
            await self.node.close()
        self.executor.shutdown(wait=True)
        self.fsync_pool.shutdown(wait=True)
        if self.metrics is not None:
            self.metrics.close()
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
        if stats["deleted_segments"] or stats["errors"] or stats.get("compacted_bytes"):
            log.info("housekeeping: %s", stats)

    async def _sweep(self) -> None:
        now = asyncio.get_running_loop().time()
        for conn in list(self.connections):
            conn.idle_check(now)
        if self.kafka is not None:
            self.kafka.sweep(now)
        if self.quotas is not None:
            self.quotas.forget(now)
        if self._closed_since_trim >= TRIM_AFTER_CLOSED or now - self._trimmed_at > TRIM_EVERY_S:
            self._closed_since_trim, self._trimmed_at = 0, now
            malloc.trim()


TRIM_AFTER_CLOSED = 64  # connections closed since the last malloc trim
TRIM_EVERY_S = 30.0


def _is_fresh(data_dir: str) -> bool:
    """No previous run: the data dir is missing or empty."""
    try:
        return not os.listdir(data_dir)
    except FileNotFoundError:
        return True
