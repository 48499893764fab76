"""Leader epochs for Kafka clients (KIP-320, docs/kafka.md §4.10): Metadata
v9 (leader epochs a client trusts) and OffsetForLeaderEpoch (23, v0-3)
through our own OffsetForLeaderEpoch, on a single broker process (every
partition led in epoch 0). The cluster's answers after a leader change
are checked by tests/kafka/test_cluster.py's failover test, and a librdkafka
consumer validating its position at the new leader by
tests/kafka/test_cluster_clients.py's."""

from __future__ import annotations

import pytest

from tests.support.kafka_raw import Raw, kafka_broker, produce_body
from logbroker.security.acl import CLUSTER, TOPIC
from logbroker.security.acl_rules import RULES
from logbroker.protocol import messages as m
from logbroker.protocol.parts import EpochQuery

FENCED, UNKNOWN_EPOCH, UNKNOWN_TOPIC = 74, 75, 3


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-epochs") / "data") as started:
        yield started


def epochs(raw: Raw, version: int, parts, cid: int = 1) -> list:
    """(error, leader epoch, end offset) per (topic, partition, current, epoch)."""
    topics: dict = {}
    for topic, partition, current, epoch in parts:
        topics.setdefault(topic, []).append({"partition": partition, "leader_epoch": epoch,
                                             "current_leader_epoch": current})
    raw.sock.sendall(raw.send(23, version, cid, {"replica_id": -1, "topics": [
        {"topic": t, "partitions": ps} for t, ps in topics.items()]}))
    body = raw.recv(23, version)[1]
    return [(p.error_code, p.leader_epoch, p.end_offset) for t in body.topics
            for p in t.partitions]


def test_a_single_node_answers_epoch_0_to_the_log_end(kb):
    _b, bootstrap = kb
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(0, 8, 9, produce_body("ep", -1, [b"a", b"b", b"c"])))
        assert raw.recv(0, 8)[1].responses[0].partition_responses[0].error_code == 0
        raw.sock.sendall(raw.send(3, 9, 10, {"topics": [{"name": "ep"}, {"name": "ep-empty"}],
                                              "allow_auto_topic_creation": True}))
        md = raw.recv(3, 9)[1]  # v9 (flexible): the epoch clients now trust
        assert [(t.name, t.partitions[0].leader_epoch) for t in md.topics] == \
            [("ep", 0), ("ep-empty", 0)]
        # answers come grouped by topic, in the request's order
        assert epochs(raw, 3, [("ep", 0, 0, 0), ("ep-empty", 0, -1, 0), ("ep", 0, -1, 5)]) == \
            [(0, 0, 3), (0, 0, 3), (0, 0, 0)]
        # v0 carries no current epoch and answers no epoch
        assert epochs(raw, 0, [("ep", 0, -1, 0)]) == [(0, -1, 3)]
        assert epochs(raw, 2, [("ep", 0, 1, 0), ("ep", 0, -5, 0), ("nope", 0, -1, 0),
                               ("ep", 7, -1, 0)]) == \
            [(UNKNOWN_EPOCH, -1, -1), (FENCED, -1, -1), (UNKNOWN_TOPIC, -1, -1),
             (UNKNOWN_TOPIC, -1, -1)]
    finally:
        raw.close()


def test_a_consumers_query_needs_describe_a_followers_cluster_action():
    rule = RULES[m.OffsetForLeaderEpoch]
    consumer = m.OffsetForLeaderEpoch(replica_id=-1, parts=(
        EpochQuery("a", 0, -1, 0), EpochQuery("b", 0, -1, 0), EpochQuery("a", 1, -1, 0)))
    assert rule(consumer, lambda t: True) == [("describe", TOPIC, "a"), ("describe", TOPIC, "b")]
    follower = m.OffsetForLeaderEpoch(replica_id=2, parts=(EpochQuery("a", 0, 3, 2),))
    assert [(op, kind) for op, kind, _name in rule(follower, lambda t: True)] == \
        [("cluster_action", CLUSTER)]
