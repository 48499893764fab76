"""Schemas of the transaction APIs (KIP-98, docs/kafka.md §4.14):
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (each up to
v3, its first flexible version), DescribeTransactions and ListTransactions
(flexible from v0). InitProducerId, which a transactional producer calls
first, is in apis_core.py; FindCoordinator's key type 1 in apis_groups.py.

Written from the fields of Kafka's message specs; versions strings as
there. AddPartitionsToTxn v4+ (batches of transactions, broker to broker
in Kafka) and the versions past v3 of the others (transaction protocol
v2, KIP-890) are not served.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

_ADD_TOPIC = S(
    "AddPartitionsToTxnTopic",
    F("name", "string"),
    F("partitions", Array("int32")))

_ADD_PARTITION_RESULT = S(
    "AddPartitionsToTxnPartitionResult",
    F("partition_index", "int32"),
    F("partition_error_code", "int16"))

# Kafka names the v0-3 fields V3AndBelow*: from v4 a request batches transactions
ADD_PARTITIONS_TO_TXN = Api(24, "AddPartitionsToTxn", 0, 3, S(
    "AddPartitionsToTxnRequest",
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", Array(_ADD_TOPIC), "0-3"),
), S(
    "AddPartitionsToTxnResponse",
    F("throttle_time_ms", "int32"),
    F("results_by_topic_v3_and_below", Array(S(
        "AddPartitionsToTxnTopicResult",
        F("name", "string"),
        F("results_by_partition", Array(_ADD_PARTITION_RESULT)))), "0-3"),
), flexible="3+")

ADD_OFFSETS_TO_TXN = Api(25, "AddOffsetsToTxn", 0, 3, S(
    "AddOffsetsToTxnRequest",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("group_id", "string"),
), S(
    "AddOffsetsToTxnResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
), flexible="3+")

END_TXN = Api(26, "EndTxn", 0, 3, S(
    "EndTxnRequest",
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("committed", "bool"),
), S(
    "EndTxnResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
), flexible="3+")

TXN_OFFSET_COMMIT = Api(28, "TxnOffsetCommit", 0, 3, S(
    "TxnOffsetCommitRequest",
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    # v3 (KIP-447): the consumer's membership the offsets come from
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("topics", Array(S(
        "TxnOffsetCommitRequestTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "TxnOffsetCommitRequestPartition",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", nullable="0+"))))))),
), S(
    "TxnOffsetCommitResponse",
    F("throttle_time_ms", "int32"),
    F("topics", Array(S(
        "TxnOffsetCommitResponseTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "TxnOffsetCommitResponsePartition",
            F("partition_index", "int32"),
            F("error_code", "int16"))))))),
), flexible="3+")

DESCRIBE_TRANSACTIONS = Api(65, "DescribeTransactions", 0, 0, S(
    "DescribeTransactionsRequest",
    F("transactional_ids", Array("string")),
), S(
    "DescribeTransactionsResponse",
    F("throttle_time_ms", "int32"),
    F("transaction_states", Array(S(
        "TransactionState",
        F("error_code", "int16"),
        F("transactional_id", "string"),
        F("transaction_state", "string"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_start_time_ms", "int64"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("topics", Array(S(
            "TopicData",
            F("topic", "string"),
            F("partitions", Array("int32")))))))),
), flexible="0+")

LIST_TRANSACTIONS = Api(66, "ListTransactions", 0, 1, S(
    "ListTransactionsRequest",
    F("state_filters", Array("string")),
    F("producer_id_filters", Array("int64")),
    F("duration_filter", "int64", "1+", default=-1),  # v1 (KIP-994)
), S(
    "ListTransactionsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("unknown_state_filters", Array("string")),
    F("transaction_states", Array(S(
        "ListedTransactionState",
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("transaction_state", "string")))),
), flexible="0+")
