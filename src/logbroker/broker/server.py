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
import gc
import logging
import os
from concurrent.futures import ThreadPoolExecutor

from ..api.groups import GroupRequests
from ..api.transactions import build_txn_coordinator
from ..api.txn_verify import PartitionVerifier
from ..api.inflation import Inflation
from ..api.pipeline import Pipeline
from ..api.services import Services
from ..coordinator.manager import Coordinator
from ..durability import FSYNC_THREADS, DataNotifier, GroupCommit
from ..metadata.local import LocalMetadata
from ..net.admission import Admission
from ..net.connection import ClientConnection
from ..net.listener import Listener
from ..protocol.codec import new_scratch
from ..security.auth import BrokerAuth
from ..security.quotas import Quotas
from ..storage.shared_sync import SharedSync
from ..storage.store import Store
from . import malloc
from .config import BrokerConfig
from .kafka_listeners import specs as kafka_listener_specs

log = logging.getLogger("logbroker.broker")


class Broker:
    def __init__(self, config: BrokerConfig) -> None:
        self.config = config
        self.admission = Admission(config)  # max_connections and per-IP limits (net/admission.py)
        self.quotas = Quotas.of(config)  # None without quotas: the request path checks nothing
        self.scratch = new_scratch()  # the receive buffer every connection's reader shares
        self.port = config.port
        self.stopping = False  # set by stop(): no new connection is taken
        self._stopping: "asyncio.Event | None" = None
        self.store: "Store | None" = None
        self.meta = None  # the metadata interface (metadata/interface.py), picked at start
        self.kafka = None  # the first Kafka protocol listener (docs/kafka.md)
        self.kafka_listeners: list = []  # every one (broker/kafka_listeners.py)
        self.listener: "Listener | None" = None  # our protocol's listener
        self._closed_since_trim, self._trimmed_at = 0, 0.0

    @property
    def connections(self) -> set:
        """Our listener's connections (the Kafka listener's: ``kafka.connections``)."""
        return self.listener.connections if self.listener is not None else set()

    def closed_one(self) -> None:
        """A connection of either listener closed (malloc trims follow closes)."""
        self._closed_since_trim += 1

    # -- lifecycle ---------------------------------------------------------------------
    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        malloc.tune()
        config = self.config
        fresh = _is_fresh(config.data_dir)
        clustered = config.etcd is not None
        gc.disable()  # loading builds long-lived state only: no collection would free any of it
        try:
            self.store = Store.open(config.data_dir, config.storage, auto_hw=not clustered)
        finally:
            gc.freeze()  # ... and out of the full collections while serving (decision 104)
            gc.enable()
        self.shared = SharedSync(config.data_dir)  # one syncfs for many logs (decision 103)
        # a turn's group commit of many logs: the journal (decision 120), else the syncfs
        self.barrier = self.store.journal or self.shared
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="logbroker-io")
        # fsyncs of many partitions at once overlap (docs/architecture.md 58)
        self.fsync_pool = ThreadPoolExecutor(max_workers=FSYNC_THREADS,
                                             thread_name_prefix="logbroker-fsync")
        self.notifier = DataNotifier()
        self.listener = Listener(self, "", config.host, config.port, ClientConnection,
                                 answer_refusals=True)
        await self.listener.start(start_serving=False)
        self.port = self.listener.port
        self.meta = await self._metadata(clustered)
        self.coordinator = Coordinator(self.meta.group_host(), config.group_limits(),
                                       config.offsets_commit_timeout_ms)
        # the topics every broker knows (a cluster's view, not the ones stored here)
        auth = BrokerAuth(config, self.meta.access_stores, topics=self.meta)
        self.services = Services(config=config, store=self.store, meta=self.meta,
                                 commit=self.commit, notifier=self.notifier,
                                 groups=GroupRequests(self.coordinator, self.meta), auth=auth,
                                 port=self.port)
        self.inflation = Inflation(self.store, config.max_inflated_bytes_per_request,
                                   config.inflation_bytes_per_s_per_connection)
        self.pipeline = Pipeline(self.services, self.quotas, self.inflation)
        self.services.offload = self.inflation.run
        self.coordinator.start()
        self.services.txns = self.txns = build_txn_coordinator(self.services)
        if config.transaction_partition_verification_enable:
            self.services.verifier = PartitionVerifier(self.services)
        self.txns.start()
        self.metrics = None
        if config.metrics_port is not None:  # docs/metrics.md
            from ..metrics.exporter import BrokerMetrics

            self.metrics = BrokerMetrics(self)
            self.metrics.start()
        self.console = None
        if config.console_port is not None:  # docs/console.md
            from ..console.app import Console

            self.console = Console(self)
            await self.console.start()
        specs = kafka_listener_specs(config)
        if specs:
            from ..net.kafka_listener import KafkaListener

            self.kafka_listeners = [KafkaListener(self, spec) for spec in specs]
            for kafka in self.kafka_listeners:
                await kafka.start()
            self.kafka = self.kafka_listeners[0]
            # their Kafka addresses join our registration (docs/cluster.md)
            await self.meta.advertise_kafka(self.kafka.site.host, self.kafka.site.port, tuple(
                (k.spec.name, k.site.host, k.site.port) for k in self.kafka_listeners
                if k.spec.name))
        await self.listener.serve()
        self._tasks = [loop.create_task(self._every(config.housekeeping_ms / 1000, self._housekeep)),
                       loop.create_task(self._every(1.0, self._sweep))]
        log.info("listening on %s:%d data_dir=%s partitions=%d %s", config.host, self.port,
                 config.data_dir, len(self.store.logs()),
                 "fresh data dir" if fresh else f"clean_start={self.store.was_clean}")

    async def _metadata(self, clustered: bool):
        """The metadata interface (metadata/interface.py): a single node's,
        or in cluster mode (``etcd``) the cluster's, after registering in
        etcd (advertising ``advertised_address`` or the bound address) and
        starting to replicate. The one place that picks the mode."""
        if not clustered:
            self.commit = GroupCommit(self.fsync_pool, self.notifier, shared=self.barrier)
            return LocalMetadata(self.store, self.config, self.commit, self.port, self.executor)
        from ..cluster.node import ClusterNode
        from ..limits import parse_address
        from ..metadata.cluster import ClusterMetadata

        node = ClusterNode(self.config, self.store, self.notifier.notify, self.executor)
        host, port = (parse_address(self.config.advertised_address)
                      if self.config.advertised_address else (self.config.host, self.port))
        await node.start(host, port)
        self.commit = GroupCommit(self.fsync_pool, self.notifier,
                                  on_durable=node.replicas.on_durable, shared=self.barrier)
        return ClusterMetadata(node, self.config, self.commit)

    def stop(self) -> None:
        self.stopping = True
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
        # leave the cluster first (the controller hands our leaderships to
        # in-sync followers at once), then drain: a long poll being drained
        # must not keep us leading while our followers cannot fetch
        await self.meta.leave()
        await self.coordinator.close()  # parked joins and syncs answer NOT_COORDINATOR
        await self.txns.close()  # in-flight markers: the next coordinator finishes them
        if self.services.verifier is not None:
            await self.services.verifier.close()
        self.listener.close()
        connections = list(self.listener.connections)
        for kafka in self.kafka_listeners:
            kafka.close()
            connections += kafka.connections
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
        await self.meta.close()
        self.executor.shutdown(wait=True)
        self.fsync_pool.shutdown(wait=True)
        self.inflation.close()
        if self.metrics is not None:
            self.metrics.close()
        self.store.close(shared=self.shared)
        self.shared.close()
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
        self.listener.sweep(now)
        for kafka in self.kafka_listeners:
            kafka.sweep(now)
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
