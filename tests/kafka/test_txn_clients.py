"""Kafka clients' transactions against the Kafka listener of one real
broker (docs/kafka.md §4.14): confluent-kafka's (librdkafka) transactional
producer commits a transaction over two partitions with its input offsets
(send_offsets_to_transaction), aborts the next one (offsets too) and commits
a third; a read_committed consumer sees the committed records only, a
read_uncommitted one all of them, neither a marker (their offsets are the
gaps); the group's committed offset is the committed transaction's. A
zombie producer is fenced by a second one of its transactional id. aiokafka,
kafka-python and KafkaJS do the same with their own transactional producers
and read_committed consumers; kcat reads a topic holding markers.

A missing Python client skips its test; KafkaJS and kcat skip without node
/ kcat (CI requires them, tests/support/kafkajs.py, kafka_adapters.py)."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.support.kafka_adapters import kcat_run
from tests.support.kafka_raw import kafka_broker, raw_call
from tests.support.kafkajs import run_kafkajs

WAIT = 20.0


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """(BrokerProcess: our listener at ``.bootstrap``, its Kafka address)."""
    with kafka_broker(tmp_path_factory.mktemp("txn-clients") / "data",
                      config={"default_partitions": 2}) as (b, boot):
        yield b, boot


@pytest.fixture(scope="module")
def bootstrap(broker):
    return broker[1]


# -- confluent-kafka (librdkafka) ------------------------------------------------------------------
def _ck():
    return pytest.importorskip("confluent_kafka")


def _seed(bootstrap: str, topic: str, values) -> None:
    ck = _ck()
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for v in values:
        p.produce(topic, value=v, partition=0)
    assert p.flush(WAIT) == 0


def read_partitions(bootstrap: str, topic: str, isolation: str, want: int) -> dict:
    """``{partition: [(offset, value), ...]}`` of ``topic``'s two partitions
    from offset 0, read by a librdkafka consumer at ``isolation`` until it
    holds ``want`` records and has reached the end of both (bounded)."""
    ck = _ck()
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + isolation,
                     "isolation.level": isolation, "enable.partition.eof": True,
                     "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    got: dict = {0: [], 1: []}
    at_end: set = set()
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in (0, 1)])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                if len(at_end) == 2 and sum(map(len, got.values())) >= want:
                    break
                continue
            at_end.discard(msg.partition())
            got[msg.partition()].append((msg.offset(), msg.value()))
    finally:
        c.close()
    return got


def test_confluent_kafka_commit_abort_and_both_isolation_levels(bootstrap):
    ck = _ck()
    _seed(bootstrap, "ck-in", [b"in%d" % i for i in range(5)])
    group = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "ck-g",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "ck-tx",
                     "transaction.timeout.ms": 30000, "linger.ms": 5})
    try:
        group.assign([ck.TopicPartition("ck-in", 0, 0)])
        p.init_transactions(WAIT)
        for values, offset, commit in (([b"c0", b"c1", b"c2"], 3, True),
                                       ([b"a0"], 5, False), ([b"after"], 4, True)):
            p.begin_transaction()
            for v in values:
                for partition in (0, 1):
                    p.produce("ck-out", value=v, partition=partition)
            p.send_offsets_to_transaction([ck.TopicPartition("ck-in", 0, offset)],
                                          group.consumer_group_metadata(), WAIT)
            assert p.flush(WAIT) == 0  # an abort purges what is not sent yet
            (p.commit_transaction if commit else p.abort_transaction)(WAIT)
        committed = group.committed([ck.TopicPartition("ck-in", 0)], WAIT)
    finally:
        group.close()
    assert committed[0].offset == 4  # the last committed transaction's; the abort's dropped
    read = read_partitions(bootstrap, "ck-out", "read_committed", 8)
    for partition in (0, 1):
        assert [v for _o, v in read[partition]] == [b"c0", b"c1", b"c2", b"after"]
    # read_uncommitted: the aborted records too; a marker follows each
    # transaction (offsets 3, 5 and 7 are markers: never given to the application)
    read = read_partitions(bootstrap, "ck-out", "read_uncommitted", 10)
    for partition in (0, 1):
        assert read[partition] == [(0, b"c0"), (1, b"c1"), (2, b"c2"), (4, b"a0"),
                                   (6, b"after")]


def test_a_zombie_producer_is_fenced(bootstrap):
    ck = _ck()
    conf = {"bootstrap.servers": bootstrap, "transactional.id": "zombie-tx", "linger.ms": 0}
    old, new = ck.Producer(conf), ck.Producer(conf)
    old.init_transactions(WAIT)
    old.begin_transaction()
    old.produce("zombie", value=b"zombie-open", partition=0)
    assert old.flush(WAIT) == 0
    new.init_transactions(WAIT)  # bumps the epoch: the open transaction is aborted
    new.begin_transaction()
    new.produce("zombie", value=b"new", partition=0)
    new.commit_transaction(WAIT)
    with pytest.raises(ck.KafkaException) as info:
        old.produce("zombie", value=b"zombie-late", partition=0)
        old.commit_transaction(WAIT)
    error = info.value.args[0]  # its batch answered INVALID_PRODUCER_EPOCH: fatal, fenced
    assert error.fatal() and error.code() == ck.KafkaError._FENCED, error
    read = read_partitions(bootstrap, "zombie", "read_committed", 1)
    assert [v for _o, v in read[0]] == [b"new"]


def test_fetch_answers_an_open_transactions_lso_at_both_levels(bootstrap):
    """Kafka answers the last stable offset in every Fetch (KafkaJS's suite,
    fetch.spec.js "read_uncommitted": ``lastStableOffset`` 0 while the
    transaction is open): librdkafka leaves a transaction open over one
    record after two plain ones, a raw Fetch v4 at each isolation level sees
    the LSO at the transaction's first offset (2, the high watermark 3);
    once the marker is written, at the high watermark (4, past it)."""
    ck = _ck()
    _seed(bootstrap, "lso", [b"plain-1", b"plain-2"])
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "lso-tx"})
    p.init_transactions(WAIT)
    p.begin_transaction()
    p.produce("lso", value=b"open", partition=0)
    assert p.flush(WAIT) == 0

    def stable() -> list:
        return [(part.high_watermark, part.last_stable_offset) for level in (0, 1)
                for part in raw_call(bootstrap, 1, 4, {
                    "replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1 << 20,
                    "isolation_level": level, "topics": [{"topic": "lso", "partitions": [
                        {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}],
                }).responses[0].partitions]
    assert stable() == [(3, 2), (3, 2)]
    p.commit_transaction(WAIT)  # answered once decided; the marker follows (bounded wait)
    deadline = time.monotonic() + WAIT
    while (got := stable()) != [(4, 4), (4, 4)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert got == [(4, 4), (4, 4)]


def test_kcat_reads_a_topic_with_markers(bootstrap):
    ck = _ck()
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": "kcat-tx"})
    p.init_transactions(WAIT)
    for value, commit in ((b"k-commit", True), (b"k-abort", False), (b"k-last", True)):
        p.begin_transaction()
        p.produce("kcat-txn", value=value, partition=0)
        assert p.flush(WAIT) == 0  # an abort purges what is not sent yet
        (p.commit_transaction if commit else p.abort_transaction)(WAIT)
    read_partitions(bootstrap, "kcat-txn", "read_committed", 2)  # the markers are written
    log: list = []
    base = ["-b", bootstrap, "-C", "-t", "kcat-txn", "-p", "0", "-o", "beginning", "-e",
            "-f", "%o %s\\n"]
    # librdkafka's default isolation level is read_committed
    committed = kcat_run(base, log=log).split("\n")
    uncommitted = kcat_run(base + ["-X", "isolation.level=read_uncommitted"],
                           log=log).split("\n")
    assert [line for line in uncommitted if line] == ["0 k-commit", "2 k-abort", "4 k-last"]
    assert [line for line in committed if line] == ["0 k-commit", "4 k-last"]
    assert not any("error" in line.lower() for line in "".join(log).splitlines()
                   if "Reached end" not in line), log


# -- aiokafka -----------------------------------------------------------------------------------
def test_aiokafka_transactions_and_read_committed(bootstrap):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition

    _seed(bootstrap, "aio-in", [b"in%d" % i for i in range(3)])

    async def run():
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap,
                                             transactional_id="aio-tx")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(3):
                    await producer.send("aio-out", value=b"c%d" % i, partition=i % 2)
                await producer.send_offsets_to_transaction(
                    {TopicPartition("aio-in", 0): 2}, "aio-g")
            await producer.begin_transaction()
            await producer.send_and_wait("aio-out", value=b"aborted", partition=0)
            await producer.abort_transaction()
            async with producer.transaction():
                await producer.send("aio-out", value=b"last", partition=1)
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id="aio-g",
                                             isolation_level="read_committed",
                                             enable_auto_commit=False, fetch_max_wait_ms=50)
        await consumer.start()
        try:
            parts = [TopicPartition("aio-out", p) for p in (0, 1)]
            consumer.assign(parts)
            await consumer.seek_to_beginning(*parts)
            got, deadline = [], time.monotonic() + WAIT

            async def behind() -> bool:  # below the last stable offset somewhere
                ends = await consumer.end_offsets(parts)  # read_committed: the LSO
                return any([await consumer.position(tp) < ends[tp] for tp in parts])
            while time.monotonic() < deadline and (len(got) < 4 or await behind()):
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    got += [r.value for r in records]
            committed = await consumer.committed(TopicPartition("aio-in", 0))
        finally:
            await consumer.stop()
        return sorted(got), committed

    got, committed = asyncio.run(run())
    assert got == [b"c0", b"c1", b"c2", b"last"]
    assert committed == 2


# -- kafka-python --------------------------------------------------------------------------------
def test_kafka_python_transactions_and_read_committed(bootstrap):
    kp = pytest.importorskip("kafka")
    from kafka.structs import OffsetAndMetadata, TopicPartition

    _seed(bootstrap, "kp-in", [b"in%d" % i for i in range(3)])
    producer = kp.KafkaProducer(bootstrap_servers=bootstrap, transactional_id="kp-tx")
    try:
        producer.init_transactions()
        for values, offset, commit in (([b"c0", b"c1"], 2, True), ([b"aborted"], 3, False),
                                       ([b"last"], 1, True)):
            producer.begin_transaction()
            for i, v in enumerate(values):
                producer.send("kp-out", value=v, partition=i % 2)
            producer.send_offsets_to_transaction(
                {TopicPartition("kp-in", 0): OffsetAndMetadata(offset, "", -1)}, "kp-g")
            producer.flush()
            (producer.commit_transaction if commit else producer.abort_transaction)()
    finally:
        producer.close()
    consumer = kp.KafkaConsumer(bootstrap_servers=bootstrap, group_id="kp-g",
                                isolation_level="read_committed", enable_auto_commit=False,
                                fetch_max_wait_ms=50)
    try:
        parts = [TopicPartition("kp-out", p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        got, deadline = [], time.monotonic() + WAIT
        while time.monotonic() < deadline and (len(got) < 3 or any(
                consumer.position(tp) < end for tp, end in consumer.end_offsets(parts).items())):
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
        committed = consumer.committed(TopicPartition("kp-in", 0))
    finally:
        consumer.close()
    assert sorted(got) == [b"c0", b"c1", b"last"]
    assert committed == 1  # the last committed transaction's


# -- KafkaJS ------------------------------------------------------------------------------------
def test_kafkajs_transaction_send_offsets_commit_abort_and_read_committed(bootstrap):
    _seed(bootstrap, "js-in", [b"in%d" % i for i in range(3)])
    got = run_kafkajs("""
