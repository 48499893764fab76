"""Schemas of DescribeConfigs (key 32, v0-3; v4 is the first flexible),
AlterConfigs (33, v0-1) and IncrementalAlterConfigs (44, v0),
written from the protocol's documented fields (docs/kafka.md §4.9)."""

from __future__ import annotations

from .schema import Api, Array, F, S

TOPIC, BROKER = 2, 4  # resource types (Kafka's ConfigResource.Type)

DESCRIBE_CONFIGS = Api(32, "DescribeConfigs", 0, 3, S(
    "DescribeConfigsRequest",
    F("resources", Array(S(
        "DescribeConfigsResource",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configuration_keys", Array("string"), nullable="0+", default=None)))),
    F("include_synonyms", "bool", "1+"),
    F("include_documentation", "bool", "3+"),
), S(
    "DescribeConfigsResponse",
    F("throttle_time_ms", "int32"),
    F("results", Array(S(
        "DescribeConfigsResult",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", Array(S(
            "DescribeConfigsResourceResult",
            F("name", "string"),
            F("value", "string", nullable="0+", default=None),
            F("read_only", "bool"),
            F("is_default", "bool", "0"),
            F("config_source", "int8", "1+", default=-1),
            F("is_sensitive", "bool"),
            F("synonyms", Array(S(
                "DescribeConfigsSynonym",
                F("name", "string", "1+"),
                F("value", "string", "1+", nullable="1+", default=None),
                F("source", "int8", "1+"))), "1+"),
            F("config_type", "int8", "3+", default=0),
            F("documentation", "string", "3+", nullable="3+", default=None))))))),
))

# the answer of both alterations (the same fields in AlterConfigs and IncrementalAlterConfigs)
ALTER_RESPONSE = S(
    "AlterConfigsResponse",
    F("throttle_time_ms", "int32"),
    F("responses", Array(S(
        "AlterConfigsResourceResponse",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("resource_type", "int8"),
        F("resource_name", "string")))),
)

# AlterConfigs (key 33, v0-1; v2 is the first flexible): a resource's whole dynamic set
ALTER_CONFIGS = Api(33, "AlterConfigs", 0, 1, S(
    "AlterConfigsRequest",
    F("resources", Array(S(
        "AlterConfigsResource",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", Array(S(
            "AlterableConfig",
            F("name", "string"),
            F("value", "string", nullable="0+", default=None))))))),
    F("validate_only", "bool"),
), ALTER_RESPONSE)

# IncrementalAlterConfigs (key 44, v0; v1 is the first flexible): per config an operation
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3  # Kafka's AlterConfigOp.OpType
INCREMENTAL_ALTER_CONFIGS = Api(44, "IncrementalAlterConfigs", 0, 0, S(
    "IncrementalAlterConfigsRequest",
    F("resources", Array(S(
        "IncrementalAlterConfigsResource",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("configs", Array(S(
            "IncrementalAlterableConfig",
            F("name", "string"),
            F("config_operation", "int8"),
            F("value", "string", nullable="0+", default=None))))))),
    F("validate_only", "bool"),
), ALTER_RESPONSE)
