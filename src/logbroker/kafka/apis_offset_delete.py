"""Schema of OffsetDelete (key 47, v0; it has no flexible version),
written from the protocol's documented fields (Kafka's OffsetDelete
message specs): a group id and partitions by topic; the answer a
top-level error, a throttle time and an error per partition.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

OFFSET_DELETE = Api(47, "OffsetDelete", 0, 0, S(
    "OffsetDeleteRequest",
    F("group_id", "string"),
    F("topics", Array(S(
        "OffsetDeleteRequestTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "OffsetDeleteRequestPartition",
            F("partition_index", "int32"))))))),
), S(
    "OffsetDeleteResponse",
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", Array(S(
        "OffsetDeleteResponseTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "OffsetDeleteResponsePartition",
            F("partition_index", "int32"),
            F("error_code", "int16"))))))),
))
