"""Schemas of the data-path APIs: ApiVersions, Metadata, Produce, Fetch,
ListOffsets, InitProducerId, OffsetForLeaderEpoch (docs/kafka.md). ApiVersions reaches its first
flexible version (v3: librdkafka's first request), Metadata its (v9:
leader epochs clients trust, KIP-320, decision 83) and InitProducerId its
(v2; v4 is the first whose clients know PRODUCER_FENCED, KIP-588); the
others stop below.

Written from the protocol's documented fields (kafka.apache.org/protocol).
Fields of versions outside a profile range are left out; ``versions`` strings
say where each field exists, as in Kafka's message specs.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

# v3 (KIP-511): the client names itself; the response's header stays v0 (no
# tagged fields: a client reads it before it knows our versions). The
# response's optional tagged fields (features, KIP-584) are not sent.
API_VERSIONS = Api(18, "ApiVersions", 0, 3, S(
    "ApiVersionsRequest",
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
), S(
    "ApiVersionsResponse",
    F("error_code", "int16"),
    F("api_keys", Array(S(
        "ApiVersion",
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16")))),
    F("throttle_time_ms", "int32", "1+"),
), flexible="3+", response_header_tags=False)

METADATA = Api(3, "Metadata", 0, 12, S(
    "MetadataRequest",
    # v0: an empty array asks for every topic; v1+: null does, empty asks for none
    # v10+: a topic by id (null name) or by name (zero id); by id answered from v12
    F("topics", Array(S("MetadataRequestTopic", F("topic_id", "uuid", "10+"),
                        F("name", "string", nullable="10+"))), nullable="1+"),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
), S(
    "MetadataResponse",
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", Array(S(
        "MetadataResponseBroker",
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default=None)))),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", Array(S(
        "MetadataResponseTopic",
        F("error_code", "int16"),
        F("name", "string", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+"),
        F("partitions", Array(S(
            "MetadataResponsePartition",
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", Array("int32")),
            F("isr_nodes", Array("int32")),
            F("offline_replicas", Array("int32"), "5+")))),
        F("topic_authorized_operations", "int32", "8+", default=-(1 << 31))))),
    F("cluster_authorized_operations", "int32", "8-10", default=-(1 << 31)),
), flexible="9+")

PRODUCE = Api(0, "Produce", 0, 8, S(
    "ProduceRequest",
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", Array(S(
        "TopicProduceData",
        F("name", "string"),
        F("partition_data", Array(S(
            "PartitionProduceData",
            F("index", "int32"),
            F("records", "records", nullable="0+"))))))),
), S(
    "ProduceResponse",
    F("responses", Array(S(
        "TopicProduceResponse",
        F("name", "string"),
        F("partition_responses", Array(S(
            "PartitionProduceResponse",
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", Array(S(
                "BatchIndexAndErrorMessage",
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default=None))),
              "8+"),
            F("error_message", "string", "8+", nullable="8+", default=None))))))),
    F("throttle_time_ms", "int32", "1+"),
))

FETCH = Api(1, "Fetch", 4, 11, S(
    "FetchRequest",
    F("replica_id", "int32", "0-14", default=-1),
    F("max_wait_ms", "int32"),
    F("min_bytes", "int32"),
    F("max_bytes", "int32", "3+", default=0x7FFFFFFF),
    F("isolation_level", "int8", "4+"),
    F("session_id", "int32", "7+"),
    F("session_epoch", "int32", "7+", default=-1),
    F("topics", Array(S(
        "FetchTopic",
        F("topic", "string", "0-12"),
        F("partitions", Array(S(
            "FetchPartition",
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "9+", default=-1),
            F("fetch_offset", "int64"),
            F("log_start_offset", "int64", "5+", default=-1),
            F("partition_max_bytes", "int32"))))))),
    F("forgotten_topics_data", Array(S(
        "ForgottenTopic",
        F("topic", "string", "7-12"),
        F("partitions", Array("int32"), "7+"))), "7+"),
    F("rack_id", "string", "11+"),
), S(
    "FetchResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "7+"),
    F("session_id", "int32", "7+"),
    F("responses", Array(S(
        "FetchableTopicResponse",
        F("topic", "string", "0-12"),
        F("partitions", Array(S(
            "PartitionData",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("high_watermark", "int64"),
            F("last_stable_offset", "int64", "4+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("aborted_transactions", Array(S(
                "AbortedTransaction",
                F("producer_id", "int64", "4+"),
                F("first_offset", "int64", "4+"))), "4+", nullable="4+"),
            F("preferred_read_replica", "int32", "11+", default=-1),
            F("records", "records", nullable="0+"))))))),
))

LIST_OFFSETS = Api(2, "ListOffsets", 1, 5, S(
    "ListOffsetsRequest",
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    F("topics", Array(S(
        "ListOffsetsTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "ListOffsetsPartition",
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"))))))),
), S(
    "ListOffsetsResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("topics", Array(S(
        "ListOffsetsTopicResponse",
        F("name", "string"),
        F("partitions", Array(S(
            "ListOffsetsPartitionResponse",
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1))))))),
))

# v2+ flexible; v3 (KIP-360) names the id and epoch the producer holds, to
# bump its epoch after a fatal error; v4 (KIP-588) may answer PRODUCER_FENCED
INIT_PRODUCER_ID = Api(22, "InitProducerId", 0, 4, S(
    "InitProducerIdRequest",
    F("transactional_id", "string", nullable="0+", default=None),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
), S(
    "InitProducerIdResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
), flexible="2+")

# KIP-320: a consumer checks its position after a leader change (v2+ carry
# the epoch it knows as current; v3 names the replica, -1 a consumer)
OFFSET_FOR_LEADER_EPOCH = Api(23, "OffsetForLeaderEpoch", 0, 3, S(
    "OffsetForLeaderEpochRequest",
    F("replica_id", "int32", "3+", default=-2),
    F("topics", Array(S(
        "OffsetForLeaderTopic",
        F("topic", "string"),
        F("partitions", Array(S(
            "OffsetForLeaderPartition",
            F("partition", "int32"),
            F("current_leader_epoch", "int32", "2+", default=-1),
            F("leader_epoch", "int32"))))))),
), S(
    "OffsetForLeaderEpochResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("topics", Array(S(
        "OffsetForLeaderTopicResult",
        F("topic", "string"),
        F("partitions", Array(S(
            "EpochEndOffset",
            F("error_code", "int16"),
            F("partition", "int32"),
            F("leader_epoch", "int32", "1+", default=-1),
            F("end_offset", "int64", default=-1))))))),
))
