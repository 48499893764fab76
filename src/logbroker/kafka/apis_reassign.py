"""Schemas of partition reassignment (KIP-455): AlterPartitionReassignments
(key 45) and ListPartitionReassignments (key 46), both v0 only and
flexible from v0 (Kafka's first version already is). Written from the
protocol's documented fields (docs/kafka.md)."""

from __future__ import annotations

from .schema import Api, Array, F, S

ALTER_PARTITION_REASSIGNMENTS = Api(45, "AlterPartitionReassignments", 0, 0, S(
    "AlterPartitionReassignmentsRequest",
    F("timeout_ms", "int32", default=60000),
    F("topics", Array(S(
        "ReassignableTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "ReassignablePartition",
            F("partition_index", "int32"),
            # null cancels the partition's reassignment in progress
            F("replicas", Array("int32"), nullable="0+", default=None))))))),
), S(
    "AlterPartitionReassignmentsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("responses", Array(S(
        "ReassignableTopicResponse",
        F("name", "string"),
        F("partitions", Array(S(
            "ReassignablePartitionResponse",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None))))))),
), flexible="0+")

LIST_PARTITION_REASSIGNMENTS = Api(46, "ListPartitionReassignments", 0, 0, S(
    "ListPartitionReassignmentsRequest",
    F("timeout_ms", "int32", default=60000),
    F("topics", Array(S(  # null: every topic
        "ListPartitionReassignmentsTopics",
        F("name", "string"),
        F("partition_indexes", Array("int32")))), nullable="0+", default=None),
), S(
    "ListPartitionReassignmentsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("topics", Array(S(
        "OngoingTopicReassignment",
        F("name", "string"),
        F("partitions", Array(S(
            "OngoingPartitionReassignment",
            F("partition_index", "int32"),
            F("replicas", Array("int32")),
            F("adding_replicas", Array("int32")),
            F("removing_replicas", Array("int32")))))))),
), flexible="0+")
