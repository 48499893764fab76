"""Request handlers: a message in, a response message out.

Handlers run on the broker's event loop and call the storage engine
directly (appends and reads of the page cache are short); fsyncs run in a
worker thread through ``GroupCommit``. Errors of one partition become that
partition's error code and message. ``dispatch(msg)`` is the one entry:
it checks the request at the edge (edge.py), runs its handler and never
raises (a bug is answered with UNKNOWN and logged).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import Callable

from .. import limits
from ..errors import (InvalidRequestError, LogbrokerError,
                      UnknownError, UnknownTopicOrPartitionError, UnsupportedVersionError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..storage.log import Log
from ..storage.store import Store
from ..security.auth import BrokerAuth
from ..broker.config import BrokerConfig
from .durability import DataNotifier, GroupCommit
from .edge import check_partition_key, check_request, listed
from .epoch_query import answer_epoch_query
from ..metrics.stats import RequestStats, TrafficStats
from .produce import ProduceAnswer, produce
from .topics_view import create_topics, delete_topics, describe_topics


log = logging.getLogger("logbroker.broker")


class Handlers:
    def __init__(self, store: Store, config: BrokerConfig, commit: GroupCommit,
                 notifier: DataNotifier, *, port: int, cluster=None, groups=None) -> None:
        """``cluster``: the ClusterHandlers of cluster mode (None: a single node);
        ``groups``: the coordinator's GroupRequests (the group requests go there)."""
        self.store, self.config, self.commit, self.notifier = store, config, commit, notifier
        self.port = port  # the bound port (metadata answers with it)
        self.cluster = cluster
        self.replicas = cluster.node.replicas if cluster is not None else None
        self._next_producer_id = int(time.time() * 1000) << 8
        # metrics (metrics.py sets them when metrics are on): None costs one check per request
        self.auth = BrokerAuth(store.meta, config, cluster.node if cluster is not None else None,
                               topics=store.topics)  # auth.py
        self.requests: "RequestStats | None" = None
        self.traffic: "TrafficStats | None" = None
        self.table: dict[type, Callable] = {
            m.Handshake: self.handshake, m.Metadata: self.metadata,
            m.CreateTopics: lambda r: create_topics(self.store, r),
            m.DeleteTopics: lambda r: delete_topics(self.store, r),
            m.DescribeTopics: lambda r: describe_topics(self.store, r),
            m.ListOffsets: self.list_offsets, m.InitProducerId: self.init_producer_id,
            m.DescribeCluster: self.describe_cluster, m.ElectLeaders: self.elect_leaders,
            m.OffsetForLeaderEpoch: self.offset_for_leader_epoch,
        }
        if cluster is not None:
            self.table.update(cluster.table)
        if groups is not None:
            from ..metadata.group_host import find_coordinator

            self.table.update(groups.table)
            self.table[m.FindCoordinator] = lambda r: find_coordinator(self, r)

    def dispatch_now(self, msg: m.Message):
        """``dispatch`` without a task where the request allows it: a Produce
        is appended in the caller's loop turn and answered with its response
        or a ``ProduceAnswer`` that completes with it (produce.py); any other request gets
        the coroutine ``dispatch(msg)`` to run as a task. Never raises."""
        if msg.__class__ is not m.Produce:
            return self.dispatch(msg)
        if self.requests is not None:
            return self._produce_timed(msg, self.requests)
        return self._produce_now(msg)

    def _produce_timed(self, msg: m.Produce, stats: "RequestStats"):
        """``_produce_now`` counted in the request metrics (its latency runs
        until the answer is complete: a waiting produce's fsync included)."""
        start = time.perf_counter()
        out = self._produce_now(msg)
        if isinstance(out, ProduceAnswer):
            out.add_done_callback(lambda _a: stats.observe(m.Produce, time.perf_counter() - start))
            return out
        stats.observe(m.Produce, time.perf_counter() - start)
        if out.__class__ is m.ProduceResponse and out.error:
            stats.error(m.Produce)
        return out

    def _produce_now(self, msg: m.Produce):
        try:
            check_request(msg)
            return produce(self, msg)
        except LogbrokerError as exc:
            return m.ProduceResponse(error=exc.code, message=exc.message)
        except Exception:  # noqa: BLE001 - a bug must not take the broker down
            log.exception("handler for Produce failed")
            return m.ProduceResponse(error=UnknownError.code,
                                     message="internal error (see broker log)")

    async def dispatch(self, msg: m.Message) -> "m.Message | None":
        """The response to request ``msg`` (None for an acks=0 produce); never
        raises: a refused request gets its error code, a bug UNKNOWN. With
        metrics on, each call is counted with its latency (a long-poll fetch's
        wait included) and a top-level error."""
        stats = self.requests
        start = time.perf_counter() if stats is not None else 0.0
        try:
            check_request(msg)
            if isinstance(msg, m.Produce):
                out = await self.produce(msg)
            elif isinstance(msg, m.Fetch):
                out = await self.fetch(msg)
            else:
                handler = self.table.get(type(msg))
                if handler is None:
                    raise InvalidRequestError(f"{type(msg).__name__} is not a request"
                                              + (" of a single node" if msg.API in m.REQUESTS else ""))
                out = handler(msg)
                if inspect.isawaitable(out):
                    out = await out
        except LogbrokerError as exc:
            out = m.RESPONSES[msg.API](error=exc.code, message=exc.message)
            if stats is not None:
                stats.error(msg.__class__)
        except Exception:  # noqa: BLE001 - a bug must not take the broker down
            log.exception("handler for %s failed", type(msg).__name__)
            out = m.RESPONSES[msg.API](error=UnknownError.code,
                                       message="internal error (see broker log)")
            if stats is not None:
                stats.error(msg.__class__)
        if stats is not None:
            stats.observe(msg.__class__, time.perf_counter() - start)
        return out

    # -- logs ------------------------------------------------------------------
    def log_for(self, topic: str, partition: int, *, create: bool = False) -> Log:
        """The log of a partition (its topic created if ``create`` and it is
        unknown); raises INVALID_TOPIC / INVALID_REQUEST for a bad name or
        number, UNKNOWN_TOPIC_OR_PARTITION for a missing one."""
        check_partition_key(topic, partition)
        if self.replicas is not None:  # cluster mode: only the leader serves clients
            self._known(topic)
            return self.replicas.leader((topic, partition)).log
        try:
            return self.store.get_log(topic, partition)
        except UnknownTopicOrPartitionError:
            if not create or self.store.topics.get(topic) is not None:
                raise
        self.store.create_topic(topic, self.config.default_partitions)
        return self.store.get_log(topic, partition)

    def _known(self, topic: str) -> None:
        self.cluster.known(topic)

    # -- simple requests ------------------------------------------------------------
    def handshake(self, req: m.Handshake) -> m.HandshakeResponse:
        if not req.min_version <= m.PROTOCOL_VERSION <= req.max_version:
            return m.HandshakeResponse(error=UnsupportedVersionError.code,
                                       message=f"broker speaks protocol version {m.PROTOCOL_VERSION}")
        from .. import __version__

        return m.HandshakeResponse(broker_id=self.config.broker_id, server=f"logbroker {__version__}")

    def metadata(self, req: m.Metadata) -> m.MetadataResponse:
        names = req.topics if req.topics is not None \
            else listed(t.name for t in self.store.topics.list())
        topics = []
        for name in names:
            try:
                limits.check_topic_name(name)
                topic = self.store.topics.get(name)
                if topic is None and req.auto_create and self.config.auto_create_topics:
                    topic = self.store.create_topic(name, self.config.default_partitions)
                if topic is None:
                    raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
                topics.append((name, 0, "", topic.partitions))
            except LogbrokerError as exc:
                topics.append((name, *_err(exc), 0))
        me = self.config.broker_id
        parts = tuple((name, p, me, 0, (me,), (me,)) for name, error, _, count in topics
                      if not error for p in range(count))
        return m.MetadataResponse(brokers=((me, self.config.host, self.port),),
                                  topics=tuple(topics), partitions=parts)

    def describe_cluster(self, req: m.DescribeCluster) -> m.DescribeClusterResponse:
        me = self.config.broker_id
        meta = self.metadata(m.Metadata(topics=req.topics))
        return m.DescribeClusterResponse(
            brokers=((me, self.config.host, self.port, True),),
            partitions=tuple((*p, me) for p in meta.partitions))

    def offset_for_leader_epoch(self, req: m.OffsetForLeaderEpoch
                                ) -> m.OffsetForLeaderEpochResponse:
        """A single node leads every partition in epoch 0 (Metadata says so)."""
        return answer_epoch_query(req, lambda t, p: (self.store.get_log(t, p), 0))

    def elect_leaders(self, req: m.ElectLeaders) -> m.ElectLeadersResponse:
        meta = self.metadata(m.Metadata(topics=req.topics))
        errors = tuple((name, -1, code, message, -1) for name, code, message, _ in meta.topics if code)
        return m.ElectLeadersResponse(parts=tuple((t, p, 0, "", leader)
                                                  for t, p, leader, *_ in meta.partitions) + errors)

    def init_producer_id(self, req: m.InitProducerId) -> m.InitProducerIdResponse:
        self._next_producer_id += 1
        return m.InitProducerIdResponse(producer_id=self._next_producer_id, producer_epoch=0)

    def list_offsets(self, req: m.ListOffsets) -> m.ListOffsetsResponse:
        out = []
        for topic, partition, spec in req.parts:
            try:
                lg = self.log_for(topic, partition)
                if self.replicas is not None:
                    self.replicas.settled_leader((topic, partition))
                limits.check_offset_spec(spec)
                if spec == m.EARLIEST:
                    out.append((topic, partition, 0, "", lg.log_start_offset, -1))
                elif spec == m.LATEST:
                    out.append((topic, partition, 0, "", lg.high_watermark, -1))
                else:
                    hit = lg.offset_for_timestamp(spec)
                    if hit is None or hit.offset >= lg.high_watermark:
                        out.append((topic, partition, 0, "", -1, -1))
                    else:
                        out.append((topic, partition, 0, "", hit.offset, hit.timestamp))
            except LogbrokerError as exc:
                out.append((topic, partition, *_err(exc), -1, -1))
        return m.ListOffsetsResponse(parts=tuple(out))

    # -- produce -------------------------------------------------------------------
    async def produce(self, req: m.Produce) -> "m.ProduceResponse | None":
        out = produce(self, req)
        return await out if isinstance(out, ProduceAnswer) else out

    # -- fetch ----------------------------------------------------------------------
    async def fetch(self, req: m.Fetch) -> m.FetchResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, req.max_wait_ms) / 1000
        while True:
            parts, payload, total, logs, failed = self._read(req)
            left = deadline - loop.time()
            if total >= req.min_bytes or left <= 0 or failed or not logs:
                if total and self.traffic is not None:
                    fetched = self.traffic.fetched
                    for part in parts:
                        if part[6]:
                            fetched(part[0], part[1], part[6])
                return m.FetchResponse(parts=tuple(parts), payload=tuple(payload))
            await self.notifier.wait(logs, left)

    def _read(self, req: m.Fetch):
        parts, payload, logs, total, failed = [], [], [], 0, False
        budget = max(req.max_bytes, 1)
        for topic, partition, offset, max_bytes in req.parts:
            lg = None
            try:
                lg = self.log_for(topic, partition)
                limits.check_offset(offset)
                limits.check_int(max_bytes, "max_bytes", 0, limits.MAX_FETCH_BYTES)
                logs.append(lg)
                data = None
                if budget > 0 or total == 0:
                    data = lg.slice(offset, max(1, min(max_bytes, budget)), upto=lg.high_watermark)
                data = data or b""
                parts.append((topic, partition, 0, "", lg.high_watermark, lg.log_start_offset,
                              len(data)))
                payload.append(data)
                total += len(data)
                budget -= len(data)
            except LogbrokerError as exc:
                failed = True
                hw, start = (-1, -1) if lg is None else (lg.high_watermark, lg.log_start_offset)
                parts.append((topic, partition, *_err(exc), hw, start, 0))
                payload.append(b"")
        return parts, payload, total, logs, failed
