"""Partition reassignment (KIP-455) through kafka-python's admin client:
AlterPartitionReassignments and ListPartitionReassignments on a 3-broker
cluster whose brokers throttle reassignment fetches to 40 KB/s (so a move
of ~150 KB is seen in progress), then on a single node.

A partition with data moves from [a, b] (a leads) to [b, c]: while it
moves, the listing shows c adding and a removing; once done the replicas
are [b, c], b leads, every acknowledged record is read back from b, c's
copy holds the same segment bytes and a's files are gone. A second move is
cancelled: back to its original replicas, the adding broker's copy gone.
Bad targets get Kafka's codes."""

from __future__ import annotations

import json
import os
import time

import pytest

from tests.support.cluster import segment_bytes
from tests.support.fixtures import Cluster, wait_until
from tests.support.cluster import EtcdProcess, require_etcd
from tests.support.kafka_cluster import metadata
from tests.support.kafka_raw import kafka_address, kafka_broker

kafka = pytest.importorskip("kafka")
from kafka import TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402
from kafka.errors import (InvalidReplicationAssignmentError, NoReassignmentInProgressError,  # noqa: E402
                          UnknownTopicOrPartitionError)

THROTTLE = 40_000  # bytes/s a broker fetches for the replicas a reassignment adds
LIMIT = 8  # max_partitions_per_broker: a move counts on the brokers it adds replicas to


@pytest.fixture(scope="module")
def kc(tmp_path_factory):
    require_etcd()
    base = tmp_path_factory.mktemp("reassign")
    with EtcdProcess(base / "etcd") as etcd:
        cluster = Cluster(base, etcd.url, n=3, extra=("--kafka-port", "0"),
                          config={"reassignment_throttle_bytes_per_s": THROTTLE,
                                  "max_partitions_per_broker": LIMIT})
        try:
            cluster.start()
            cluster.kafka = {i: kafka_address(b) for i, b in cluster.brokers.items()}
            yield cluster
        finally:
            cluster.close()


def _admin(bootstrap: str) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def _wait_no_moves(admin: KafkaAdminClient) -> None:
    """Bounded wait for the answering broker to list no move: it answers
    from its own metadata, which a finished move reaches through its etcd
    watch a moment after the broker the test looked at."""
    wait_until(lambda: admin.list_partition_reassignments() == {}, 10,
               "the answering broker lists no move")


def _fill(kc, topic: str, leader: int, batches: int) -> list:
    """``batches`` acks=all batches of 10 x 1 KB records; every (offset, value)."""
    acked = []
    for n in range(batches):
        values = [b"%04d-%03d-" % (n, i) + b"x" * 1000 for i in range(10)]
        code, message, base = kc.produce(leader, topic, 0, values)
        assert code == 0, message
        acked += [(base + i, v) for i, v in enumerate(values)]
    return acked


def _dir(kc, broker: int, topic: str) -> str:
    return os.path.join(kc.brokers[broker].data_dir, f"{topic}-0")


