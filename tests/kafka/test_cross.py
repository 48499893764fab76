"""Issue 15 across clients and through faults, each with a real broker and
``--kafka-port``: kcat reads what our Producer wrote (magic 1, converted on
fetch); Spark reads the segment files of what kafka-python produced over the
Kafka listener (gzip batches stored as sent); an idempotent librdkafka
producer whose answer is lost (a proxy holds the broker's replies, then drops
the connection after the append) retries the same sequence, and the retry is
deduplicated: every record is stored once, in order; two ``kcat -G``
processes split a topic and rebalance when one leaves."""

from __future__ import annotations

import re

import pytest

from tests.support.fixtures import FAST, consume, free_port, wait_until
from tests.support.kafka_adapters import Kcat, kcat_path
from tests.support.kafka_raw import WAIT, Raw, batch_codecs, kafka_broker
from logbroker import Consumer, Producer

T0 = 1_700_000_000_000


def test_kcat_reads_what_our_producer_wrote(tmp_path):
    kcat_path()
    with kafka_broker(tmp_path / "data") as (b, bootstrap):
        p = Producer(b.bootstrap, **FAST)
        try:
            for i in range(12):
                p.send("ours-kcat", value=b"o%d" % i, key=None if i % 4 == 0 else b"k%d" % i,
                       partition=0, timestamp_ms=T0 + i)
                if i % 4 == 3:
                    p.flush(WAIT)  # three batches
        finally:
            p.close()
        assert Kcat().from_offset(bootstrap, "ours-kcat", 2, 10) == \
            [(i, None if i % 4 == 0 else b"k%d" % i, b"o%d" % i) for i in range(2, 12)]
        assert Kcat().from_timestamp(bootstrap, "ours-kcat", T0 + 9, 3) == \
            [(i, b"k%d" % i, b"o%d" % i) for i in range(9, 12)]


@pytest.mark.spark
@pytest.mark.slow  # ~21 s; Spark over librdkafka's batches stays in tests/spark/test_jvm_source.py
def test_spark_reads_what_kafka_python_produced(spark, tmp_path):
    kafka = pytest.importorskip("kafka")
    with kafka_broker(tmp_path / "data") as (b, bootstrap):
        p = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", compression_type="gzip",
                                linger_ms=5)
        try:
            for i in range(8):
                p.send("kp-spark", key=b"k%d" % i if i % 2 else None, value=b"v%d" % i,
                       headers=[("h", b"%d" % i)], partition=0, timestamp_ms=T0 + i)
            p.flush(timeout=WAIT)
        finally:
            p.close(timeout=WAIT)
        assert batch_codecs(bootstrap, "kp-spark") == {1}  # gzip, stored as sent
        assert b.stop() == 0  # the segment files as a finished broker leaves them
    df = spark.read.format("logbroker").option("path", str(tmp_path / "data")) \
        .option("subscribe", "kp-spark").option("includeHeaders", "true").load()
    rows = [(r.offset, r.key, bytes(r.value), r.timestamp, [(h.key, bytes(h.value))
                                                            for h in r.headers])
            for r in df.orderBy("offset").collect()]
    assert [(o, None if k is None else bytes(k), v, [(hk, hv) for hk, hv in h])
            for o, k, v, _ts, h in rows] == \
        [(i, b"k%d" % i if i % 2 else None, b"v%d" % i, [("h", b"%d" % i)]) for i in range(8)]
    assert [int(ts.timestamp() * 1000) for _o, _k, _v, ts, _h in rows] == \
        [T0 + i for i in range(8)]


def _log_end(bootstrap: str, topic: str) -> int:
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(2, 5, 1, {"replica_id": -1, "topics": [{"name": topic,
                         "partitions": [{"partition_index": 0, "timestamp": -1}]}]}))
        return raw.recv(2, 5)[1].topics[0].partitions[0].offset
    finally:
        raw.close()


