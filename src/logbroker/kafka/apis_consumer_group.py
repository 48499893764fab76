"""Schemas of the consumer group protocol of Kafka 4 (KIP-848):
ConsumerGroupHeartbeat (68, v0-1) and ConsumerGroupDescribe (69, v0), both
flexible from v0 (docs/kafka.md "Consumer groups of Kafka 4"). Written from
the protocol's documented fields; partitions are named by topic id (uuid).
"""

from __future__ import annotations

from .schema import Api, Array, F, S


def _topic_partitions(name: str, with_name: bool = False) -> S:
    fields = [F("topic_id", "uuid")]
    if with_name:
        fields.append(F("topic_name", "string"))
    fields.append(F("partitions", Array("int32")))
    return S(name, *fields)


_HEARTBEAT_ASSIGNMENT = S("Assignment", F("topic_partitions", Array(
    _topic_partitions("TopicPartitions"))))

CONSUMER_GROUP_HEARTBEAT = Api(68, "ConsumerGroupHeartbeat", 0, 1, S(
    "ConsumerGroupHeartbeatRequest",
    F("group_id", "string"),
    F("member_id", "string"),
    F("member_epoch", "int32"),  # 0 join, -1 leave, -2 a static member leaves to come back
    F("instance_id", "string", nullable="0+", default=None),
    F("rack_id", "string", nullable="0+", default=None),
    F("rebalance_timeout_ms", "int32", default=-1),  # -1: unchanged
    F("subscribed_topic_names", Array("string"), nullable="0+", default=None),  # null: unchanged
    F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
    F("server_assignor", "string", nullable="0+", default=None),
    F("topic_partitions", Array(_topic_partitions("TopicPartitions")), nullable="0+",
      default=None),  # the partitions the member owns; null: unchanged
), S(
    "ConsumerGroupHeartbeatResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("member_id", "string", nullable="0+", default=None),
    F("member_epoch", "int32"),
    F("heartbeat_interval_ms", "int32"),
    F("assignment", _HEARTBEAT_ASSIGNMENT, nullable="0+", default=None),  # null: unchanged
), flexible="0+")

_ASSIGNMENT = S("Assignment", F("topic_partitions", Array(
    _topic_partitions("TopicPartitions", with_name=True))))

CONSUMER_GROUP_DESCRIBE = Api(69, "ConsumerGroupDescribe", 0, 0, S(
    "ConsumerGroupDescribeRequest",
    F("group_ids", Array("string")),
    F("include_authorized_operations", "bool"),
), S(
    "ConsumerGroupDescribeResponse",
    F("throttle_time_ms", "int32"),
    F("groups", Array(S(
        "DescribedGroup",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("group_id", "string"),
        F("group_state", "string"),
        F("group_epoch", "int32"),
        F("assignment_epoch", "int32"),
        F("assignor_name", "string"),
        F("members", Array(S(
            "Member",
            F("member_id", "string"),
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("member_epoch", "int32"),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", Array("string")),
            F("subscribed_topic_regex", "string", nullable="0+", default=None),
            F("assignment", _ASSIGNMENT),
            F("target_assignment", _ASSIGNMENT)))),
        F("authorized_operations", "int32", default=-(1 << 31))))),
), flexible="0+")
