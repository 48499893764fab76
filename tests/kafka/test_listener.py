"""The Kafka listener (issue 15) against one real broker process with
``--kafka-port 0``: raw frames through our codec (ApiVersions rule,
pipelining order, a malformed frame), kafka-python (produce with acks 0/1/all
and idempotence, reads by offset and by time, the admin client), and both
directions between Kafka clients and ours (magic 2 stored as sent, magic 1
converted on fetch). kafka-python is in the dev extra; without it those
tests skip."""

from __future__ import annotations

import random
import struct
import time

import pytest

from tests.support.fixtures import consume, FAST
from tests.support.kafka_raw import WAIT, Raw, kafka_broker, kread, produce_body
from logbroker import Consumer, Producer
from logbroker.kafka.apis import APIS
from logbroker.kafka.record_batch import KafkaRecord, build_batch

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402
from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError  # noqa: E402
from kafka.structs import OffsetAndMetadata  # noqa: E402


@pytest.fixture(scope="module")
def kbroker(tmp_path_factory):
    """One broker for the module: (BrokerProcess, Kafka bootstrap "HOST:PORT")."""
    with kafka_broker(tmp_path_factory.mktemp("kafka") / "data",
                      config={"frame_timeout_ms": 1000}) as got:
        yield got


def test_api_versions_newer_version_then_the_served_table_pipelined(kbroker):
    _, bootstrap = kbroker
    raw = Raw(bootstrap)
    try:
        # a newer ApiVersions (v4 is flexible: its header still reads) gets Kafka's v0 answer
        newer = struct.pack(">hhih", 18, 4, 7, 3) + b"raw" + b"\x00" * 4
        raw.sock.sendall(struct.pack(">i", len(newer)) + newer)
        head, body = raw.recv(18, 0)
        assert head.correlation_id == 7 and body.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in body.api_keys] == [(18, 0, 3)]
        # three requests in one write: answered in request order
        wire = (raw.send(18, 2, 100, {}) + raw.send(3, 8, 101, {"topics": []})
                + raw.send(18, 0, 102, {}))
        raw.sock.sendall(wire)
        h1, b1 = raw.recv(18, 2)
        h2, b2 = raw.recv(3, 8)
        h3, _ = raw.recv(18, 0)
        assert (h1.correlation_id, h2.correlation_id, h3.correlation_id) == (100, 101, 102)
        table = {k.api_key: (k.min_version, k.max_version) for k in b1.api_keys}
        assert table == {api.key: (api.min_version, api.max_version) for api in APIS.values()}
        assert b2.topics == () and [(b.node_id, f"{b.host}:{b.port}") for b in b2.brokers] \
            == [(0, bootstrap)]
    finally:
        raw.close()


def test_a_malformed_frame_closes_only_its_connection(kbroker):
    b, bootstrap = kbroker
    bad, good = Raw(bootstrap), Raw(bootstrap)
    try:
        good.sock.sendall(good.send(18, 1, 1, {}))
        assert good.recv(18, 1)[1].error_code == 0
        # a Metadata v1 whose topic array announces 1,000,000 entries in 8 bytes
        body = struct.pack(">hhih", 3, 1, 5, -1) + struct.pack(">i", 1_000_000) + b"\x00" * 4
        bad.sock.sendall(struct.pack(">i", len(body)) + body)
        assert bad.closed_by_peer()
        good.sock.sendall(good.send(18, 1, 2, {}))
        assert good.recv(18, 1)[0].correlation_id == 2
        assert b.alive() and "Traceback" not in b.log()
    finally:
        bad.close()
        good.close()


