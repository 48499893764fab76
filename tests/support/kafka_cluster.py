"""The Kafka listener's 3-broker cluster (tests/kafka/test_cluster*.py,
test_groups_cluster.py): the module-scoped ``kc`` fixture (three real
brokers with ``--kafka-port 0`` joined through a real etcd), a raw Kafka
Metadata request, partition leaders, and closing the sockets kafka-python
leaves open to a dead broker."""

from __future__ import annotations

import gc
import socket

import pytest

from tests.support.fixtures import Cluster, wait_until
from tests.support.cluster import EtcdProcess, require_etcd
from tests.support.kafka_raw import Raw, kafka_address


@pytest.fixture(scope="module")
def kc(tmp_path_factory):
    """A 3-broker cluster (``Cluster``) with ``kc.kafka``: broker id -> its
    Kafka address; every broker's Kafka Metadata lists all three."""
    require_etcd()
    base = tmp_path_factory.mktemp("kafka-cluster")
    with EtcdProcess(base / "etcd") as etcd:
        cluster = Cluster(base, etcd.url, n=3, extra=("--kafka-port", "0"))
        try:
            cluster.start()
            cluster.kafka = {}
            for i, b in cluster.brokers.items():
                # printed with the "listening" line (maybe read into the buffer with it)
                cluster.kafka[i] = kafka_address(b)
            for i in cluster.brokers:
                wait_until(lambda: len(metadata(cluster.kafka[i], []).brokers) == 3, 10,
                           f"broker {i}'s Kafka Metadata lists every broker")
            yield cluster
        finally:
            cluster.close()


def metadata(address: str, topics, version: int = 8):
    """A raw Kafka Metadata answer (``topics`` None: every topic)."""
    raw = Raw(address)
    try:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": False}
        raw.sock.sendall(raw.send(3, version, 1, body))
        return raw.recv(3, version)[1]
    finally:
        raw.close()


def close_refused_sockets() -> None:
    """kafka-python 3.0.12 leaves the socket of each connection attempt to a
    dead broker open in a coroutine that never ends (kafka/net/inet.py), even
    after ``close()``: close them, else they warn when collected."""
    gc.collect()
    for obj in gc.get_objects():
        if isinstance(obj, socket.socket) and obj.fileno() >= 0 and any(
                "kafka/net/inet.py" in getattr(getattr(r, "f_code", None), "co_filename", "")
                for r in gc.get_referrers(obj)):
            obj.close()


def leaders(kc, topic: str, partitions: int) -> dict[int, int]:
    return {p: kc.state(topic, p)[0] for p in range(partitions)}
