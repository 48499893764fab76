"""The Kafka listener's settings, TLS and quotas, each against a broker
process of its own (kafka-python in the dev extra; skipped without it)."""

from __future__ import annotations

import time

import pytest

from fixtures import BrokerProcess
from kafka_raw import WAIT, Raw, kread, produce_body
from logbroker.broker.config import BrokerConfig
from logbroker.cli.serve import KAFKA_READY
from logbroker.errors import InvalidConfigError

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402


def test_produce_quota_throttles_a_kafka_client(tmp_path):
    """The broker's quotas apply on the Kafka listener: an anonymous client
    over its produce rate gets throttle_time_ms and is read no sooner."""
    with BrokerProcess(tmp_path / "q", "--kafka-port", "0",
                       config={"quota_produce_bytes_per_s": 20_000}) as b:
        bootstrap = b.proc.stdout.readline()[len(KAFKA_READY):].strip()
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
    trustme = pytest.importorskip("trustme")
    ca, ca_pem, cert, key = trustme.CA(), tmp_path / "ca.pem", tmp_path / "b.crt", tmp_path / "b.key"
    leaf = ca.issue_cert("127.0.0.1")
    ca.cert_pem.write_to_path(str(ca_pem))
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    with BrokerProcess(tmp_path / "tls", "--kafka-port", "0", "--tls-cert", str(cert),
                       "--tls-key", str(key)) as b:
        bootstrap = b.proc.stdout.readline()[len(KAFKA_READY):].strip()
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


def test_kafka_settings_are_checked():
    with pytest.raises(InvalidConfigError, match="kafka_advertised needs kafka_port"):
        BrokerConfig(kafka_advertised="h:9092")
    with pytest.raises(InvalidConfigError, match="HOST:PORT"):
        BrokerConfig(kafka_port=0, kafka_advertised="nohost")
    with pytest.raises(InvalidConfigError, match="no SASL yet"):
        BrokerConfig(kafka_port=0, auth_required=True)
    assert BrokerConfig(kafka_port=9092, kafka_advertised="kafka.example:19092").kafka_port == 9092
