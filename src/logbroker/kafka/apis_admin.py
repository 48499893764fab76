"""Schemas of the topic administration APIs: CreateTopics, DeleteTopics
(non-flexible versions only; docs/kafka.md). Written from the protocol's
documented fields.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

CREATE_TOPICS = Api(19, "CreateTopics", 2, 4, S(
    "CreateTopicsRequest",
    F("topics", Array(S(
        "CreatableTopic",
        F("name", "string"),
        F("num_partitions", "int32"),  # -1: the broker's default (v4+)
        F("replication_factor", "int16"),  # -1: the broker's default (v4+)
        F("assignments", Array(S(
            "CreatableReplicaAssignment",
            F("partition_index", "int32"),
            F("broker_ids", Array("int32"))))),
        F("configs", Array(S(
            "CreatableTopicConfig",
            F("name", "string"),
            F("value", "string", nullable="0+", default=None))))))),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+"),
), S(
    "CreateTopicsResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("topics", Array(S(
        "CreatableTopicResult",
        F("name", "string"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+", default=None)))),
))

DELETE_TOPICS = Api(20, "DeleteTopics", 1, 3, S(
    "DeleteTopicsRequest",
    F("topic_names", Array("string"), "0-5"),
    F("timeout_ms", "int32"),
), S(
    "DeleteTopicsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("responses", Array(S(
        "DeletableTopicResult",
        F("name", "string"),
        F("error_code", "int16")))),
))
