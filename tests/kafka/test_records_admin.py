"""Partition and records administration through real Kafka clients against
the Kafka listener of one real broker: CreatePartitions, DeleteRecords,
DescribeLogDirs, DescribeCluster and ElectLeaders by confluent-kafka's
AdminClient, kafka-python's KafkaAdminClient and KafkaJS 2.2.4; readers
honour a moved log start; a running consumer group takes the new
partitions. Each fails on a broker without these APIs."""

from __future__ import annotations

import time

import pytest

from tests.support.fixtures import wait_until
from tests.support.kafka_raw import admin_error, kafka_broker
from tests.support.kafkajs import run_kafkajs

WAIT = 15.0


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("records-admin") / "data") as (_, boot):
        yield boot


def _admin(bootstrap):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _create(admin, *topics) -> None:
    from confluent_kafka.admin import NewTopic
    for f in admin.create_topics([NewTopic(t, n) for t, n in topics]).values():
        f.result(WAIT)


def _produce(bootstrap, topic: str, values, partition=None, keys=None) -> None:
    import confluent_kafka as ck
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i, v in enumerate(values):
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, value=v, key=None if keys is None else keys[i], **kw)
        p.flush(WAIT)  # one batch per record: the log start may fall between them
    assert p.flush(WAIT) == 0


def _kafka_error(fut):
    return admin_error(fut, WAIT)


def test_confluent_create_partitions_keeps_data_and_refuses_as_kafka(bootstrap):
    import confluent_kafka as ck
    from confluent_kafka.admin import NewPartitions
    admin = _admin(bootstrap)
    _create(admin, ("cp", 2))
    keys = [b"k%d" % i for i in range(6)]
    _produce(bootstrap, "cp", [b"v%d" % i for i in range(6)], keys=keys)
    before = _placement(bootstrap, "cp", 2)

    assert admin.create_partitions([NewPartitions("cp", 5)], validate_only=True)["cp"] \
        .result(WAIT) is None
    assert len(admin.list_topics("cp", timeout=WAIT).topics["cp"].partitions) == 2
    assert admin.create_partitions([NewPartitions("cp", 4)])["cp"].result(WAIT) is None
    assert len(admin.list_topics("cp", timeout=WAIT).topics["cp"].partitions) == 4
    assert _placement(bootstrap, "cp", 4) == before  # existing records stay where they were

    fewer = _kafka_error(admin.create_partitions([NewPartitions("cp", 3)])["cp"])
    assert fewer.code() == ck.KafkaError.INVALID_PARTITIONS and "larger" in fewer.str()
    assigned = _kafka_error(admin.create_partitions(
        [NewPartitions("cp", 5, replica_assignment=[[0]])])["cp"])
    assert assigned.code() == ck.KafkaError.INVALID_REPLICA_ASSIGNMENT
    missing = _kafka_error(admin.create_partitions([NewPartitions("nope-cp", 3)])["nope-cp"])
    assert missing.code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART


def _placement(bootstrap, topic: str, partitions: int, n: int = 6) -> dict:
    """{value: (partition, offset)} of the ``n`` records of ``topic``."""
    import confluent_kafka as ck
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
        got, deadline = {}, time.monotonic() + WAIT
        while len(got) < n and time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is not None and msg.error() is None:
                got[msg.value()] = (msg.partition(), msg.offset())
        return got
    finally:
        c.close()


def test_confluent_delete_records_moves_the_log_start_readers_honour(bootstrap):
    import confluent_kafka as ck
    admin = _admin(bootstrap)
    _create(admin, ("dr", 1))
    _produce(bootstrap, "dr", [b"v%d" % i for i in range(10)], partition=0)

    done = admin.delete_records([ck.TopicPartition("dr", 0, 4)])
    assert [f.result(WAIT).low_watermark for f in done.values()] == [4]
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "dr-g",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        low, high = c.get_watermark_offsets(ck.TopicPartition("dr", 0), timeout=WAIT)
        assert (low, high) == (4, 10)
        c.assign([ck.TopicPartition("dr", 0, ck.OFFSET_BEGINNING)])
        got, deadline = [], time.monotonic() + WAIT
        while len(got) < 6 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.offset())
        assert got == list(range(4, 10))
    finally:
        c.close()
    past = _kafka_error(admin.delete_records([ck.TopicPartition("dr", 0, 11)])[
        ck.TopicPartition("dr", 0, 11)])
    assert past.code() == ck.KafkaError.OFFSET_OUT_OF_RANGE
    everything = admin.delete_records([ck.TopicPartition("dr", 0, -1)])
    assert [f.result(WAIT).low_watermark for f in everything.values()] == [10]


