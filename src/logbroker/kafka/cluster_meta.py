"""The cluster as Kafka clients see it (docs/kafka.md §4.5): the brokers at
their Kafka listeners' addresses, the controller, and each partition's
leader, replicas, ISR, offline replicas and leader epoch.

Pure reads of the ``KafkaSite``'s directory (metadata/interface.py): on
a single node this broker is the only broker, the controller and every
partition's leader; in a cluster they come from the broker's mirror of
etcd (``cluster/view.py``), where each broker's registration carries its
Kafka address (``BrokerInfo.kafka``, None for a broker without a Kafka
listener) and its named listeners' (``kafka_listeners``): a client is told
the addresses of the listener it connected to (``address_on``).

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
    return None if b is None else address_on(site, b)


def address_on(site: KafkaSite, b) -> "tuple[str, int] | None":
    """Broker ``b``'s address on the site's listener (Kafka's rule: clients
    are told the addresses of the listener they connected to): its listener
    of the same name; a broker with no named listener (the single-listener
    form) at its one Kafka address; None for a broker without that listener."""
    if not site.listener or not b.kafka_listeners:
        return b.kafka
    for name, host, port in b.kafka_listeners:
        if name == site.listener:
            return host, port
    return None


def brokers(site: KafkaSite) -> list[dict]:
    """Metadata's broker list: every live broker with an address on this
    listener, by id (``rack`` null: racks are not configured)."""
    out = []
    for b in sorted(site.meta.directory().brokers.values(), key=lambda b: b.id):
        address = address_on(site, b)
        if address is not None:
            out.append({"node_id": b.id, "host": address[0], "port": address[1], "rack": None})
    return out


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
