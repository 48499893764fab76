"""Kafka's DescribeCluster and ElectLeaders through our handlers
(docs/kafka.md). Each function takes the ``KafkaSite``, the request header
and body, and returns a ``Plan`` (plan.py).
"""

from __future__ import annotations

import logging

from ..errors import (EligibleLeadersNotAvailableError, ElectionNotNeededError,
                      InvalidRequestError, PreferredLeaderNotAvailableError,
                      UnknownTopicOrPartitionError)
from ..protocol import messages as m
from . import cluster_meta
from .plan import KafkaSite, Plan, by_topic
from .serve_meta import CLUSTER_ID
from .wire_errors import kafka_code, kafka_message

log = logging.getLogger("logbroker.kafka")
PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types


def describe_cluster(site: KafkaSite, header, body) -> Plan:
    """The brokers at their Kafka addresses (as Metadata lists them), the
    cluster id Metadata gives and the controller, through our
    DescribeCluster (no partitions asked). Authorized operations are not
    computed (their "not asked" value)."""
    def answer(resp: m.DescribeClusterResponse) -> dict:
        brokers = [{"broker_id": b["node_id"], "host": b["host"], "port": b["port"],
                    "rack": None} for b in cluster_meta.brokers(site)]
        return {"throttle_time_ms": 0, "error_code": kafka_code(resp.error),
                "error_message": kafka_message(resp.message), "cluster_id": CLUSTER_ID,
                "controller_id": cluster_meta.controller_id(site),
                "brokers": brokers if not resp.error else []}
    return Plan(m.DescribeCluster(topics=()), answer)


def elect_leaders(site: KafkaSite, header, body) -> Plan:
    """Preferred elections through our ElectLeaders, answered per partition
    as Kafka does: moved (0), already led by its preferred replica
    (ELECTION_NOT_NEEDED), preferred replica not live or not in sync
    (PREFERRED_LEADER_NOT_AVAILABLE), unknown (UNKNOWN_TOPIC_OR_PARTITION).
    An unclean election runs nothing: our controller already elects any
    live replica for a leaderless partition of a topic that allows it, so a
    partition with a leader is ELECTION_NOT_NEEDED and one without is
    ELIGIBLE_LEADERS_NOT_AVAILABLE."""
    kind = body.election_type if header.api_version >= 1 else PREFERRED
    asked = None if body.topic_partitions is None else \
        [(t.topic, p) for t in body.topic_partitions for p in t.partitions]
    names = None if asked is None else {t for t, _ in asked}
    if kind not in (PREFERRED, UNCLEAN):
        log.debug("ElectLeaders refused: election type %s", kind)
        return Plan(None, lambda _r: {"throttle_time_ms": 0,
                                      "error_code": InvalidRequestError.code,
                                      "replica_election_results": []})
    before = {(r.topic, r.partition): r for r in site.meta.all_partitions(names)}
    req = m.ElectLeaders(topics=None if names is None else tuple(sorted(names))) \
        if kind == PREFERRED else None

    def outcome(tp, after: dict) -> int:
        row = before.get(tp)
        if row is None:
            return UnknownTopicOrPartitionError.code
        if kind == UNCLEAN:
            return ElectionNotNeededError.code if row.leader >= 0 \
                else EligibleLeadersNotAvailableError.code
        error, leader = after.get(tp, (UnknownTopicOrPartitionError.code, -1))
        if error:
            return error
        if row.leader == row.preferred_leader:
            return ElectionNotNeededError.code
        return 0 if leader == row.preferred_leader else PreferredLeaderNotAvailableError.code

    def answer(resp) -> dict:
        if resp is not None and resp.error:
            return {"throttle_time_ms": 0, "error_code": kafka_code(resp.error),
                    "replica_election_results": []}
        after = {} if resp is None else {(t, p): (e, leader) for t, p, e, _m, leader in resp.parts}
        rows = [(t, p, outcome((t, p), after)) for t, p in (asked if asked is not None
                                                           else sorted(before))]
        return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": [
            {"topic": topic, "partition_result": [
                {"partition_id": p, "error_code": kafka_code(e), "error_message": None}
                for _t, p, e in group]} for topic, group in by_topic(rows)]}
    return Plan(req, answer)
