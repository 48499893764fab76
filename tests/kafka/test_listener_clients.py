"""More Kafka clients against the Kafka listener of one real broker:
librdkafka (confluent-kafka, with ``debug=protocol``: no buffer underflow or
parse failure in its log, compressed batches both ways), aiokafka and kcat.
The Python clients are in the dev extra (a missing one skips its test);
kcat is Debian's (tools/install-kcat.sh, run by ``make test``): its tests
skip without it, or fail with LOGBROKER_KCAT_REQUIRED=1 (CI)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time

import pytest

from tests.support.kafka_adapters import _Lines
from tests.support.kafka_adapters import kcat_path as _kcat
from tests.support.kafka_raw import kafka_broker

WAIT = 10.0


@pytest.fixture(scope="module")
def kafka_bootstrap(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-clients") / "data") as (_, bootstrap):
        yield bootstrap


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_librdkafka_produces_idempotently_and_reads_back(kafka_bootstrap, compression):
    ck = pytest.importorskip("confluent_kafka")
    logger = logging.getLogger(f"test.rdkafka.{compression}")
    logger.setLevel(logging.DEBUG)
    captured = _Lines()
    logger.addHandler(captured)
    topic = f"rd-{compression}"
    p = ck.Producer({"bootstrap.servers": kafka_bootstrap, "debug": "protocol", "linger.ms": 5,
                     "enable.idempotence": True, "compression.type": compression}, logger=logger)
    for i in range(50):
        p.produce(topic, value=b"v%d" % i, key=b"k%d" % (i % 3), partition=0,
                  headers=[("i", b"%d" % i)], timestamp=3_000_000 + i)
    assert p.flush(WAIT) == 0
    c = ck.Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": "unused",
                     "enable.auto.commit": False, "debug": "protocol"}, logger=logger)
    try:
        c.assign([ck.TopicPartition(topic, 0, 10)])
        got, deadline = [], time.monotonic() + WAIT
        while len(got) < 40 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append((msg.offset(), msg.key(), msg.value(), msg.headers(),
                            msg.timestamp()[1]))
    finally:
        c.close()
    assert got == [(i, b"k%d" % (i % 3), b"v%d" % i, [("i", b"%d" % i)], 3_000_000 + i)
                   for i in range(10, 50)]
    logger.removeHandler(captured)
    assert any("Produce" in line or "ProduceRequest" in line for line in captured.lines)
    bad = [line for line in captured.lines
           if "underflow" in line.lower() or "parse fail" in line.lower()]
    assert not bad, bad[:5]


def test_aiokafka_produces_and_reads_back(kafka_bootstrap):
    aiokafka = pytest.importorskip("aiokafka")

    async def run() -> list:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all",
                                             enable_idempotence=True)
        await producer.start()
        try:
            for i in range(20):
                await producer.send("aio", value=b"a%d" % i, partition=0)
            meta = await producer.send_and_wait("aio", value=b"last", partition=0)
            assert meta.offset == 20
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=None,
                                             enable_auto_commit=False)
        await consumer.start()
        try:
            tp = aiokafka.TopicPartition("aio", 0)
            consumer.assign([tp])
            consumer.seek(tp, 15)
            got = []
            async with asyncio.timeout(WAIT):
                while len(got) < 6:
                    for records in (await consumer.getmany(timeout_ms=200)).values():
                        got += [(r.offset, r.value) for r in records]
            assert (await consumer.end_offsets([tp]))[tp] == 21
            return got
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == [(i, b"a%d" % i) for i in range(15, 20)] + [(20, b"last")]


def test_kcat_lists_produces_and_consumes(kafka_bootstrap):
    kcat = _kcat()
    lines = "".join(f"k{i}:line {i}\n" for i in range(25))
    done = subprocess.run([kcat, "-P", "-b", kafka_bootstrap, "-t", "kc", "-p", "0", "-K", ":",
                           "-X", "acks=all"], input=lines, text=True, capture_output=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([kcat, "-C", "-b", kafka_bootstrap, "-t", "kc", "-p", "0", "-o", "5",
                           "-e", "-f", "%o %k %s\n"], text=True, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"{i} k{i} line {i}" for i in range(5, 25)]
    done = subprocess.run([kcat, "-L", "-b", kafka_bootstrap, "-t", "kc"], text=True,
                          capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert f"broker 0 at {kafka_bootstrap}" in done.stdout
    assert "partition 0, leader 0, replicas: 0, isrs: 0" in done.stdout
