"""CreateTopics with a manual replica assignment on one broker (the cluster's
placement: test_create_assign_cluster.py): Kafka's rules checked on the
Kafka listener through confluent-kafka's AdminClient and raw requests, the
text form the assignment travels in and the placement check as units."""

from __future__ import annotations

import pytest

from logbroker import limits
from logbroker.cluster.placement import given
from logbroker.errors import InvalidReplicaAssignmentError
from tests.support.fixtures import wait_until
from tests.support.kafka_raw import Raw, kafka_broker

WAIT = 15.0
INVALID_REQUEST, INVALID_REPLICA_ASSIGNMENT = 42, 39


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """(the broker process, its Kafka address); it logs at debug level."""
    with kafka_broker(tmp_path_factory.mktemp("create-assign") / "data",
                      "--log-level", "debug") as started:
        yield started


@pytest.fixture(scope="module")
def bootstrap(broker):
    return broker[1]


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _create_raw(bootstrap, topic: dict, validate_only: bool = False) -> tuple:
    """One CreateTopics v4 of ``topic`` (name, num_partitions,
    replication_factor, assignments): (error code, message)."""
    raw = Raw(bootstrap)
    try:
        body = {"topics": [{"configs": [], **topic}], "timeout_ms": 5000,
                "validate_only": validate_only}
        raw.sock.sendall(raw.send(19, 4, 1, body))
        (row,) = raw.recv(19, 4)[1].topics
        return row.error_code, row.error_message
    finally:
        raw.close()


def test_a_single_broker_takes_lists_naming_itself_alone(broker, bootstrap):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic
    admin = _admin(bootstrap)
    (me,) = admin.list_topics(timeout=WAIT).brokers
    assert admin.create_topics([NewTopic("sa-ok", 3, replica_assignment=[[me], [me], [me]])])[
        "sa-ok"].result(WAIT) is None
    parts = admin.list_topics("sa-ok", timeout=WAIT).topics["sa-ok"].partitions
    assert sorted(parts) == [0, 1, 2]
    assert {p.leader for p in parts.values()} == {me}
    for bad in ([[me, me + 1]], [[me + 1]], [[me], [me, me]]):
        with pytest.raises(KafkaException) as info:
            admin.create_topics([NewTopic("sa-bad", len(bad), replica_assignment=bad)])["sa-bad"].result(WAIT)
        assert info.value.args[0].code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, bad
    assert "sa-bad" not in admin.list_topics(timeout=WAIT).topics
    wait_until(lambda: "refused CreateTopics name='sa-bad' from" in broker[0].log(), 5,
               "the refusal logged")
    assert "CreateTopics of 'sa-bad' refused: replica list 0 names" in broker[0].log()


def test_kafkas_rules_for_the_lists_themselves(bootstrap):
    def lists(*rows):
        return [{"partition_index": i, "broker_ids": b} for i, b in rows]
    cases = [  # (num_partitions, replication_factor, assignments) -> error, in its message
        ((2, -1, lists((0, [0]), (1, [0]))), INVALID_REQUEST, "num_partitions"),
        ((-1, 1, lists((0, [0]))), INVALID_REQUEST, "replication_factor"),
        ((-1, -1, lists((0, [0]), (2, [0]))), INVALID_REPLICA_ASSIGNMENT, "0..n-1"),
        ((-1, -1, lists((0, [0]), (0, [0]))), INVALID_REPLICA_ASSIGNMENT, "0..n-1"),
        ((-1, -1, lists((0, [0]), (1, []))), INVALID_REPLICA_ASSIGNMENT, "partition 1's"),
        ((-1, -1, lists((0, [-3]))), INVALID_REPLICA_ASSIGNMENT, "broker ids"),
    ]
    for (n, rf, assignments), code, why in cases:
        for validate_only in (True, False):
            error, message = _create_raw(bootstrap, {
                "name": "sa-rule", "num_partitions": n, "replication_factor": rf,
                "assignments": assignments}, validate_only)
            assert (error, why in (message or "")) == (code, True), (assignments, message)
    for validate_only in (True, False):  # a broker that is not registered: both ways
        assert _create_raw(bootstrap, {"name": "sa-rule", "num_partitions": -1,
                                       "replication_factor": -1, "assignments": lists(
                                           (0, [77]))}, validate_only)[0] \
            == INVALID_REPLICA_ASSIGNMENT
    # lists given out of order are the partitions' numbers, not their order
    assert _create_raw(bootstrap, {"name": "sa-order", "num_partitions": -1,
                                   "replication_factor": -1,
                                   "assignments": lists((1, [0]), (0, [0]))}) == (0, None)


def test_the_assignment_text_round_trips_and_refuses_bad_forms():
    lists = ((1, 2), (2, 3), (3, 1))
    assert limits.parse_replica_assignment(limits.format_replica_assignment(lists)) == lists
    for bad in ("", "1::2", "1,,2", "-1", "1:" + "9" * 5000, "²", 7, None,
                ",".join(["1"] * (limits.MAX_PARTITIONS + 1)),
                ":".join(["1"] * (limits.MAX_REPLICAS + 1))):
        with pytest.raises(InvalidReplicaAssignmentError):
            limits.parse_replica_assignment(bad)


def test_placement_checks_the_lists_a_client_gives():
    assert given(((2, 1), (1, 3)), 2, None, {1, 2, 3}) == [(2, 1), (1, 3)]
    for lists, count, rf, why in ((((1, 2),), 2, None, "one assignment per partition"),
                                  (((1, 2), (1,)), 2, None, "2 distinct"),
                                  (((1, 1),), 1, None, "distinct"),
                                  (((1, 2),), 1, 3, "3 distinct"),
                                  (((1, 9),), 1, None, "[9], not live")):
        with pytest.raises(InvalidReplicaAssignmentError, match=why.replace("[", r"\[")):
            given(lists, count, rf, {1, 2, 3})


def test_the_translator_bounds_the_lists_before_reading_them():
    from types import SimpleNamespace as N
    from logbroker.kafka.serve_meta import MAX_ASSIGNMENT_IDS, _manual
    wide = [N(partition_index=i, broker_ids=[1] * 64) for i in range(10_000)]
    many = [N(partition_index=i, broker_ids=[1]) for i in range(limits.MAX_PARTITIONS + 1)]
    for rows, why in ((wide, f"over {MAX_ASSIGNMENT_IDS} brokers"), (many, "at most")):
        with pytest.raises(InvalidReplicaAssignmentError, match=why):
            _manual(N(num_partitions=-1, replication_factor=-1, assignments=rows))