def test_a_partition_with_data_moves_and_a_move_is_cancelled(kc):
    kc.create("moving", partitions=1, replication_factor=2)
    leader, _, replicas, _ = kc.state("moving")
    a, b = leader, next(r for r in replicas if r != leader)
    c = ({1, 2, 3} - {a, b}).pop()
    acked = _fill(kc, "moving", a, 15)  # ~150 KB: ~4 s at the throttle
    admin = _admin(kc.kafka[c])
    tp = TopicPartition("moving", 0)
    started = time.monotonic()
    assert admin.alter_partition_reassignments({tp: [b, c]}) == {tp: None}
    listed = admin.list_partition_reassignments()
    assert listed == {tp: {"replicas": [b, c, a], "adding_replicas": [c],
                           "removing_replicas": [a]}}
    assert admin.list_partition_reassignments({"moving": [0]}) == listed
    assert admin.list_partition_reassignments({"other": [0]}) == {}
    kc.wait_state("moving", 0, lambda ld, e, r, isr: tuple(r) == (b, c) and sorted(isr)
                  == sorted((b, c)) and ld == b, 30, "the move finished")
    took = time.monotonic() - started
    assert took >= 0.6 * len(acked) * 1000 / THROTTLE / 2, took  # throttled (a burst of 1 s)
    _wait_no_moves(admin)
    assert kc.read_all(b, "moving") == acked
    wait_until(lambda: not os.path.exists(_dir(kc, a, "moving")), 10, "a's copy deleted")
    wait_until(lambda: segment_bytes(kc.brokers[c].data_dir, "moving", 0)
               == segment_bytes(kc.brokers[b].data_dir, "moving", 0), 10, "c holds b's bytes")

    # a move cancelled halfway: back to [b, c], a's new copy gone again
    assert admin.alter_partition_reassignments({tp: [a, b]}) == {tp: None}
    assert admin.list_partition_reassignments()[tp]["adding_replicas"] == [a]
    assert admin.alter_partition_reassignments({tp: None}) == {tp: None}
    leader, _, replicas, isr = kc.wait_state("moving", 0, lambda ld, e, r, i: tuple(r) == (b, c),
                                             10, "the move cancelled")
    assert leader == b and sorted(isr) == sorted((b, c))
    wait_until(lambda: not os.path.exists(_dir(kc, a, "moving")), 10, "a's copy deleted")
    _wait_no_moves(admin)

    # Kafka's errors, each partition its own
    kc.create("fixed", partitions=2, replication_factor=1)
    got = admin.alter_partition_reassignments({
        TopicPartition("fixed", 0): None, TopicPartition("fixed", 1): [c, c],
        TopicPartition("fixed", 5): [c], TopicPartition("nope", 0): [c],
        TopicPartition("moving", 0): [b, 9]})
    assert got == {TopicPartition("fixed", 0): NoReassignmentInProgressError,
                   TopicPartition("fixed", 1): InvalidReplicationAssignmentError,
                   TopicPartition("fixed", 5): UnknownTopicOrPartitionError,
                   TopicPartition("nope", 0): UnknownTopicOrPartitionError,
                   TopicPartition("moving", 0): InvalidReplicationAssignmentError}
    admin.close()


def test_a_single_node_answers_as_kafkas_single_broker(tmp_path):
    with kafka_broker(tmp_path / "b", "--log-level", "debug") as (b, address):
        admin = _admin(address)
        admin.create_topics([kafka.admin.NewTopic("solo", 1, 1)])
        me = metadata(address, None).brokers[0].node_id
        tp = TopicPartition("solo", 0)
        assert admin.alter_partition_reassignments({tp: [me]}) == {tp: None}
        assert admin.alter_partition_reassignments({tp: [me + 1]}) \
            == {tp: InvalidReplicationAssignmentError}
        assert admin.alter_partition_reassignments({tp: None}) \
            == {tp: NoReassignmentInProgressError}
        assert admin.list_partition_reassignments() == {}
        admin.close()
        wait_until(lambda: "refused AlterReassignments topic='solo' partition=0" in b.log(), 5, "the refusal logged")
        assert "NO_REASSIGNMENT_IN_PROGRESS" in b.log() and "INVALID_REPLICA_ASSIGNMENT" in b.log()