def test_pipelined_produces_acks0_unanswered_then_list_offsets_sees_both(kbroker):
    _, bootstrap = kbroker
    raw = Raw(bootstrap)
    try:
        latest = {"replica_id": -1, "topics": [{"name": "pipe", "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]}
        raw.sock.sendall(raw.send(0, 8, 1, produce_body("pipe", -1, [b"a", b"b"]))
                         + raw.send(0, 8, 2, produce_body("pipe", 0, [b"c"]))
                         + raw.send(2, 5, 3, latest))
        head, body = raw.recv(0, 8)
        part = body.responses[0].partition_responses[0]
        assert (head.correlation_id, part.error_code, part.base_offset) == (1, 0, 0)
        head, body = raw.recv(2, 5)  # cid 2 (acks=0) has no answer
        part = body.topics[0].partitions[0]
        assert (head.correlation_id, part.error_code, part.offset) == (3, 0, 3)
        # a batch whose CRC is wrong: CORRUPT_MESSAGE (2) for its partition, the connection stays
        body = produce_body("pipe", 1, [b"x"])
        batch = bytearray(body["topic_data"][0]["partition_data"][0]["records"])
        batch[-1] ^= 1
        body["topic_data"][0]["partition_data"][0]["records"] = bytes(batch)
        raw.sock.sendall(raw.send(0, 3, 4, body))
        part = raw.recv(0, 3)[1].responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (2, -1)
    finally:
        raw.close()


def test_init_producer_id_and_a_retried_idempotent_batch_keeps_its_offset(kbroker):
    _, bootstrap = kbroker
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(22, 1, 1, {"transactional_id": None,
                                             "transaction_timeout_ms": 60000}))
        init = raw.recv(22, 1)[1]
        assert init.error_code == 0 and init.producer_id > 0 and init.producer_epoch == 0
        raw.sock.sendall(raw.send(22, 3, 2, {"transactional_id": None, "producer_id": 5,
                                             "transaction_timeout_ms": 60000}))
        assert raw.recv(22, 3)[1].error_code == 42  # a producer id without its epoch
        batch = build_batch([KafkaRecord(0, 0, None, b"once")], base_timestamp=7,
                            producer_id=init.producer_id, producer_epoch=0, base_sequence=0)
        body = {"acks": -1, "timeout_ms": 5000, "topic_data": [
            {"name": "idem-raw", "partition_data": [{"index": 0, "records": batch}]}]}
        offsets = []
        for cid in (3, 4):  # the same batch twice: a retry after a lost answer
            raw.sock.sendall(raw.send(0, 7, cid, body))
            part = raw.recv(0, 7)[1].responses[0].partition_responses[0]
            offsets.append((part.error_code, part.base_offset))
        latest = {"replica_id": -1, "topics": [{"name": "idem-raw", "partitions": [
            {"partition_index": 0, "timestamp": -1}]}]}
        raw.sock.sendall(raw.send(2, 5, 5, latest))
        assert offsets == [(0, 0), (0, 0)]
        assert raw.recv(2, 5)[1].topics[0].partitions[0].offset == 1  # stored once
    finally:
        raw.close()


def test_oversized_and_unfinished_frames_close_the_connection(kbroker):
    b, bootstrap = kbroker
    big, slow = Raw(bootstrap), Raw(bootstrap)
    try:
        big.sock.sendall(struct.pack(">i", 1 << 30) + b"\x00" * 16)  # above max_frame_bytes
        assert big.closed_by_peer()
        slow.sock.sendall(struct.pack(">i", 100) + b"\x00" * 10)  # never completed
        start = time.monotonic()
        assert slow.closed_by_peer()
        assert time.monotonic() - start < 4  # frame_timeout_ms 1000 and the 1 s sweep
        assert b.alive()
    finally:
        big.close()
        slow.close()


def test_kafka_python_produces_with_each_acks_and_reads_back(kbroker):
    _, bootstrap = kbroker
    sent = []
    for acks in (0, 1, "all"):
        p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=0,
                          request_timeout_ms=5000)
        for i in range(5):
            sent.append((b"k%d" % i, b"%s-%d" % (str(acks).encode(), i)))
            fut = p.send("kp", key=sent[-1][0], value=sent[-1][1], partition=0,
                         timestamp_ms=1_000_000 * (len(sent)))
            if acks != 0:
                assert fut.get(timeout=WAIT).offset == len(sent) - 1
        p.flush(timeout=WAIT)
        p.close(timeout=WAIT)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    tp = TopicPartition("kp", 0)
    c.assign([tp])
    c.seek_to_beginning(tp)
    got = [(r.offset, r.key, r.value, r.timestamp) for r in kread(c, 15)]
    assert got == [(i, k, v, 1_000_000 * (i + 1)) for i, (k, v) in enumerate(sent)]
    assert c.end_offsets([tp]) == {tp: 15} and c.beginning_offsets([tp]) == {tp: 0}
    hit = c.offsets_for_times({tp: 7_500_000})[tp]
    assert (hit.offset, hit.timestamp) == (7, 8_000_000)
    assert c.offsets_for_times({tp: 99_000_000})[tp] is None
    c.seek(tp, 12)
    assert [r.offset for r in kread(c, 3)] == [12, 13, 14]
    c.close()


def test_idempotent_kafka_producer_and_our_consumer_reads_its_batches(kbroker):
    b, bootstrap = kbroker
    p = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                      request_timeout_ms=5000)
    for i in range(20):
        p.send("idem", value=b"v%d" % i, key=None if i % 2 else b"k",
               headers=[("h", b"%d" % i)], partition=0)
    p.flush(timeout=WAIT)
    p.close(timeout=WAIT)
    c = Consumer(b.bootstrap, **FAST)
    try:
        c.assign([("idem", 0)])
        c.seek("idem", 0, 0)
        got = consume(c, 20)
    finally:
        c.close()
    assert [(r.offset, r.key, r.value, tuple(r.headers)) for r in got] == \
        [(i, None if i % 2 else b"k", b"v%d" % i, (("h", b"%d" % i),)) for i in range(20)]


