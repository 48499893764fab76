"""Which handler answers every request kind, of both protocols: the one
place to look (tests/ check it is complete).

``OURS``: each request of our protocol (``protocol.messages.REQUESTS``)
and its one handler, ``handler(svc, request, session)`` returning the
response or an awaitable of it (api/services.py; ``session`` is the
connection's security/auth.Session, the requester). ``inline`` handlers run
in the loop turn that read the request (a Produce's appends share the
fsync of their turn; the SASL steps change the session before the next
request is read); the others run as tasks, started in the order read.

``KAFKA``: each Kafka API the Kafka listener serves, by key: the
translator of kafka/serve_*.py that turns its body into one of our
requests (a ``Plan``; ApiVersions is answered by its plan alone), and the
request kinds it may plan, which ``OURS`` then answers. ApiVersions
advertises exactly these keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..kafka import serve_acls
from ..kafka import (serve_configs, serve_data, serve_group_admin, serve_groups,
                     serve_membership, serve_meta, serve_sasl)
from ..kafka import serve_cluster, serve_partitions, serve_reassign
from ..kafka import serve_consumer_group
from ..kafka.apis import APIS
from ..kafka import serve_alter_configs
from ..kafka import serve_txn
from ..protocol import messages as m
from . import access, cluster_info, fetch, offsets, peer, produce, sasl, topics
from . import configs, partitions, reassign, records
from . import consumer_groups
from . import markers, transactions, txn_admin, txn_verify


@dataclass(frozen=True, slots=True)
class Entry:
    handler: Callable
    inline: bool = False


def _groups(method: str) -> Callable:
    """A handler of the coordinator's GroupRequests (api/groups.py)."""
    def handle(svc, req, session):
        return getattr(svc.groups, method)(req, session)
    handle.__name__ = f"groups.{method}"
    return handle


OURS: dict[type, Entry] = {
    # the cluster and its topics (api/cluster_info.py, api/topics.py)
    m.Handshake: Entry(cluster_info.handshake),
    m.Metadata: Entry(cluster_info.metadata),
    m.DescribeCluster: Entry(cluster_info.describe_cluster),
    m.ElectLeaders: Entry(cluster_info.elect_leaders),
    m.InitProducerId: Entry(transactions.init_producer_id),  # idempotent: cluster_info's
    m.CreateTopics: Entry(topics.create_topics),
    m.DeleteTopics: Entry(topics.delete_topics),
    m.DescribeTopics: Entry(topics.describe_topics),
    # data (api/produce.py, api/fetch.py, api/offsets.py)
    m.Produce: Entry(produce.produce, inline=True),
    m.Fetch: Entry(fetch.fetch),
    m.ReplicaFetch: Entry(fetch.replica_fetch),
    m.ListOffsets: Entry(offsets.list_offsets),
    m.OffsetForLeaderEpoch: Entry(offsets.offset_for_leader_epoch),
    m.PeerChallenge: Entry(peer.peer_challenge, inline=True),  # a broker proves its id (api/peer.py)
    m.PeerProof: Entry(peer.peer_proof, inline=True),
    # consumer groups (api/groups.py over the coordinator)
    m.FindCoordinator: Entry(_groups("find_coordinator")),
    m.JoinGroup: Entry(_groups("join")),
    m.SyncGroup: Entry(_groups("sync")),
    m.Heartbeat: Entry(_groups("heartbeat")),
    m.LeaveGroup: Entry(_groups("leave")),
    m.CommitOffsets: Entry(_groups("commit")),
    m.FetchOffsets: Entry(_groups("fetch")),
    m.DescribeGroups: Entry(_groups("describe")),
    m.ListGroups: Entry(_groups("list_groups")),
    m.DeleteGroups: Entry(_groups("delete")),
    m.DeleteOffsets: Entry(_groups("delete_offsets")),
    # consumer-protocol groups, KIP-848 (api/consumer_groups.py)
    m.ConsumerGroupHeartbeat: Entry(consumer_groups.heartbeat),
    m.ConsumerGroupDescribe: Entry(consumer_groups.describe),
    # authentication, users and ACLs (api/sasl.py, api/access.py)
    m.SaslHandshake: Entry(sasl.handshake, inline=True),
    m.SaslAuthenticate: Entry(sasl.authenticate, inline=True),
    m.CreateUser: Entry(access.create_user),
    m.DeleteUser: Entry(access.delete_user),
    m.ListUsers: Entry(access.list_users),
    m.CreateAcls: Entry(access.create_acls),
    m.DeleteAcls: Entry(access.delete_acls),
    m.DescribeAcls: Entry(access.describe_acls),
    # topic configs (api/configs.py)
    m.DescribeConfigs: Entry(configs.describe_configs),
    m.AlterConfigs: Entry(configs.alter_configs),
    # partitions and records (api/partitions.py, api/records.py)
    m.CreatePartitions: Entry(partitions.create_partitions),
    m.DeleteRecords: Entry(records.delete_records),
    # partition reassignment (api/reassign.py)
    m.AlterReassignments: Entry(reassign.alter_reassignments),
    m.ListReassignments: Entry(reassign.list_reassignments),
    # transactions (api/transactions.py over the transaction coordinator)
    m.AddPartitionsToTxn: Entry(transactions.add_partitions),
    m.AddOffsetsToTxn: Entry(transactions.add_offsets),
    m.EndTxn: Entry(transactions.end_txn),
    m.DescribeTransactions: Entry(transactions.describe),
    m.ListTransactions: Entry(transactions.list_transactions),
    # transactions, the partition leader's side (api/markers.py, api/groups.py)
    m.WriteTxnMarkers: Entry(markers.write_txn_markers),  # brokers only
    m.VerifyTxnPartitions: Entry(txn_verify.verify_txn_partitions),  # brokers only
    m.DescribeProducers: Entry(txn_admin.describe_producers),
    m.AbortTxnPartition: Entry(txn_admin.abort_txn_partition),
    m.TxnOffsetCommit: Entry(_groups("txn_commit")),
}


