"""The Kafka listener's settings, TLS and quotas, each against a broker
process of its own (kafka-python in the dev extra; skipped without it)."""

from __future__ import annotations

import socket
import time

import pytest

from tests.support.fixtures import BrokerProcess, wait_until
from tests.support.tls import tls_files
from tests.support.kafka_raw import WAIT, Raw, kafka_address, kread, produce_body
from logbroker.broker.config import BrokerConfig
from logbroker.errors import InvalidConfigError

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402


def test_produce_quota_throttles_a_kafka_client(tmp_path):
    """The broker's quotas apply on the Kafka listener: an anonymous client
    over its produce rate gets throttle_time_ms and is read no sooner."""
    with BrokerProcess(tmp_path / "q", "--kafka-port", "0",
                       config={"quota_produce_bytes_per_s": 20_000}) as b:
        bootstrap = kafka_address(b)
        raw = Raw(bootstrap)
        try:
            raw.sock.sendall(raw.send(0, 8, 1, produce_body("q", 1, [b"x" * 30_000])))
            first = raw.recv(0, 8)[1]
            assert first.responses[0].partition_responses[0].error_code == 0
            assert 300 <= first.throttle_time_ms <= 1_000  # 30 KB at 20 KB/s after a 1 s burst
            start = time.monotonic()
            raw.sock.sendall(raw.send(18, 2, 2, {}))
            raw.recv(18, 2)
            assert time.monotonic() - start >= first.throttle_time_ms / 1000 - 0.1  # muted
        finally:
            raw.close()


def test_tls_on_the_kafka_listener(tmp_path):
    """With tls_cert the Kafka listener speaks TLS: kafka-python over SSL
    produces and reads back; a plaintext client is not answered."""
    ca_pem, cert, key = tls_files(tmp_path)
    with BrokerProcess(tmp_path / "tls", "--kafka-port", "0", "--tls-cert", str(cert),
                       "--tls-key", str(key)) as b:
        bootstrap = kafka_address(b)
        tls = dict(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_cafile=str(ca_pem))
        p = KafkaProducer(acks="all", **tls)
        assert p.send("secure", value=b"s", partition=0).get(timeout=WAIT).offset == 0
        p.close(timeout=WAIT)
        c = KafkaConsumer(group_id=None, **tls)
        c.assign([TopicPartition("secure", 0)])
        c.seek(TopicPartition("secure", 0), 0)
        assert [r.value for r in kread(c, 1)] == [b"s"]
        c.close()
        plain = Raw(bootstrap)
        try:
            plain.sock.sendall(plain.send(18, 2, 1, {}))
            assert plain.closed_by_peer()  # at most a TLS alert, then the end
        finally:
            plain.close()


def test_librdkafka_sasl_ssl_scram_on_the_kafka_listener(tmp_path):
    """SASL_SSL in Kafka's terms: TLS and SCRAM-SHA-256 on the Kafka
    listener of an auth_required broker; librdkafka produces and reads back
    as a user made by the bootstrap rule."""
    ck = pytest.importorskip("confluent_kafka")
    from logbroker import Admin

    ca_pem, cert, key = tls_files(tmp_path)
    with BrokerProcess(tmp_path / "sasl-ssl", "--kafka-port", "0", "--tls-cert", str(cert),
                       "--tls-key", str(key), "--auth-required") as b:
        bootstrap = kafka_address(b)
        with Admin(b.bootstrap, tls_ca=str(ca_pem)) as admin:
            admin.create_user("carol", "carol-Pa55word")  # the first user, from loopback
        conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL",
                "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": "carol",
                "sasl.password": "carol-Pa55word", "ssl.ca.location": str(ca_pem)}
        p = ck.Producer(conf)
        done = []
        p.produce("sealed", value=b"s1", partition=0,
                  on_delivery=lambda err, msg: done.append((err, msg.offset())))
        assert p.flush(WAIT) == 0
        assert done == [(None, 0)]
        c = ck.Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
        try:
            c.assign([ck.TopicPartition("sealed", 0, 0)])
            got, deadline = [], time.monotonic() + WAIT
            while not got and time.monotonic() < deadline:
                msg = c.poll(0.2)
                if msg is not None:
                    assert msg.error() is None, msg.error()
                    got.append(msg.value())
        finally:
            c.close()
        assert got == [b"s1"]


def test_kafka_settings_are_checked():
    with pytest.raises(InvalidConfigError, match="kafka_advertised needs kafka_port"):
        BrokerConfig(kafka_advertised="h:9092")
    with pytest.raises(InvalidConfigError, match="HOST:PORT"):
        BrokerConfig(kafka_port=0, kafka_advertised="nohost")
    assert BrokerConfig(kafka_port=0, auth_required=True).auth_required  # SASL: allowed
    assert BrokerConfig(kafka_port=9092, kafka_advertised="kafka.example:19092").kafka_port == 9092


def test_kafka_tls_handshakes_count_against_the_connection_limits(tmp_path):
    """On the Kafka listener as on ours (broker/tls.py), a TLS handshake in
    progress counts toward the per-address limit: two stalled ones fill it
    and a third connection is closed at once; each stalled one is closed
    after frame_timeout_ms with a log line; then a client gets in."""
    ca_pem, cert, key = tls_files(tmp_path)
    with BrokerProcess(tmp_path / "lim", "--kafka-port", "0", "--tls-cert", str(cert),
                       "--tls-key", str(key),
                       config={"max_connections_per_ip": 2, "frame_timeout_ms": 1000}) as b:
        bootstrap = kafka_address(b)
        host, port = bootstrap.rsplit(":", 1)
        stalled = [socket.create_connection((host, int(port)), timeout=10) for _ in range(2)]
        try:
            with socket.create_connection((host, int(port)), timeout=10) as third:
                started = time.monotonic()
                assert third.recv(1) == b""  # refused: closed without a handshake
                assert time.monotonic() - started < 0.9  # before any handshake timeout
            for s in stalled:
                assert s.recv(1) == b""  # the broker ends the stalled handshakes
        finally:
            for s in stalled:
                s.close()
        wait_until(lambda: b.log().count("failed: not completed within 1 s (frame_timeout_ms)")
                   >= 2, what="both stalled handshakes logged")
        p = KafkaProducer(acks="all", bootstrap_servers=bootstrap, security_protocol="SSL",
                          ssl_cafile=str(ca_pem))
        assert p.send("after", value=b"a", partition=0).get(timeout=WAIT).offset == 0
        p.close(timeout=WAIT)