const producer = kafka.producer({ transactionalId: 'js-tx', maxInFlightRequests: 1,
                                  idempotent: true });
await producer.connect();
let txn = await producer.transaction();
await txn.send({ topic: 'js-out', messages: [{ value: 'c0', partition: 0 },
                                             { value: 'c1', partition: 1 }] });
await txn.sendOffsets({ consumerGroupId: 'js-g',
  topics: [{ topic: 'js-in', partitions: [{ partition: 0, offset: '2' }] }] });
await txn.commit();
txn = await producer.transaction();
await txn.send({ topic: 'js-out', messages: [{ value: 'aborted', partition: 0 }] });
await txn.sendOffsets({ consumerGroupId: 'js-g',
  topics: [{ topic: 'js-in', partitions: [{ partition: 0, offset: '3' }] }] });
await txn.abort();
txn = await producer.transaction();
await txn.send({ topic: 'js-out', messages: [{ value: 'end', partition: 0 }] });
await txn.commit();
await producer.disconnect();
const admin = kafka.admin(); await admin.connect();
const offsets = await admin.fetchOffsets({ groupId: 'js-g', topics: ['js-in'] });
await admin.disconnect();
const consumer = kafka.consumer({ groupId: 'js-reader', maxWaitTimeInMs: 100,
                                  readUncommitted: false });
