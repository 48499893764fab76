"""More Kafka clients in a cluster (issue 15's matrix, docs/kafka.md §5):
three real brokers and etcd (tests/kafka/test_cluster.py's ``kc`` fixture, one
cluster for this module). aiokafka and kcat produce through one bootstrap
broker to partitions led by the other two and read everything back through a
third; after the leader of a partition is killed, aiokafka's and librdkafka's
sends are retried at the new leader once their metadata names it, and every
acknowledged record is kept at its offset. The failover kills a broker: it
runs last."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.kafka_adapters import (RDKAFKA_LOG, _rdkafka_logger, kcat_path, kcat_records, kcat_run,
                            protocol_failures)
from tests.support.kafka_raw import WAIT, kread
from tests.support.kafka_cluster import close_refused_sockets, kc, leaders  # noqa: F401 (the fixture)

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, TopicPartition  # noqa: E402


def read_all(bootstrap: str, topic: str, partitions: int, n: int) -> dict:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    c.assign(tps)
    c.seek_to_beginning(*tps)
    try:
        return {(r.partition, r.offset): r.value for r in kread(c, n)}
    finally:
        c.close()


def test_aiokafka_and_kcat_produce_through_one_broker_to_every_leader(kc):
    aiokafka = pytest.importorskip("aiokafka")
    kcat = kcat_path()
    assert kcat
    kc.create("routed-aio", partitions=3, replication_factor=3)
    assert sorted(leaders(kc, "routed-aio", 3).values()) == [1, 2, 3]

    async def produce() -> dict:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=kc.kafka[1], acks="all")
        await p.start()
        try:
            acked = {}
            for part in range(3):
                for n in range(4):
                    meta = await p.send_and_wait("routed-aio", b"a%d-%d" % (part, n),
                                                 partition=part)
                    acked[(part, meta.offset)] = b"a%d-%d" % (part, n)
            return acked
        finally:
            await p.stop()
    acked = asyncio.run(asyncio.wait_for(produce(), 3 * WAIT))
    for part in range(3):  # kcat through broker 2, then read back through broker 3
        kcat_run(["-P", "-b", kc.kafka[2], "-t", "routed-aio", "-p", str(part), "-K", ":",
                  "-X", "acks=all"], "".join(f"k:kc{part}-{n}\n" for n in range(2)))
        acked.update({(part, 4 + n): b"kc%d-%d" % (part, n) for n in range(2)})
        got = kcat_records(kcat_run(["-C", "-b", kc.kafka[3], "-t", "routed-aio", "-p", str(part),
                                     "-o", "beginning", "-c", "6", "-f", "%o %k %s\\n"]))
        assert [(o, v) for o, _k, v in got] == [(o, acked[(part, o)]) for o in range(6)]
    assert read_all(kc.kafka[2], "routed-aio", 3, 18) == acked


def test_after_the_leader_is_killed_aiokafka_and_librdkafka_retry_at_the_new_leader(kc):
    aiokafka = pytest.importorskip("aiokafka")
    ck = pytest.importorskip("confluent_kafka")
    kc.create("failover-2", partitions=1, replication_factor=3)
    old = kc.state("failover-2", 0)[0]
    survivors = ",".join(kc.kafka[i] for i in kc.kafka if i != old)
    reports: list = []
    rd = ck.Producer({"bootstrap.servers": survivors, "acks": "all", "linger.ms": 0,
                      "enable.idempotence": True, "retry.backoff.ms": 100,
                      "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
                      "topic.metadata.refresh.interval.ms": 1000})

    # a librdkafka consumer reading across the failover: the new leader's epoch
    # makes it check its position with OffsetForLeaderEpoch (KIP-320) first
    start_log = len(RDKAFKA_LOG.lines)
    reader = ck.Consumer({"bootstrap.servers": survivors, "group.id": "failover-2-reader",
                          "enable.auto.commit": False, "auto.offset.reset": "error",
                          "topic.metadata.refresh.interval.ms": 1000, "debug": "fetch,protocol",
                          "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 500},
                         logger=_rdkafka_logger())
    reader.assign([ck.TopicPartition("failover-2", 0, 0)])
    read: list = []

    def read_up_to(n: int) -> None:
        deadline = time.monotonic() + 25
        while len(read) < n and time.monotonic() < deadline:
            msg = reader.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                read.append((msg.offset(), msg.value()))

    def rd_send(value: bytes) -> None:
        rd.produce("failover-2", value=value, partition=0,
                   on_delivery=lambda err, msg: reports.append((err, msg.offset(), msg.value())))

    async def run() -> dict:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=survivors, acks="all",
                                      request_timeout_ms=20000, retry_backoff_ms=100,
                                      metadata_max_age_ms=1000)
        await p.start()
        try:
            acked = {}
            for n in range(3):
                acked[(await p.send_and_wait("failover-2", b"aio-before-%d" % n,
                                             partition=0)).offset] = b"aio-before-%d" % n
                rd_send(b"rd-before-%d" % n)
            assert rd.flush(WAIT) == 0
            read_up_to(6)
            kc.brokers[old].kill()
            killed = time.monotonic()
            for n in range(3):
                rd_send(b"rd-after-%d" % n)
            futures = [(b"aio-after-%d" % n, await p.send("failover-2", b"aio-after-%d" % n,
                                                           partition=0)) for n in range(3)]
            for value, fut in futures:
                acked[(await asyncio.wait_for(fut, 20)).offset] = value
            assert rd.flush(20) == 0
            assert time.monotonic() - killed < 25
            return acked
        finally:
            await p.stop()
    try:
        acked = asyncio.run(run())
        read_up_to(12)
    finally:
        reader.close()
        del rd  # librdkafka's threads end (no reconnecting to the dead broker, or at teardown)
        close_refused_sockets()
    assert [e for e, _o, _v in reports] == [None] * 6
    acked.update({o: v for _e, o, v in reports})
    assert len(acked) == 12
    new = kc.state("failover-2", 0, via=next(i for i in kc.kafka if i != old))[0]
    assert new != old
    got = read_all(kc.kafka[new], "failover-2", 1, 12)
    assert {o: v for (_p, o), v in got.items()} == acked
    # the reader went on from where it was, every record once, after checking
    # its position at the new leader (no reset, no truncation reported)
    assert read == sorted(acked.items()), read
    log = RDKAFKA_LOG.lines[start_log:]
    assert any("offset and epoch validation succeeded" in line for line in log), \
        [line for line in log if "VALID" in line][-10:]
    assert not protocol_failures(log)
