"""Python clients: ``Producer``, ``Consumer``, ``Admin`` (sync; asyncio twins
in ``logbroker.aio``). docs/client.md describes the API and its contracts."""

from .admin import Admin
from .admin_results import (BrokerInfo, ClusterDescription, ClusterPartition, ElectionResult,
                            GroupDescription, GroupPartition, MemberDescription, NewTopic,
                            OffsetAndMetadata, OffsetAndTimestamp, PartitionInfo,
                            TopicDescription)
from .consumer import Consumer
from .handles import RecordHandle, RecordMetadata
from .partitioner import partition_for_key
from .producer import Producer
from .records import ConsumerRecord

__all__ = [
    "Admin", "BrokerInfo", "ClusterDescription", "ClusterPartition", "Consumer", "ConsumerRecord",
    "ElectionResult", "GroupDescription", "GroupPartition", "MemberDescription",
    "NewTopic", "OffsetAndMetadata", "OffsetAndTimestamp", "PartitionInfo", "Producer",
    "RecordHandle", "RecordMetadata", "TopicDescription", "partition_for_key",
]
