"""Kafka consumer groups on the Kafka listener of a cluster (issue 15):
three brokers through a real etcd (the cluster fixture of
tests/kafka/test_cluster.py). FindCoordinator at any broker names the same
coordinator at its Kafka address; a kafka-python group bootstrapped at a
broker that is not the coordinator joins, reads every partition (led by
different brokers), commits, and a second member of the group resumes.
Group administration: each broker lists the groups it coordinates, a
non-coordinator answers NOT_COORDINATOR, kafka-python's admin lists,
describes and deletes across the three."""

from __future__ import annotations

import pytest

from tests.support.kafka_raw import Raw, kread, raw_call
from tests.support.kafka_cluster import close_refused_sockets, kc  # noqa: F401 - the module's cluster

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402


def _coordinator(address: str, group: str) -> tuple:
    raw = Raw(address)
    try:
        raw.sock.sendall(raw.send(10, 1, 1, {"key": group, "key_type": 0}))
        body = raw.recv(10, 1)[1]
        return body.error_code, body.node_id, f"{body.host}:{body.port}"
    finally:
        raw.close()


def _member(bootstrap: str, group: str) -> KafkaConsumer:
    return KafkaConsumer("kgc", bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         heartbeat_interval_ms=100, session_timeout_ms=3000)


def test_a_kafka_group_in_a_cluster_joins_reads_commits_and_resumes(kc):  # noqa: F811
    from tests.support.fixtures import wait_until

    group = "g-kcluster"

    def agreed():  # each broker learns the coordinator from its own watch, in its own time
        answers = {_coordinator(kc.kafka[i], group) for i in kc.brokers}
        return answers if len(answers) == 1 and next(iter(answers))[0] == 0 else None

    answers = wait_until(agreed, 15, "every broker naming the same coordinator")
    _, node, address = answers.pop()
    assert address == kc.kafka[node]
    bootstrap = next(kc.kafka[i] for i in sorted(kc.brokers) if i != node)
    kc.create("kgc", partitions=3, replication_factor=3)
    assert len({kc.state("kgc", p)[0] for p in range(3)}) > 1  # led by different brokers
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    try:
        for i in range(9):
            producer.send("kgc", b"v%d" % i, partition=i % 3)
        producer.flush(15)
    finally:
        producer.close()
    c = _member(bootstrap, group)
    try:
        assert sorted(r.value for r in kread(c, 9)) == sorted(b"v%d" % i for i in range(9))
        c.commit()
        assert [c.committed(TopicPartition("kgc", p)) for p in range(3)] == [3, 3, 3]
    finally:
        c.close()
    c2 = _member(bootstrap, group)
    try:
        # joins (after the empty group's initial delay); positions from the commit
        wait_until(lambda: c2.poll(timeout_ms=100) == {} and len(c2.assignment()) == 3, 15,
                   "the second member's assignment")
        assert [c2.position(TopicPartition("kgc", p)) for p in range(3)] == [3, 3, 3]
    finally:
        c2.close()
        close_refused_sockets()


_call = raw_call


def test_group_administration_in_a_cluster(kc):  # noqa: F811
    """Each broker lists the groups it coordinates (ListGroups, as Kafka's:
    admin clients ask every broker); DescribeGroups and DeleteGroups at a
    broker that does not coordinate the group answer NOT_COORDINATOR (16);
    kafka-python's admin lists, describes and deletes through the
    coordinators it finds."""
    from tests.support.fixtures import wait_until
    from kafka.admin import KafkaAdminClient

    groups = [f"g-kadmin-{i}" for i in range(4)]
    kc.create("kadmin", partitions=1, replication_factor=3)
    coordinator = {}
    for g in groups:
        wait_until(lambda: _coordinator(kc.kafka[1], g)[0] == 0, 15, "a coordinator")
        coordinator[g] = _coordinator(kc.kafka[1], g)[1]
        commit = _call(kc.kafka[coordinator[g]], 8, 2, {
            "group_id": g, "generation_id": -1, "member_id": "", "topics": [
                {"name": "kadmin", "partitions": [{"partition_index": 0, "committed_offset": 0}]}]})
        assert commit.topics[0].partitions[0].error_code == 0
    for i, address in kc.kafka.items():
        listed = {x.group_id for x in _call(address, 16, 2, {}).groups}
        assert listed & set(groups) == {g for g in groups if coordinator[g] == i}
    g = groups[0]
    other = next(i for i in kc.kafka if i != coordinator[g])
    assert _call(kc.kafka[other], 15, 4, {"groups": [g]}).groups[0].error_code == 16
    assert _call(kc.kafka[other], 42, 1, {"groups_names": [g]}).results[0].error_code == 16
    admin = KafkaAdminClient(bootstrap_servers=kc.kafka[other])
    try:
        assert set(groups) <= {x["group_id"] for x in admin.list_groups()}
        described = admin.describe_groups(groups)
        assert {name: d["group_state"] for name, d in described.items()} == \
            dict.fromkeys(groups, "Empty")
        assert admin.delete_groups(groups) == dict.fromkeys(groups, "OK")
        assert not set(groups) & {x["group_id"] for x in admin.list_groups()}
    finally:
        admin.close()
