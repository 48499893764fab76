"""What the request handlers know of the cluster: one interface, two
implementations (``local.LocalMetadata``: a single node, its LMDB;
``cluster.ClusterMetadata``: etcd's view and the controller). The broker
picks one at start (broker/server.py); no other module asks which.

A partition's state is a ``PartitionPlacement`` (protocol/parts.py: leader,
epoch, replicas, ISR, preferred leader), as DescribeCluster answers it.
Every method raises the registry's error for a refused call (an unknown
topic, a partition this broker does not lead, a cluster without a live
etcd session); handlers turn it into that part's error.

The methods (both implementations have each):

- ``check_available()``: CLUSTER_UNAVAILABLE when answers would be stale.
- ``brokers()`` ((id, host, port) of the live brokers, by id),
  ``described_brokers()`` ((id, host, port, live), replicas that are not
  live included), ``controller()``, ``cluster_name``.
- ``topic_partitions(name)`` (its partition count, None when unknown),
  ``topic_names()``, ``partitions_of(name)`` (a PartitionPlacement per partition),
  ``all_partitions(names)`` (every partition of ``names``, None: all),
  ``topic_ids(names=None)`` (Kafka's topic id of every topic, or of
  ``names``, by name; storage/topic_ids.py).
- ``async create_topic(name, partitions, configs)``, ``async
  auto_create(name)``, ``async delete_topic(name)``,
  ``describe_topic(name)`` -> (configs, partition entries), ``async
  elect_preferred(row)`` -> the leader after a preferred election,
  ``async add_partitions(name, count, assignments, validate_only)``
  (CreatePartitions: metadata/partitions.py).
- Topic configs: ``topic_settings(name)`` -> (effective settings, those
  set on the topic), ``async alter_topic_configs(name, configs)`` (the
  topic's whole new set, checked by the caller: stored, and applied live
  by every broker hosting the topic).
- ``async reassign(topic, partition, target)`` (broker ids, None: cancel;
  reassignments.py), ``reassignments(wanted)`` -> the moves in progress.
- ``async new_producer_id()``.
- The data path: ``log_for(topic, partition, create=False)`` (the leader's
  log), ``check_settled(topic, partition)``, ``append(topic, partition,
  data, acks)`` -> an ``Appended``, ``when_acked(appended, acks, cb)``,
  ``append_marker(topic, partition, marker)`` -> an ``Appended`` (a
  transaction's TxnMarker written by the leader in its current epoch,
  storage's ``Log.append_marker``; its acks waited as acks=all's with
  ``when_acked``; api/markers.py is the one caller),
  ``epoch_of(topic, partition)`` -> (log, leader epoch),
  ``check_replication()`` (INVALID_REQUEST on a single node),
  ``peer_key()`` (the cluster's secret brokers prove their identity with,
  cluster/peer_proof.py; None on a single node),
  ``replica_log(...)`` and ``wait_appended(logs, seconds)`` (replication),
  ``ack_wait`` (what an acks=all produce waits for, in its timeout error).
- Groups and transactions: ``group_host()`` (where the offsets partitions
  live), ``txn_host()`` (the transaction state partitions), ``async
  coordinator_for(key, key_type=0)`` -> (id, host, port) (key type 0: a
  group, 1: a transactional id), ``leader_of(topic, partition)`` -> the
  leading broker's id (-1: none now; where transaction markers go),
  ``peer_dialler()`` -> ``async dial(broker_id)`` over the brokers'
  authenticated link (None on a single node).
- Security: ``access_stores(on_acls)`` -> (users, acls).
- For the Kafka listener, the console and metrics: ``directory()`` (the
  brokers' Kafka addresses and the controller), ``async
  advertise_kafka(host, port, listeners=())`` (the first Kafka listener's
  address; ``listeners``: every named one's (name, host, port)),
  ``topic_counts()``, ``cluster_numbers()``
  and ``cluster_state(numbers)`` (None on a single node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Appended(NamedTuple):
    """What ``append`` wrote: the log, its AppendInfo, and what the
    implementation needs to tell when the acks are met (``pending``)."""

    log: object
    info: object
    pending: object = None


@dataclass(frozen=True, slots=True)
class KafkaBroker:
    """A live broker as Kafka clients reach it (``kafka``: (host, port) of
    its (first) Kafka listener, None without one; ``kafka_listeners``: its
    named listeners' (name, host, port))."""

    id: int
    kafka: "tuple[str, int] | None"
    kafka_listeners: tuple = ()


@dataclass(frozen=True, slots=True)
class Directory:
    """The brokers Kafka clients may reach, by id, and the controller."""

    brokers: dict
    controller: int
