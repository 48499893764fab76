"""The cluster as Kafka clients see it (docs/kafka.md §4.5): the brokers at
their Kafka listeners' addresses, the controller, and each partition's
leader, replicas, ISR, offline replicas and leader epoch.

Pure reads of the ``KafkaSite``'s directory (metadata/interface.py): on
a single node this broker is the only broker, the controller and every
partition's leader; in a cluster they come from the broker's mirror of
etcd (``cluster/view.py``), where each broker's registration carries its
Kafka address (``BrokerInfo.kafka``, None for a broker without a Kafka
listener).

A broker without a Kafka address is not listed, so a partition it leads
cannot be reached by a Kafka client: it is answered LEADER_NOT_AVAILABLE
(5, retriable) with leader -1, as is a partition without a leader, and the
client asks again. Other brokers' requests (FindCoordinator) use
``kafka_address``.
"""

from __future__ import annotations

from ..errors import LeaderNotAvailableError
from .plan import KafkaSite

NO_NODE = -1


def kafka_address(site: KafkaSite, broker_id: int) -> "tuple[str, int] | None":
    """(host, port) of ``broker_id``'s Kafka listener; None when that broker
    is not live or has no Kafka listener."""
    b = site.meta.directory().brokers.get(broker_id)
    return None if b is None else b.kafka


def brokers(site: KafkaSite) -> list[dict]:
    """Metadata's broker list: every live broker with a Kafka address, by id
    (``rack`` null: racks are not configured)."""
    return [{"node_id": b.id, "host": b.kafka[0], "port": b.kafka[1], "rack": None}
            for b in sorted(site.meta.directory().brokers.values(), key=lambda b: b.id)
            if b.kafka is not None]


def controller_id(site: KafkaSite) -> int:
    """The controller's broker id; -1 while the cluster has none."""
    return site.meta.directory().controller


def partition(site: KafkaSite, index: int, leader: int, epoch: int, replicas, isr) -> dict:
    """One partition of a Metadata answer. Offline replicas (v5+) are the
    replicas that are not live. A leader that is -1 or unreachable over
    Kafka (not live, no Kafka address) is LEADER_NOT_AVAILABLE, leader -1."""
    live = site.meta.directory().brokers
    error = 0
    if leader == NO_NODE or kafka_address(site, leader) is None:
        error, leader = LeaderNotAvailableError.code, NO_NODE
    return {"error_code": error, "partition_index": index, "leader_id": leader,
            "leader_epoch": epoch, "replica_nodes": list(replicas), "isr_nodes": list(isr),
            "offline_replicas": [r for r in replicas if r not in live]}