def test_idempotent_retry_after_a_lost_answer_is_stored_once(tmp_path, tcp_proxy):
    """librdkafka (enable.idempotence) through a proxy the broker advertises:
    the proxy holds the broker's answers while a batch is appended, then
    drops the connection; librdkafka reconnects and resends the batch with
    the same producer id and sequence; the broker answers it as the
    duplicate it is (the first append's offsets) and stores nothing twice."""
    ck = pytest.importorskip("confluent_kafka")
    import logging

    from tests.support.kafka_adapters import _Lines, protocol_failures

    proxy = tcp_proxy()
    port = free_port()
    with kafka_broker(tmp_path / "data", "--kafka-advertised", proxy.address,
                      kafka_port=port) as (b, advertised):
        assert advertised == proxy.address
        proxy.target = ("127.0.0.1", port)
        direct = f"127.0.0.1:{port}"
        logger = logging.getLogger("test.rdkafka.proxy")
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        captured = _Lines()
        logger.addHandler(captured)
        delivered: list = []
        p = ck.Producer({"bootstrap.servers": proxy.address, "enable.idempotence": True,
                         "linger.ms": 5, "debug": "protocol,msg", "retry.backoff.ms": 50,
                         "reconnect.backoff.ms": 50, "reconnect.backoff.max.ms": 200},
                        logger=logger)

        def report(err, msg) -> None:
            delivered.append((err, msg.offset(), msg.value()))
        try:
            p.produce("lost", value=b"r0", partition=0, on_delivery=report)
            assert p.flush(WAIT) == 0 and delivered == [(None, 0, b"r0")]
            accepted = proxy.accepted
            proxy.cut("replies")
            for i in range(1, 10):
                p.produce("lost", value=b"r%d" % i, partition=0, on_delivery=report)
            p.poll(0)
            # appended, its answer held by the proxy
            wait_until(lambda: _log_end(direct, "lost") == 10, WAIT, "the append")
            proxy.cut("reset")  # the connection drops with the answer unsent
            proxy.heal()
            assert p.flush(2 * WAIT) == 0
        finally:
            logger.removeHandler(captured)
        assert sorted(delivered, key=lambda d: d[1]) == \
            [(None, i, b"r%d" % i) for i in range(10)]
        assert proxy.accepted > accepted  # it reconnected ...
        resent = [line for line in captured.lines
                  if re.search(r"Produce MessageSet with \d+ message\(s\).*BaseSeq 1\b", line)]
        assert len(resent) >= 2, resent  # ... and sent the sequence-1 batch again
        assert not protocol_failures(captured.lines)
        assert _log_end(direct, "lost") == 10  # stored once
        c = Consumer(b.bootstrap, **FAST)
        try:
            c.assign([("lost", 0)])
            c.seek("lost", 0, 0)
            got = consume(c, 10, timeout=WAIT)
            got += c.poll(0.2)  # nothing after the tenth
        finally:
            c.close()
        assert [(r.offset, r.value) for r in got] == [(i, b"r%d" % i) for i in range(10)]


def test_two_kcat_group_members_split_and_rebalance_when_one_leaves(tmp_path):
    """Two ``kcat -G`` processes split a 2-partition topic; the second is
    stopped (it commits and leaves), the first takes both partitions from
    its commit: each record read once across both."""
    from tests.support.kafka_members import KcatMember, split, until

    kcat = kcat_path()
    with kafka_broker(tmp_path / "data", config={"group_initial_rebalance_delay_ms": 50}) \
            as (b, bootstrap):
        from logbroker import Admin
        with Admin(b.bootstrap) as admin:
            admin.create_topic("kc-rb", 2)

        def produce(values) -> None:
            p = Producer(b.bootstrap, **FAST)
            try:
                for i, v in enumerate(values):
                    p.send("kc-rb", value=v, partition=i % 2)
                p.flush(WAIT)
            finally:
                p.close()

        first, more = [b"x%d" % i for i in range(20)], [b"y%d" % i for i in range(10)]
        m1 = KcatMember(kcat, bootstrap, "kc-g", "kc-rb")
        m2 = None
        try:
            until(lambda: m1.owned == {0, 1}, "the first member's assignment")
            m2 = KcatMember(kcat, bootstrap, "kc-g", "kc-rb")
            until(lambda: split(m1, m2), "a split")
            owned2 = set(m2.owned)
            produce(first)
            until(lambda: len(m1.got) + len(m2.got) >= 20, "the records")
            assert m2.stop() == 0, m2.stderr
            until(lambda: m1.owned == {0, 1}, "the rebalance")
            produce(more)
            until(lambda: len(m1.got) + len(m2.got) >= 30, "the records after the rebalance")
        finally:
            for m in (m2, m1):
                if m is not None and m.proc.poll() is None:
                    m.stop()
        assert sorted(v for _p, v in m1.got + m2.got) == sorted(first + more)  # each once
        assert {p for p, _v in m2.got} == owned2 and len(owned2) == 1