def test_confluent_describe_cluster_and_elect_leaders(bootstrap):
    import confluent_kafka as ck
    admin = _admin(bootstrap)
    _create(admin, ("el", 2))
    desc = admin.describe_cluster().result(WAIT)
    assert [(n.id, f"{n.host}:{n.port}") for n in desc.nodes] == [(0, bootstrap)]
    assert desc.controller.id == 0 and desc.cluster_id == "logbroker"
    parts = [ck.TopicPartition("el", 0), ck.TopicPartition("el", 1),
             ck.TopicPartition("el", 7)]
    got = admin.elect_leaders(ck.ElectionType.PREFERRED, parts).result(WAIT)
    codes = {(tp.topic, tp.partition): err.code() if err else None for tp, err in got.items()}
    assert codes == {("el", 0): ck.KafkaError.ELECTION_NOT_NEEDED,
                     ("el", 1): ck.KafkaError.ELECTION_NOT_NEEDED,
                     ("el", 7): ck.KafkaError.UNKNOWN_TOPIC_OR_PART}


def test_kafka_python_admin_partitions_records_and_log_dirs(bootstrap):
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.admin import NewPartitions, NewTopic
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kp", 1, 1)])
        _produce(bootstrap, "kp", [b"x" * 100 for _ in range(5)], partition=0)
        admin.create_partitions({"kp": NewPartitions(total_count=3)})
        assert admin.describe_topics(["kp"])[0]["partitions"].__len__() == 3
        deleted = admin.delete_records({TopicPartition("kp", 0): 2})
        assert deleted[TopicPartition("kp", 0)]["low_watermark"] == 2
        dirs = admin.describe_log_dirs({"kp": [0, 1, 2]})
    finally:
        admin.close()
    (broker,) = dirs
    (log_dir,) = broker["log_dirs"] if "log_dirs" in broker else broker["results"]
    rows = {p["partition_index"]: p for t in log_dir["topics"] if t["name"] == "kp"
            for p in t["partitions"]}
    assert sorted(rows) == [0, 1, 2]
    assert rows[0]["partition_size"] > 500 and rows[1]["partition_size"] == 0
    assert log_dir["log_dir"].endswith("data")


def test_kafkajs_create_partitions_and_delete_topic_records(bootstrap):
    got = run_kafkajs("""
const admin = kafka.admin(); await admin.connect();
await admin.createTopics({ topics: [{ topic: 'js-rec', numPartitions: 1 }], waitForLeaders: true });
const producer = kafka.producer(); await producer.connect();
for (let i = 0; i < 6; i++) {
  await producer.send({ topic: 'js-rec', messages: [{ value: 'v' + i, partition: 0 }] });
}
await producer.disconnect();
await admin.createPartitions({ topicPartitions: [{ topic: 'js-rec', count: 3 }] });
const meta = await admin.fetchTopicMetadata({ topics: ['js-rec'] });
await admin.deleteTopicRecords({ topic: 'js-rec', partitions: [{ partition: 0, offset: '5' }] });
const offsets = await admin.fetchTopicOffsets('js-rec');
await admin.disconnect();
out({ count: meta.topics[0].partitions.length,
      p0: offsets.filter(o => o.partition === 0).map(o => [o.low, o.high])[0] });
""", [bootstrap])
    assert got == {"count": 3, "p0": ["5", "6"]}


def test_a_running_group_takes_the_new_partitions(bootstrap):
    """librdkafka (its metadata refreshed every 300 ms) sees the new count and
    the group rebalances onto every partition. (kafka-python 3.0.12 did too,
    but its own loop stalls for 0.2-0.3 s a task late in a long test
    process, which made a bounded wait flaky.)"""
    import confluent_kafka as ck
    admin = _admin(bootstrap)
    _create(admin, ("grow", 1))
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "grow-g",
                     "topic.metadata.refresh.interval.ms": 300, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False, "session.timeout.ms": 6000,
                     "heartbeat.interval.ms": 100})
    c.subscribe(["grow"])
    try:
        def assigned(n: int):
            c.poll(0.1)
            return len(c.assignment()) >= n
        wait_until(lambda: assigned(1), WAIT, "librdkafka joined the group")
        assert {tp.partition for tp in c.assignment()} == {0}
        from confluent_kafka.admin import NewPartitions
        admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(WAIT)
        wait_until(lambda: assigned(3), WAIT, "librdkafka rejoined onto 3 partitions")
        assert {tp.partition for tp in c.assignment()} == {0, 1, 2}
    finally:
        c.close()
