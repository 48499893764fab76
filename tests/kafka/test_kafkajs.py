"""KafkaJS 2.2.4 (npm, run by node: tests/support/kafkajs.py) against the Kafka
listener of one real broker: admin, an idempotent gzip producer, a consumer
group reading every record once. Skips without node (fails in CI)."""

from __future__ import annotations

import pytest

from tests.support.kafka_raw import kafka_broker
from tests.support.kafkajs import run_kafkajs


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafkajs") / "data") as (_, boot):
        yield boot


def test_kafkajs_admin_produce_and_group_consume(bootstrap):
    got = run_kafkajs("""
const admin = kafka.admin(); await admin.connect();
await admin.createTopics({ topics: [{ topic: 'js-basic', numPartitions: 2 }], waitForLeaders: true });
const topics = (await admin.listTopics()).filter(t => t === 'js-basic');
const producer = kafka.producer({ idempotent: true }); await producer.connect();
await producer.send({ topic: 'js-basic', compression: K.CompressionTypes.GZIP,
  messages: Array.from({ length: 20 }, (_, i) => ({ key: 'k' + (i % 4), value: 'v' + i })) });
await producer.disconnect();
const consumer = kafka.consumer({ groupId: 'js-basic-g', maxWaitTimeInMs: 100 });
await consumer.connect(); await consumer.subscribe({ topic: 'js-basic', fromBeginning: true });
const seen = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('timed out with ' + seen.length)), 30000);
  consumer.run({ eachMessage: async ({ message }) => {
    seen.push(message.value.toString());
    if (seen.length >= 20) { clearTimeout(timer); resolve(); } } });
});
await consumer.disconnect(); await admin.disconnect();
out({ topics, seen: seen.sort() });
""", [bootstrap])
    assert got["topics"] == ["js-basic"]
    assert got["seen"] == sorted(f"v{i}" for i in range(20))