def _key(name: str) -> int:
    return next(api.key for api in APIS.values() if api.name == name)


# Kafka API key -> (translator, the request kinds its plans hold)
KAFKA: dict[int, tuple[Callable, tuple]] = {
    _key("ApiVersions"): (serve_meta.api_versions, ()),
    _key("Metadata"): (serve_meta.metadata, (m.Metadata,)),
    _key("CreateTopics"): (serve_meta.create_topics, (m.CreateTopics,)),
    _key("DeleteTopics"): (serve_meta.delete_topics, (m.DeleteTopics,)),
    _key("DescribeConfigs"): (serve_configs.describe_configs, (m.DescribeConfigs,
                                                               m.DescribeCluster)),
    _key("AlterConfigs"): (serve_alter_configs.alter_configs, (m.AlterConfigs,)),
    _key("IncrementalAlterConfigs"): (serve_alter_configs.incremental_alter_configs,
                                      (m.AlterConfigs,)),
    _key("Produce"): (serve_data.produce, (m.Produce,)),
    _key("Fetch"): (serve_data.fetch, (m.Fetch,)),
    _key("ListOffsets"): (serve_data.list_offsets, (m.ListOffsets,)),
    _key("OffsetForLeaderEpoch"): (serve_data.offset_for_leader_epoch, (m.OffsetForLeaderEpoch,)),
    _key("FindCoordinator"): (serve_groups.find_coordinator, (m.FindCoordinator,)),
    _key("OffsetCommit"): (serve_groups.offset_commit, (m.CommitOffsets,)),
    _key("OffsetFetch"): (serve_groups.offset_fetch, (m.FetchOffsets,)),
    _key("JoinGroup"): (serve_membership.join_group, (m.JoinGroup,)),
    _key("SyncGroup"): (serve_membership.sync_group, (m.SyncGroup,)),
    _key("Heartbeat"): (serve_membership.heartbeat, (m.Heartbeat,)),
    _key("LeaveGroup"): (serve_membership.leave_group, (m.LeaveGroup,)),
    _key("ListGroups"): (serve_group_admin.list_groups, (m.ListGroups,)),
    _key("DescribeGroups"): (serve_group_admin.describe_groups, (m.DescribeGroups,)),
    _key("DeleteGroups"): (serve_group_admin.delete_groups, (m.DeleteGroups,)),
    _key("OffsetDelete"): (serve_groups.offset_delete, (m.DeleteOffsets,)),
    _key("ConsumerGroupHeartbeat"): (serve_consumer_group.consumer_group_heartbeat,
                                     (m.ConsumerGroupHeartbeat,)),
    _key("ConsumerGroupDescribe"): (serve_consumer_group.consumer_group_describe,
                                    (m.ConsumerGroupDescribe,)),
    _key("SaslHandshake"): (serve_sasl.sasl_handshake, (m.SaslHandshake,)),
    _key("SaslAuthenticate"): (serve_sasl.sasl_authenticate, (m.SaslAuthenticate,)),
    _key("DescribeAcls"): (serve_acls.describe_acls, (m.DescribeAcls,)),
    _key("CreateAcls"): (serve_acls.create_acls, (m.CreateAcls,)),
    _key("DeleteAcls"): (serve_acls.delete_acls, (m.DeleteAcls,)),
    _key("CreatePartitions"): (serve_partitions.create_partitions, (m.CreatePartitions,)),
    _key("DeleteRecords"): (serve_partitions.delete_records, (m.DeleteRecords,)),
    _key("DescribeLogDirs"): (serve_partitions.describe_log_dirs, (m.DescribeTopics,)),
    _key("DescribeCluster"): (serve_cluster.describe_cluster, (m.DescribeCluster,)),
    _key("ElectLeaders"): (serve_cluster.elect_leaders, (m.ElectLeaders,)),
    _key("AlterPartitionReassignments"): (serve_reassign.alter_partition_reassignments,
                                          (m.AlterReassignments,)),
    _key("ListPartitionReassignments"): (serve_reassign.list_partition_reassignments,
                                         (m.ListReassignments,)),
    # transactions (kafka/serve_txn.py)
    _key("InitProducerId"): (serve_txn.init_producer_id, (m.InitProducerId,)),
    _key("AddPartitionsToTxn"): (serve_txn.add_partitions_to_txn, (m.AddPartitionsToTxn,)),
    _key("AddOffsetsToTxn"): (serve_txn.add_offsets_to_txn, (m.AddOffsetsToTxn,)),
    _key("EndTxn"): (serve_txn.end_txn, (m.EndTxn,)),
    _key("TxnOffsetCommit"): (serve_txn.txn_offset_commit, (m.TxnOffsetCommit,)),
    _key("DescribeTransactions"): (serve_txn.describe_transactions, (m.DescribeTransactions,)),
    _key("ListTransactions"): (serve_txn.list_transactions, (m.ListTransactions,)),
}
