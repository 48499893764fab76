"""The Kafka listener in a cluster (issue 15; docs/kafka.md §4.5): three real
brokers joined through a real etcd, each with ``--kafka-port 0``. Metadata
from any broker names every broker at its Kafka address and each
partition's real leader, replicas, ISR and epoch; Kafka clients produce
through one bootstrap broker to partitions led by the others (routing by
leader) and read everything back; a Produce, Fetch or ListOffsets sent to
a non-leader answers NOT_LEADER_OR_FOLLOWER (6); after the leader of a
partition is killed, kafka-python's retried sends are acknowledged by the
new leader and nothing acknowledged is lost. The failover test kills a
broker: it runs last."""

from __future__ import annotations

import time

import pytest
from tests.support.kafka_cluster import close_refused_sockets, kc, leaders, metadata  # noqa: F401 (the fixture)
from tests.support.kafka_raw import WAIT, Raw, kread, produce_body


kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

NOT_LEADER, LEADER_NOT_AVAILABLE = 6, 5


def test_metadata_from_any_broker_lists_every_broker_and_the_real_leaders(kc):
    kc.create("meta", partitions=3, replication_factor=3)
    want = {p: kc.state("meta", p) for p in range(3)}  # (leader, epoch, replicas, isr) ours
    assert sorted(st[0] for st in want.values()) == [1, 2, 3]  # one partition led by each
    controller = kc.metadata().controller
    for i, address in kc.kafka.items():
        for version in (1, 5, 8):
            md = metadata(address, ["meta"], version)
            assert {b.node_id: f"{b.host}:{b.port}" for b in md.brokers} == kc.kafka
            assert md.controller_id == controller and controller in (1, 2, 3)
            (topic,) = md.topics
            assert (topic.name, topic.error_code) == ("meta", 0)
            got = {p.partition_index: (p.error_code, p.leader_id, sorted(p.replica_nodes),
                                       sorted(p.isr_nodes), p.offline_replicas)
                   for p in topic.partitions}
            assert got == {p: (0, st[0], [1, 2, 3], [1, 2, 3], ()) for p, st in want.items()}
            if version >= 7:
                assert {p.partition_index: p.leader_epoch for p in topic.partitions} \
                    == {p: st[1] for p, st in want.items()}
    # v0: every topic with an empty list, brokers as in v1+
    md0 = metadata(kc.kafka[2], [], 0)
    assert "meta" in {t.name for t in md0.topics} and len(md0.brokers) == 3


