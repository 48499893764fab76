"""Python clients: ``Producer``, ``Consumer``, ``Admin`` (sync; asyncio twins
in ``logbroker.aio``). docs/client.md describes the API and its contracts."""

from .admin.results import (BrokerInfo, ClusterDescription, ClusterPartition, ElectionResult,
                            GroupDescription, GroupPartition, MemberDescription, NewTopic,
                            OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo, TopicDescription)
from .admin.sync import Admin
from .admin.transactions import TransactionDescription, TransactionListing
from .consumer.records import ConsumerRecord
from .consumer.sync import Consumer
from .group.offsets import GroupMetadata
from .producer.handles import RecordHandle, RecordMetadata
from .producer.partitioner import partition_for_key
from .producer.sync import Producer
from .producer.txn_state import TransactionAbortableError, TransactionAbortedError

__all__ = [
    "Admin", "BrokerInfo", "ClusterDescription", "ClusterPartition", "Consumer", "ConsumerRecord",
    "ElectionResult", "GroupDescription", "GroupMetadata", "GroupPartition", "MemberDescription",
    "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo", "Producer",
    "RecordHandle", "RecordMetadata", "TopicDescription", "TransactionAbortableError",
    "TransactionAbortedError", "TransactionDescription", "TransactionListing",
    "partition_for_key",
]