await consumer.connect(); await consumer.subscribe({ topic: 'js-out', fromBeginning: true });
const seen = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('timed out with ' + seen)), 20000);
  consumer.run({ eachMessage: async ({ partition, message }) => {
    seen.push(message.value.toString());
    if (seen.includes('end') && seen.includes('c1')) { clearTimeout(timer); resolve(); } } });
});
await consumer.disconnect();
out({ seen: seen.sort(),
      offsets: offsets[0].partitions.filter(p => p.partition === 0).map(p => p.offset) });
""", [bootstrap], timeout=60)
    assert got["seen"] == ["c0", "c1", "end"]  # 'aborted' lies between c0 and end
    assert got["offsets"] == ["2"]  # the committed transaction's, not the aborted one's


# -- across the two protocols -------------------------------------------------------------------
def test_our_transactions_read_by_kafka_clients_and_theirs_by_ours(broker):
    """Our Producer's transactions (our batches, magic 1, with our
    transactional bit; the markers Kafka's control batches) read by
    librdkafka through the Kafka listener: the batches go out converted
    with Kafka's transactional bit, so read_committed drops the aborted one;
    and librdkafka's transactions read by our read_committed Consumer."""
    ck = _ck()
    from logbroker import Consumer, Producer
    from tests.support.fixtures import FAST, consume

    b, kafka = broker
    ours = Producer(b.bootstrap, transactional_id="ours-tx", **FAST)
    try:
        ours.init_transactions(WAIT)
        for value, commit in ((b"o-commit", True), (b"o-abort", False), (b"o-last", True)):
            ours.begin_transaction()
            for partition in (0, 1):
                ours.send("ours-txn", value, partition=partition)
            ours.flush()
            (ours.commit_transaction if commit else ours.abort_transaction)(WAIT)
    finally:
        ours.close()
    read = read_partitions(kafka, "ours-txn", "read_committed", 4)
    assert {p: [v for _o, v in got] for p, got in read.items()} == {
        p: [b"o-commit", b"o-last"] for p in (0, 1)}
    read = read_partitions(kafka, "ours-txn", "read_uncommitted", 6)
    assert read[0] == [(0, b"o-commit"), (2, b"o-abort"), (4, b"o-last")]

    p = ck.Producer({"bootstrap.servers": kafka, "transactional.id": "theirs-tx"})
    p.init_transactions(WAIT)
    for value, commit in ((b"k-commit", True), (b"k-abort", False), (b"k-last", True)):
        p.begin_transaction()
        p.produce("theirs-txn", value=value, partition=0)
        assert p.flush(WAIT) == 0
        (p.commit_transaction if commit else p.abort_transaction)(WAIT)
    c = Consumer(b.bootstrap, isolation_level="read_committed", **FAST)
    try:
        c.assign([("theirs-txn", 0)])
        c.seek("theirs-txn", 0, 0)
        got = [r.value for r in consume(c, 2, timeout=WAIT)]
    finally:
        c.close()
    assert got == [b"k-commit", b"k-last"]