def test_kafka_python_produces_acks_all_through_one_broker_and_reads_everything_back(kc):
    kc.create("routed", partitions=3, replication_factor=3)
    assert sorted(leaders(kc, "routed", 3).values()) == [1, 2, 3]  # two led elsewhere
    p = KafkaProducer(bootstrap_servers=kc.kafka[1], acks="all", linger_ms=0,
                      request_timeout_ms=5000)
    acked = {}
    for part in range(3):
        for n in range(10):
            value = b"p%d-%d" % (part, n)
            meta = p.send("routed", value=value, partition=part).get(timeout=WAIT)
            acked[(part, meta.offset)] = value
    p.close(timeout=WAIT)
    assert sorted(acked) == [(part, o) for part in range(3) for o in range(10)]
    c = KafkaConsumer(bootstrap_servers=kc.kafka[2], group_id=None)
    tps = [TopicPartition("routed", part) for part in range(3)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = {(r.partition, r.offset): r.value for r in kread(c, 30)}
    assert c.end_offsets(tps) == {tp: 10 for tp in tps}
    c.close()
    assert got == acked


def test_librdkafka_produces_acks_all_through_one_broker_to_every_leader(kc):
    ck = pytest.importorskip("confluent_kafka")
    kc.create("routed-rd", partitions=3, replication_factor=3)
    p = ck.Producer({"bootstrap.servers": kc.kafka[3], "acks": "all", "linger.ms": 0,
                     "enable.idempotence": True})
    reports = []
    for part in range(3):
        for n in range(5):
            p.produce("routed-rd", value=b"r%d-%d" % (part, n), partition=part,
                      on_delivery=lambda err, msg: reports.append(
                          (err, msg.partition(), msg.offset(), msg.value())))
    assert p.flush(WAIT) == 0
    del p  # librdkafka's threads end (no reconnecting to a broker killed later)
    assert sorted(reports, key=lambda r: (r[1], r[2])) == [
        (None, part, n, b"r%d-%d" % (part, n)) for part in range(3) for n in range(5)]
    c = KafkaConsumer(bootstrap_servers=kc.kafka[1], group_id=None)
    tps = [TopicPartition("routed-rd", part) for part in range(3)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    got = sorted((r.partition, r.offset, r.value) for r in kread(c, 15))
    c.close()
    assert got == sorted((part, off, value) for _e, part, off, value in reports)


def test_an_altered_topic_config_is_shown_and_applied_by_every_broker(kc):
    """IncrementalAlterConfigs through one broker: etcd holds it, every
    broker's DescribeConfigs shows it (DYNAMIC_TOPIC_CONFIG), and each
    partition's leader refuses a record above the new max.message.bytes."""
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka import admin as ck_admin
    from tests.support.fixtures import wait_until

    kc.create("alt-cl", partitions=3, replication_factor=3)
    admin = ck_admin.AdminClient({"bootstrap.servers": kc.kafka[2]})
    res = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, "alt-cl",
                                  incremental_configs=[ck_admin.ConfigEntry(
                                      "max.message.bytes", "1000",
                                      incremental_operation=ck_admin.AlterConfigOpType.SET)])
    admin.incremental_alter_configs([res])[res].result(WAIT)

    def shown(address: str):
        raw = Raw(address)
        try:
            raw.sock.sendall(raw.send(32, 1, 1, {"resources": [{
                "resource_type": 2, "resource_name": "alt-cl",
                "configuration_keys": ["max.message.bytes"]}], "include_synonyms": False}))
            (row,) = raw.recv(32, 1)[1].results[0].configs
            return row.value, row.config_source
        finally:
            raw.close()

    for i in kc.brokers:
        wait_until(lambda: shown(kc.kafka[i]) == ("1000", 1), 10,
                   f"broker {i} shows the altered max.message.bytes")
    p = ck.Producer({"bootstrap.servers": kc.kafka[1], "linger.ms": 0,
                     "message.max.bytes": 100_000})
    reports = []
    for part in range(3):  # led by different brokers
        p.produce("alt-cl", value=b"x" * 4000, partition=part,
                  on_delivery=lambda err, msg: reports.append(err and err.code()))
    assert p.flush(WAIT) == 0
    del p
    assert reports == [ck.KafkaError.MSG_SIZE_TOO_LARGE] * 3


def test_produce_fetch_and_list_offsets_at_a_non_leader_answer_not_leader(kc):
    kc.create("elsewhere", partitions=1, replication_factor=3)
    leader = kc.state("elsewhere", 0)[0]
    other = next(i for i in kc.kafka if i != leader)
    raw = Raw(kc.kafka[other])
    try:
        raw.sock.sendall(raw.send(0, 8, 1, produce_body("elsewhere", -1, [b"x"])))
        part = raw.recv(0, 8)[1].responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (NOT_LEADER, -1)
        fetch = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                 "topics": [{"topic": "elsewhere", "partitions": [
                     {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}]}
        raw.sock.sendall(raw.send(1, 11, 2, fetch))
        assert raw.recv(1, 11)[1].responses[0].partitions[0].error_code == NOT_LEADER
        latest = {"replica_id": -1, "topics": [{"name": "elsewhere", "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]}
        raw.sock.sendall(raw.send(2, 5, 3, latest))
        assert raw.recv(2, 5)[1].topics[0].partitions[0].error_code == NOT_LEADER
    finally:
        raw.close()
    # the leader takes the same Produce
    raw = Raw(kc.kafka[leader])
    try:
        raw.sock.sendall(raw.send(0, 8, 1, produce_body("elsewhere", -1, [b"x"])))
        part = raw.recv(0, 8)[1].responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
    finally:
        raw.close()


def test_after_the_leader_is_killed_retried_sends_are_acknowledged_and_kept(kc):
    kc.create("failover", partitions=1, replication_factor=3)
    old = kc.state("failover", 0)[0]
    survivors = [i for i in kc.kafka if i != old]
    p = KafkaProducer(bootstrap_servers=",".join(kc.kafka[i] for i in survivors), acks="all",
                      linger_ms=0, retries=1000, retry_backoff_ms=100, request_timeout_ms=3000,
                      reconnect_backoff_ms=50, reconnect_backoff_max_ms=500,
                      max_in_flight_requests_per_connection=1, metadata_max_age_ms=1000)
    acked = {}
    for n in range(5):
        acked[p.send("failover", value=b"before-%d" % n, partition=0).get(timeout=WAIT).offset] \
            = b"before-%d" % n
    first_epoch = metadata(kc.kafka[survivors[0]], ["failover"]).topics[0].partitions[0] \
        .leader_epoch
    kc.brokers[old].kill()
    killed = time.monotonic()
    futures = [(b"after-%d" % n, p.send("failover", value=b"after-%d" % n, partition=0))
               for n in range(5)]
    for value, fut in futures:
        acked[fut.get(timeout=20).offset] = value
    took = time.monotonic() - killed
    p.close(timeout=WAIT)
    close_refused_sockets()
    new = kc.state("failover", 0, via=survivors[0])[0]
    assert new in survivors and took < 20
    md = metadata(kc.kafka[survivors[1]], ["failover"])
    assert {b.node_id for b in md.brokers} == set(survivors)  # the dead one is gone
    assert md.topics[0].partitions[0].leader_id == new
    assert list(md.topics[0].partitions[0].offline_replicas) == [old]
    # KIP-320 at the new leader: the old epoch ends where the new one began
    # (at or past the 5 records acknowledged before the kill, before every one
    # acknowledged after it); a consumer that still names the old epoch as
    # current is fenced
    epoch = md.topics[0].partitions[0].leader_epoch
    after = min(o for o, v in acked.items() if v.startswith(b"after"))
    raw = Raw(kc.kafka[new])
    try:
        raw.sock.sendall(raw.send(23, 3, 1, {"replica_id": -1, "topics": [
            {"topic": "failover", "partitions": [
                {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": first_epoch},
                {"partition": 0, "current_leader_epoch": epoch, "leader_epoch": epoch},
                {"partition": 0, "current_leader_epoch": first_epoch, "leader_epoch": epoch}]}]}))
        ends = [(p.error_code, p.leader_epoch, p.end_offset)
                for p in raw.recv(23, 3)[1].topics[0].partitions]
    finally:
        raw.close()
    assert epoch > first_epoch and ends[0][:2] == (0, first_epoch) and 5 <= ends[0][2] <= after
    assert ends[1][:2] == (0, epoch) and ends[1][2] >= max(acked) + 1
    assert ends[2] == (74, -1, -1)  # FENCED_LEADER_EPOCH
    c = KafkaConsumer(bootstrap_servers=kc.kafka[survivors[0]], group_id=None)
    tp = TopicPartition("failover", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    end = c.end_offsets([tp])[tp]
    got = {r.offset: r.value for r in kread(c, end)}
    c.close()
    assert len(acked) == 10 and all(got.get(o) == v for o, v in acked.items()), (acked, got)
