"""Schemas of the partition and records administration APIs
(docs/kafka.md): CreatePartitions (37, v0-1), DeleteRecords (21, v0-1),
DescribeLogDirs (35, v0-1), ElectLeaders (43, v0-1), each to its last
non-flexible version, and DescribeCluster (60, v0, flexible from its first
version). Written from the protocol's documented fields.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

CREATE_PARTITIONS = Api(37, "CreatePartitions", 0, 1, S(
    "CreatePartitionsRequest",
    F("topics", Array(S(
        "CreatePartitionsTopic",
        F("name", "string"),
        F("count", "int32"),
        F("assignments", Array(S(
            "CreatePartitionsAssignment",
            F("broker_ids", Array("int32")))), nullable="0+", default=None)))),
    F("timeout_ms", "int32"),
    F("validate_only", "bool"),
), S(
    "CreatePartitionsResponse",
    F("throttle_time_ms", "int32"),
    F("results", Array(S(
        "CreatePartitionsTopicResult",
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None)))),
))

DELETE_RECORDS = Api(21, "DeleteRecords", 0, 1, S(
    "DeleteRecordsRequest",
    F("topics", Array(S(
        "DeleteRecordsTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "DeleteRecordsPartition",
            F("partition_index", "int32"),
            F("offset", "int64"))))))),
    F("timeout_ms", "int32"),
), S(
    "DeleteRecordsResponse",
    F("throttle_time_ms", "int32"),
    F("topics", Array(S(
        "DeleteRecordsTopicResult",
        F("name", "string"),
        F("partitions", Array(S(
            "DeleteRecordsPartitionResult",
            F("partition_index", "int32"),
            F("low_watermark", "int64"),
            F("error_code", "int16"))))))),
))

DESCRIBE_LOG_DIRS = Api(35, "DescribeLogDirs", 0, 1, S(
    "DescribeLogDirsRequest",
    F("topics", Array(S(
        "DescribableLogDirTopic",
        F("topic", "string"),
        F("partitions", Array("int32")))), nullable="0+", default=None),
), S(
    "DescribeLogDirsResponse",
    F("throttle_time_ms", "int32"),
    F("results", Array(S(
        "DescribeLogDirsResult",
        F("error_code", "int16"),
        F("log_dir", "string"),
        F("topics", Array(S(
            "DescribeLogDirsTopic",
            F("name", "string"),
            F("partitions", Array(S(
                "DescribeLogDirsPartition",
                F("partition_index", "int32"),
                F("partition_size", "int64"),
                F("offset_lag", "int64"),
                F("is_future_key", "bool")))))))))),
))

ELECT_LEADERS = Api(43, "ElectLeaders", 0, 1, S(
    "ElectLeadersRequest",
    F("election_type", "int8", "1+"),  # 0 preferred, 1 unclean
    F("topic_partitions", Array(S(
        "TopicPartitions",
        F("topic", "string"),
        F("partitions", Array("int32")))), nullable="0+", default=None),
    F("timeout_ms", "int32", default=60000),
), S(
    "ElectLeadersResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", Array(S(
        "ReplicaElectionResult",
        F("topic", "string"),
        F("partition_result", Array(S(
            "PartitionResult",
            F("partition_id", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None))))))),
))

DESCRIBE_CLUSTER = Api(60, "DescribeCluster", 0, 0, S(
    "DescribeClusterRequest",
    F("include_cluster_authorized_operations", "bool"),
), S(
    "DescribeClusterResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("cluster_id", "string"),
    F("controller_id", "int32", default=-1),
    F("brokers", Array(S(
        "DescribeClusterBroker",
        F("broker_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", nullable="0+", default=None)))),
    F("cluster_authorized_operations", "int32", default=-2147483648),
), flexible="0+")
