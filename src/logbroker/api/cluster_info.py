"""Requests about the cluster: Handshake, Metadata, DescribeCluster,
ElectLeaders, InitProducerId, answered alike on a single node and in a
cluster through the metadata interface (metadata/interface.py)."""

from __future__ import annotations

from .. import __version__, limits
from ..errors import LogbrokerError, UnknownTopicOrPartitionError, UnsupportedVersionError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import LeaderElected, PartitionLeaders, TopicCount
from ..limits import listed


def handshake(svc, req: m.Handshake, session) -> m.HandshakeResponse:
    if not req.min_version <= m.PROTOCOL_VERSION <= req.max_version:
        return m.HandshakeResponse(error=UnsupportedVersionError.code,
                                   message=f"broker speaks protocol version {m.PROTOCOL_VERSION}")
    return m.HandshakeResponse(broker_id=svc.config.broker_id, server=f"logbroker {__version__}")


async def metadata(svc, req: m.Metadata, session) -> m.MetadataResponse:
    """The named topics (every topic but the internal one when None), their
    partitions' leaders, replicas, ISR and epochs, the brokers and the
    controller; a missing topic is auto-created when the request and
    ``auto_create_topics`` allow it."""
    meta = svc.meta
    meta.check_available()
    names = req.topics if req.topics is not None else listed(meta.topic_names())
    topics, parts = [], []
    for name in names:
        try:
            limits.check_topic_name(name)
            count = meta.topic_partitions(name)
            if count is None and req.auto_create and svc.config.auto_create_topics:
                await meta.auto_create(name)
                count = meta.topic_partitions(name)
            if count is None:
                raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
            topics.append(TopicCount(name, 0, "", count))
            parts.extend(PartitionLeaders(r.topic, r.partition, r.leader, r.leader_epoch,
                                          r.replicas, r.isr) for r in meta.partitions_of(name))
        except LogbrokerError as exc:
            topics.append(TopicCount(name, *_err(exc), 0))
    return m.MetadataResponse(brokers=meta.brokers(), topics=tuple(topics),
                              controller=meta.controller(), partitions=tuple(parts))


async def describe_cluster(svc, req: m.DescribeCluster, session) -> m.DescribeClusterResponse:
    meta = svc.meta
    meta.check_available()
    names = set(req.topics) if req.topics is not None else None
    parts = tuple(meta.all_partitions(names))
    return m.DescribeClusterResponse(cluster=meta.cluster_name, controller=meta.controller(),
                                     brokers=meta.described_brokers(), partitions=parts)


async def elect_leaders(svc, req: m.ElectLeaders, session) -> m.ElectLeadersResponse:
    """Each partition of the named topics (every topic when None) led by
    its preferred replica where that one is live and in sync."""
    meta = svc.meta
    meta.check_available()
    names = set(req.topics) if req.topics is not None else None
    out, seen = [], set()
    for row in meta.all_partitions(names):
        seen.add(row.topic)
        try:
            leader = await meta.elect_preferred(row)
            out.append(LeaderElected(row.topic, row.partition, 0, "", leader))
        except LogbrokerError as exc:
            out.append(LeaderElected(row.topic, row.partition, *_err(exc), row.leader))
    for name in sorted((names or set()) - seen):
        unknown = UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        out.append(LeaderElected(name, -1, *_err(unknown), -1))
    return m.ElectLeadersResponse(parts=tuple(out))


async def init_producer_id(svc, req: m.InitProducerId, session) -> m.InitProducerIdResponse:
    """A producer id unique in the cluster (a single node: unique on it)."""
    return m.InitProducerIdResponse(producer_id=await svc.meta.new_producer_id(), producer_epoch=0)
