"""Poisoned metadata (issue 29, item 3): values written straight into etcd
that break their schema (cluster/checks.py) are refused with a log line,
never served, no broker crashes, clients keep working on the other
partitions, and the controller repairs what it can (cluster/controller.py).
Real brokers and a real etcd; the poison is written with the etcd client."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from logbroker.cluster.etcd import Etcd
from logbroker.cluster.state import Keys
from logbroker.protocol import messages as m
from tests.support.fixtures import wait_until

KEYS = Keys("logbroker")


def put(url: str, key: str, value: bytes) -> None:
    async def go():
        e = Etcd(url)
        try:
            await e.put(key, value)
        finally:
            await e.close()
    asyncio.run(go())


def kafka_metadata_ok(c) -> None:
    """Our clients' all-topic Metadata answers from every broker."""
    for i in c.live():
        resp = c.call(i, m.Metadata())
        assert resp.error == 0, resp


def _all_alive(c) -> None:
    assert all(b.alive() for b in c.brokers.values()), "a broker died"


@pytest.mark.parametrize("poison", ["huge_epoch", "garbage", "negative_epoch", "bad_isr"])
def test_a_poisoned_partition_state_is_refused_and_repaired(cluster, etcd, poison):
    c = cluster
    c.create("good", 1, replication_factor=3)
    c.create("hurt", 2, replication_factor=3)
    leader, epoch, replicas, isr = c.state("hurt", 0)
    value = {"replicas": list(replicas), "leader": leader, "isr": list(isr),
             "leader_epoch": epoch}
    raw = {"huge_epoch": msgpack.packb({**value, "leader_epoch": (1 << 63) - 1}),
           "garbage": b"\xc1\xff not msgpack",
           "negative_epoch": msgpack.packb({**value, "leader_epoch": -5}),
           "bad_isr": msgpack.packb({**value, "isr": [99]})}[poison]
    put(etcd.url, KEYS.partition("hurt", 0), raw)
    # the controller rewrites it from the state before, in a newer epoch
    st = c.wait_state("hurt", 0, lambda ld, e, r, i: ld >= 0 and e > epoch and len(i) == 3,
                      what="the repaired state")
    assert st[1] == epoch + 1 and tuple(st[2]) == tuple(replicas)

    def logs() -> str:
        return "".join(b.log() for b in c.brokers.values())
    # the controller logs its repair after the write a watch may deliver first
    wait_until(lambda: "repaired etcd key /logbroker/logbroker/partitions/hurt/0" in logs(), 10,
               "the controller's repair log line")
    logs = logs()
    assert "refusing the partition value at etcd key /logbroker/logbroker/partitions/hurt/0" in logs
    assert logs.count("refusing the partition value at etcd key "
                      "/logbroker/logbroker/partitions/hurt/0") <= len(c.brokers)  # once each
    assert "repaired etcd key /logbroker/logbroker/partitions/hurt/0" in logs
    _all_alive(c)
    kafka_metadata_ok(c)
    for topic in ("good", "hurt"):
        ld = c.state(topic, 0)[0]
        code, _, _ = c.produce(ld, topic, 0, [b"after"], acks=-1)
        assert code == 0, (topic, code)


def test_poisoned_topics_are_not_served_and_others_keep_working(cluster, etcd):
    c = cluster
    c.create("good", 2, replication_factor=3)
    c.create("counted", 1, replication_factor=3)
    before = c.metadata(["counted"]).topics
    for name, value in (("bad name!", {"partitions": 1, "replication_factor": 1, "configs": {}}),
                        ("negative", {"partitions": -5, "replication_factor": 1, "configs": {}}),
                        ("huge", {"partitions": 1 << 40, "replication_factor": 1,
                                  "configs": {}})):
        put(etcd.url, KEYS.topic(name), msgpack.packb(value))
    put(etcd.url, KEYS.topic("counted"), msgpack.packb(
        {"partitions": 1 << 40, "replication_factor": 3, "configs": {}}))
    wait_until(lambda: "repaired etcd key /logbroker/logbroker/topics/counted" in
               "".join(b.log() for b in c.brokers.values()), 15, "the topic repaired")
    # the controller logged its repair; each broker's view gets it from its etcd watch
    wait_until(lambda: c.metadata(["counted"]).topics == before, 15,
               "the repaired topic served again")
    names = {t[0] for t in c.metadata().topics}
    assert names >= {"good", "counted"} and not names & {"bad name!", "negative", "huge"}
    logs = "".join(b.log() for b in c.brokers.values())
    for name in ("bad name!", "negative", "huge"):
        assert f"refusing the topic value at etcd key /logbroker/logbroker/topics/{name}" in logs
    _all_alive(c)
    kafka_metadata_ok(c)
    resp = c.call(1, m.DescribeCluster())
    assert resp.error == 0 and all(p[0] in ("good", "counted") for p in resp.partitions)
    for p in range(2):
        code, _, _ = c.produce(c.state("good", p)[0], "good", p, [b"ok"], acks=-1)
        assert code == 0


@pytest.fixture
def kafka_cluster(tmp_path, etcd):
    from tests.support.cluster import Cluster
    from tests.support.kafka_raw import kafka_address

    c = Cluster(tmp_path, etcd.url, extra=("--kafka-port", "0"))
    try:
        c.start()
        c.kafka = {i: kafka_address(b) for i, b in c.brokers.items()}
        yield c
    finally:
        c.close()


def test_the_kafka_listener_serves_metadata_through_poison(kafka_cluster, etcd):
    """A leader_epoch of 2^63-1 closed every Kafka all-topic Metadata
    (out of range for int32); a partition with no valid state to repair
    from stays unavailable (LEADER_NOT_AVAILABLE) and the rest is served."""
    from tests.support.kafka_cluster import metadata

    c = kafka_cluster
    c.create("good", 1, replication_factor=3)
    leader, epoch, replicas, isr = c.state("good", 0)
    value = {"replicas": list(replicas), "leader": leader, "isr": list(isr)}
    put(etcd.url, KEYS.partition("good", 0), msgpack.packb({**value, "leader_epoch": (1 << 63) - 1}))
    # a topic no broker created: its states have no valid predecessor to repair from
    put(etcd.url, KEYS.partition("ghost", 0), msgpack.packb({**value, "leader_epoch": 1 << 40}))
    put(etcd.url, KEYS.topic("ghost"), msgpack.packb(
        {"partitions": 1, "replication_factor": 3, "configs": {}}))
    for i in c.brokers:
        answer = metadata(c.kafka[i], None)  # every topic, as kafka clients ask
        assert all(-1 <= p.leader_epoch < 1 << 31 for t in answer.topics for p in t.partitions)
    c.wait_state("good", 0, lambda ld, e, r, i: ld >= 0 and e == epoch + 1, what="repaired")
    ghost = next(t for t in metadata(c.kafka[1], ["ghost"]).topics if t.name == "ghost")
    assert [(p.error_code, p.leader_id) for p in ghost.partitions] == [(5, -1)]
    code, _, _ = c.produce(c.state("good", 0)[0], "good", 0, [b"still"], acks=-1)
    assert code == 0
    logs = "".join(b.log() for b in c.brokers.values())
    assert "cannot repair etcd key /logbroker/logbroker/partitions/ghost/0" in logs
    _all_alive(c)