def test_our_admin_and_the_cli_move_a_partition_showing_progress(kc):
    from logbroker import Admin
    from logbroker.errors import InvalidReplicaAssignmentError as Ours
    from tests.support.fixtures import invoke_cli, invoked_error, invoked_ok

    kc.create("ours", partitions=1, replication_factor=1)
    (a,) = kc.state("ours")[2]
    b = 1 + a % 3
    acked = _fill(kc, "ours", a, 12)  # ~120 KB: >= 2 s at the throttle
    bootstrap = kc.bootstrap
    with Admin(bootstrap) as admin:
        assert admin.reassign_partitions({("ours", 0): [b, a]}) == {("ours", 0): None}
        (move,) = admin.list_partition_reassignments(["ours"]).values()
        assert (move.replicas, move.target, move.adding, move.removing) == ((b, a), (b, a), (b,), ())
        listed = json.loads(invoked_ok(invoke_cli(["cluster", "reassignments", "--json"],
                                                  bootstrap=bootstrap)))
        assert listed == {"reassignments": [{"topic": "ours", "partition": 0, "replicas": [b, a],
                                             "target": [b, a], "adding": [b], "removing": []}]}
        status = json.loads(invoked_ok(invoke_cli(["cluster", "status", "ours", "--json"],
                                                  bootstrap=bootstrap)))
        assert [p["state"] for p in status["partitions"]] == ["reassigning"]
        with pytest.raises(Ours):
            admin.reassign_partitions({("ours", 0): [b, b]})
        assert isinstance(admin.reassign_partitions({("ours", 0): [7]}, raise_errors=False)
                          [("ours", 0)], Ours)
        assert admin.reassign_partitions({("ours", 0): None}) == {("ours", 0): None}
        assert admin.list_partition_reassignments() == {}
    out = invoked_ok(invoke_cli(["cluster", "reassign", "ours", "-p", "0", "--replicas", str(b),
                                 "--wait"], bootstrap=bootstrap))
    assert "targets in sync 0/1" in out and out.rstrip().endswith("ours[0]: done"), out
    leader, _, replicas, isr = kc.state("ours")
    assert (leader, tuple(replicas), tuple(isr)) == (b, (b,), (b,))
    assert kc.read_all(b, "ours") == acked
    wait_until(lambda: not os.path.exists(_dir(kc, a, "ours")), 10, "a's copy deleted")
    assert "0 partition move(s)" in invoked_ok(invoke_cli(["cluster", "reassignments"],
                                                          bootstrap=bootstrap))
    assert "not being reassigned" in invoked_error(invoke_cli(
        ["cluster", "reassign", "ours", "-p", "0", "--cancel"], bootstrap=bootstrap),
        "NO_REASSIGNMENT_IN_PROGRESS")


def test_kafkajs_moves_a_partition_and_lists_moves(kc):
    from tests.support.kafkajs import run_kafkajs

    kc.create("js-moving", partitions=1, replication_factor=1)
    (a,) = kc.state("js-moving")[2]
    b = 1 + a % 3
    got = run_kafkajs("""
        const admin = kafka.admin();
        await admin.connect();
        await admin.alterPartitionReassignments({topics: [
            {topic: 'js-moving', partitionAssignment: [{partition: 0, replicas: [args.b]}]}]});
        const listed = await admin.listPartitionReassignments({});
        let refused = null;
        try {
            await admin.alterPartitionReassignments({topics: [
                {topic: 'js-moving', partitionAssignment: [{partition: 0, replicas: [99]}]}]});
        } catch (e) { refused = [e.name, ...(e.errors || []).map(x => [x.type, x.topic, x.partition])]; }
        await admin.disconnect();
        out({listed, refused});
    """, [kc.kafka[b]], {"b": b})
    assert got["refused"] == ["KafkaJSAggregateError",
                              ["INVALID_REPLICA_ASSIGNMENT", "js-moving", 0]], got
    assert got["listed"]["topics"] in ([], [{"name": "js-moving", "partitions": [
        {"partition": 0, "replicas": [b, a], "addingReplicas": [b], "removingReplicas": [a]}]}])
    kc.wait_state("js-moving", 0, lambda ld, e, r, isr: tuple(r) == (b,) and ld == b, 10,
                  "the move finished")


def _held(kc) -> dict:
    held = {b: 0 for b in (1, 2, 3)}
    for *_, replicas, _isr in kc.metadata().partitions:
        for r in replicas:
            held[r] += 1
    return held


def test_a_move_past_max_partitions_per_broker_is_a_policy_violation(kc):
    from kafka.errors import PolicyViolationError

    kc.create("lone", partitions=1, replication_factor=1)
    (at,) = kc.state("lone")[2]
    for n in range(3):  # fillers (on the least loaded brokers) until another holds as many
        held = _held(kc)
        if held[at] <= max(h for b, h in held.items() if b != at):
            break
        kc.create(f"filler-{n}", partitions=1, replication_factor=1)
    full = max((b for b in held if b != at), key=held.get)
    kc.create("crowd", partitions=LIMIT - held[full], replication_factor=3)  # full: at the limit
    admin = _admin(kc.kafka[1])
    tp = TopicPartition("lone", 0)
    assert admin.alter_partition_reassignments({tp: [full]}) == {tp: PolicyViolationError}
    assert tuple(kc.state("lone")[2]) == (at,)
    assert admin.alter_partition_reassignments({tp: [at]}) == {tp: None}  # no new replica
    admin.close()