# -- bad input -----------------------------------------------------------------------------------
def test_random_transaction_requests_are_answered_or_close_the_connection(bootstrap):
    """200 requests of the transaction APIs (and Fetch, ListOffsets, OffsetFetch,
    FindCoordinator, whose transaction fields are new) at every served
    version, values generated from the schemas: each is answered at its
    version with its correlation id, or its connection closed; the broker
    stays up (its log is checked for tracebacks when the module ends)."""
    import random

    from logbroker.kafka.apis import APIS
    from tests.support.kafka_cases import random_body
    from tests.support.kafka_raw import Raw

    rng = random.Random(31)
    cases = [(APIS[k], v) for k in (1, 2, 9, 10, 22, 24, 25, 26, 28, 65, 66)
             for v in range(APIS[k].min_version, APIS[k].max_version + 1)]
    raw, answered = Raw(bootstrap), 0
    try:
        for cid in range(200):
            api, version = rng.choice(cases)
            body = random_body(api.request, version, rng)
            if "max_wait_ms" in body:
                body["max_wait_ms"] = min(body["max_wait_ms"], 50)  # no long polls here
            raw.sock.sendall(raw.send(api.key, version, cid, body))
            try:
                head, _ = raw.recv(api.key, version)
                assert head.correlation_id == cid
                answered += 1
            except (ConnectionError, OSError) as exc:
                assert not isinstance(exc, TimeoutError), (api.name, version, body)
                raw.close()
                raw = Raw(bootstrap)
    finally:
        raw.close()
    assert answered >= 150
