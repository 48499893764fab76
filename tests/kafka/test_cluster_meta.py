"""Pure tests of the Kafka listener's view of a cluster (docs/kafka.md §4.6):
the registration's optional ``kafka`` field (old values without it read as
no Kafka listener) and ``kafka/cluster_meta.py`` over a ClusterView fed
etcd items (brokers with and without a Kafka address, a dead leader)."""

from __future__ import annotations

from types import SimpleNamespace

import msgpack

from logbroker.cluster.etcd import Item
from logbroker.cluster.state import BrokerInfo, Keys, broker_from, broker_value
from logbroker.cluster.view import ClusterView
from logbroker.kafka import cluster_meta
from logbroker.kafka.plan import KafkaSite
from logbroker.metadata.interface import Directory, KafkaBroker


def test_registration_round_trip_and_a_value_without_the_kafka_field():
    b = BrokerInfo(3, "10.0.0.3", 9557, 123, kafka=("k3.example", 9092))
    assert broker_from(3, broker_value(b), registered=7) == BrokerInfo(
        3, "10.0.0.3", 9557, 123, 7, ("k3.example", 9092))
    plain = BrokerInfo(4, "10.0.0.4", 9557, 5)
    assert "kafka" not in msgpack.unpackb(broker_value(plain))  # older readers see what they knew
    old = msgpack.packb({"host": "10.0.0.5", "port": 9557, "started_ms": 9})  # an older broker
    assert broker_from(5, old).kafka is None


def _site(items) -> KafkaSite:
    keys = Keys("t")
    view = ClusterView(keys)
    view.reset([Item(k if k.startswith("/") else keys.root + k, msgpack.packb(v), 10, 0, 2)
                 for k, v in items], 10)
    meta = SimpleNamespace(directory=lambda: view)  # ClusterMetadata's directory is its view
    return KafkaSite(1, "k1.example", 9092, None, frozenset(), meta)


def test_metadata_pieces_from_the_cluster_view():
    site = _site([
        ("brokers/1", {"host": "h1", "port": 1, "kafka": ["k1.example", 9092]}),
        ("brokers/2", {"host": "h2", "port": 2, "kafka": ["k2.example", 9093]}),
        ("brokers/3", {"host": "h3", "port": 3}),  # no Kafka listener
        ("controller", {"broker_id": 2})])
    assert cluster_meta.brokers(site) == [
        {"node_id": 1, "host": "k1.example", "port": 9092, "rack": None},
        {"node_id": 2, "host": "k2.example", "port": 9093, "rack": None}]
    assert cluster_meta.controller_id(site) == 2
    assert cluster_meta.kafka_address(site, 2) == ("k2.example", 9093)
    assert cluster_meta.kafka_address(site, 3) is None
    assert cluster_meta.kafka_address(site, 9) is None
    led = cluster_meta.partition(site, 0, 2, 4, (2, 1, 4), (2, 1))
    assert (led["error_code"], led["leader_id"], led["leader_epoch"], led["offline_replicas"]) \
        == (0, 2, 4, [4])  # broker 4 is not live
    for leader in (3, 4, -1):  # no Kafka address, not live, no leader
        p = cluster_meta.partition(site, 1, leader, 4, (3, 4, 1), (3, 1))
        assert (p["error_code"], p["leader_id"], p["replica_nodes"], p["isr_nodes"]) \
            == (5, -1, [3, 4, 1], [3, 1])


def test_single_node_is_its_own_broker_controller_and_leader():
    directory = Directory({0: KafkaBroker(0, ("127.0.0.1", 9092))}, 0)  # LocalMetadata's
    site = KafkaSite(0, "127.0.0.1", 9092, None,
                     meta=SimpleNamespace(directory=lambda: directory))
    assert cluster_meta.brokers(site) == [
        {"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}]
    assert cluster_meta.controller_id(site) == 0
    p = cluster_meta.partition(site, 0, 0, 0, (0,), (0,))
    assert (p["error_code"], p["leader_id"], p["offline_replicas"]) == (0, 0, [])
    assert cluster_meta.kafka_address(site, 1) is None