def test_kafka_python_reads_what_our_producer_wrote(kbroker):
    b, bootstrap = kbroker
    p = Producer(b.bootstrap, **FAST)
    try:
        for i in range(30):
            p.send("ours", value=b"o%d" % i, key=None if i % 3 == 0 else b"k%d" % i,
                   headers=[("n", b"%d" % i)] if i % 2 else None, partition=0,
                   timestamp_ms=2_000_000 + i)
            if i % 10 == 9:
                p.flush(WAIT)  # three batches
    finally:
        p.close()
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    tp = TopicPartition("ours", 0)
    c.assign([tp])
    c.seek(tp, 5)
    got = [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in kread(c, 25)]
    c.close()
    assert got == [(i, None if i % 3 == 0 else b"k%d" % i, b"o%d" % i,
                    [("n", b"%d" % i)] if i % 2 else [], 2_000_000 + i) for i in range(5, 30)]


def test_offsets_committed_by_a_kafka_client_are_the_groups(kbroker):
    """A kafka-python consumer with assign() and a group commits; it reads
    the commit back, and so does our Consumer of the same group."""
    b, bootstrap = kbroker
    p = KafkaProducer(bootstrap_servers=bootstrap)
    for i in range(10):
        p.send("commits", value=b"c%d" % i, partition=0)
    p.flush(timeout=WAIT)
    p.close(timeout=WAIT)
    tp = TopicPartition("commits", 0)
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kgroup", enable_auto_commit=False)
    c.assign([tp])
    c.seek(tp, 0)
    assert len(kread(c, 10)) == 10
    c.commit({tp: OffsetAndMetadata(7, "seven", -1)})
    assert c.committed(tp) == 7
    c.close()
    c2 = KafkaConsumer(bootstrap_servers=bootstrap, group_id="kgroup", enable_auto_commit=False)
    c2.assign([tp])
    assert [r.offset for r in kread(c2, 3)] == [7, 8, 9]  # starts at the committed offset
    assert c2.committed(TopicPartition("commits", 1)) is None
    c2.close()
    ours = Consumer(b.bootstrap, group="kgroup", **FAST)
    try:
        ours.assign([("commits", 0)])
        assert ours.position("commits", 0) == 7
    finally:
        ours.close()


def test_admin_client_creates_and_deletes_topics(kbroker):
    b, bootstrap = kbroker
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        admin.create_topics([NewTopic("adm", 3, 1, topic_configs={"retention.ms": "60000"})])
        assert "adm" in admin.list_topics()
        meta = admin.describe_topics(["adm"])[0]
        assert sorted(p["partition_index"] for p in meta["partitions"]) == [0, 1, 2]
        assert all(p["leader_id"] == 0 for p in meta["partitions"])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("adm", 1, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("adm-rf3", 1, 3)])
        admin.delete_topics(["adm"])
        assert "adm" not in admin.list_topics()
    finally:
        admin.close()
    assert b.alive()


def test_random_requests_are_answered_or_close_the_connection(kbroker):
    """300 requests of every served API and version with values generated
    from the schemas (nulls, extreme integers, odd names, garbage records):
    each is answered at its version with its correlation id, or its
    connection is closed; the broker stays up and logs no traceback."""
    from tests.support.kafka_cases import random_body

    b, bootstrap = kbroker
    rng = random.Random(15)
    raw = Raw(bootstrap)
    cases = [(api, v) for k in (0, 1, 2, 3, 8, 9, 10, 18, 19, 20, 22) for api in [APIS[k]]
             for v in range(api.min_version, api.max_version + 1)]
    answered = closed = 0
    try:
        for cid in range(300):
            api, version = rng.choice(cases)
            body = random_body(api.request, version, rng)
            if "acks" in body and body["acks"] == 0:
                body["acks"] = 1  # an acks=0 produce has no answer to wait for
            if "max_wait_ms" in body:
                body["max_wait_ms"] = min(body["max_wait_ms"], 50)  # no long polls here
            raw.sock.sendall(raw.send(api.key, version, cid, body))
            try:
                head, _ = raw.recv(api.key, version)
                assert head.correlation_id == cid
                answered += 1
            except TimeoutError:
                pytest.fail(f"{api.name} v{version} neither answered nor closed: {body!r}")
            except (ConnectionError, OSError):
                closed += 1
                raw.close()
                raw = Raw(bootstrap)
    finally:
        raw.close()
    assert answered >= 200, (answered, closed)
    assert b.alive() and "Traceback" not in b.log()
