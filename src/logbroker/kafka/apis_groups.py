"""Schemas of the consumer-group APIs: FindCoordinator, JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch (non-flexible versions
only but OffsetFetch v6-7, whose v7 asks for stable offsets; docs/kafka.md). Written from the protocol's documented fields.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

FIND_COORDINATOR = Api(10, "FindCoordinator", 0, 2, S(
    "FindCoordinatorRequest",
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+"),  # 0 group, 1 transaction
), S(
    "FindCoordinatorResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3", default=None),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
))

JOIN_GROUP = Api(11, "JoinGroup", 0, 5, S(
    "JoinGroupRequest",
    F("group_id", "string"),
    F("session_timeout_ms", "int32"),
    F("rebalance_timeout_ms", "int32", "1+", default=-1),
    F("member_id", "string"),
    F("group_instance_id", "string", "5+", nullable="5+", default=None),
    F("protocol_type", "string"),
    F("protocols", Array(S(
        "JoinGroupRequestProtocol",
        F("name", "string"),
        F("metadata", "bytes")))),
), S(
    "JoinGroupResponse",
    F("throttle_time_ms", "int32", "2+"),
    F("error_code", "int16"),
    F("generation_id", "int32", default=-1),
    F("protocol_name", "string"),
    F("leader", "string"),
    F("member_id", "string"),
    F("members", Array(S(
        "JoinGroupResponseMember",
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("metadata", "bytes")))),
))

SYNC_GROUP = Api(14, "SyncGroup", 0, 3, S(
    "SyncGroupRequest",
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("assignments", Array(S(
        "SyncGroupRequestAssignment",
        F("member_id", "string"),
        F("assignment", "bytes")))),
), S(
    "SyncGroupResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("assignment", "bytes"),
))

HEARTBEAT = Api(12, "Heartbeat", 0, 3, S(
    "HeartbeatRequest",
    F("group_id", "string"),
    F("generation_id", "int32"),
    F("member_id", "string"),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
), S(
    "HeartbeatResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
))

LEAVE_GROUP = Api(13, "LeaveGroup", 0, 3, S(
    "LeaveGroupRequest",
    F("group_id", "string"),
    F("member_id", "string", "0-2"),
    F("members", Array(S(
        "MemberIdentity",
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None))), "3+"),
), S(
    "LeaveGroupResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("members", Array(S(
        "MemberResponse",
        F("member_id", "string", "3+"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("error_code", "int16", "3+"))), "3+"),
))

OFFSET_COMMIT = Api(8, "OffsetCommit", 2, 7, S(
    "OffsetCommitRequest",
    F("group_id", "string"),
    F("generation_id", "int32", "1+", default=-1),
    F("member_id", "string", "1+"),
    F("group_instance_id", "string", "7+", nullable="7+", default=None),
    F("retention_time_ms", "int64", "2-4", default=-1),
    F("topics", Array(S(
        "OffsetCommitRequestTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "OffsetCommitRequestPartition",
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "6+", default=-1),
            F("committed_metadata", "string", nullable="0+"))))))),
), S(
    "OffsetCommitResponse",
    F("throttle_time_ms", "int32", "3+"),
    F("topics", Array(S(
        "OffsetCommitResponseTopic",
        F("name", "string"),
        F("partitions", Array(S(
            "OffsetCommitResponsePartition",
            F("partition_index", "int32"),
            F("error_code", "int16"))))))),
))

# v6 flexible; v7 asks for stable offsets (KIP-447: a read_committed consumer's)
OFFSET_FETCH = Api(9, "OffsetFetch", 1, 7, S(
    "OffsetFetchRequest",
    F("group_id", "string", "0-7"),
    # v2+: null asks for every committed partition of the group
    F("topics", Array(S(
        "OffsetFetchRequestTopic",
        F("name", "string", "0-7"),
        F("partition_indexes", Array("int32"), "0-7"))), "0-7", nullable="2-7"),
    F("require_stable", "bool", "7+"),
), S(
    "OffsetFetchResponse",
    F("throttle_time_ms", "int32", "3+"),
    F("topics", Array(S(
        "OffsetFetchResponseTopic",
        F("name", "string", "0-7"),
        F("partitions", Array(S(
            "OffsetFetchResponsePartition",
            F("partition_index", "int32", "0-7"),
            F("committed_offset", "int64", "0-7"),
            F("committed_leader_epoch", "int32", "5-7", default=-1),
            F("metadata", "string", "0-7", nullable="0-7"),
            F("error_code", "int16", "0-7"))), "0-7"))), "0-7"),
    F("error_code", "int16", "2-7"),
), flexible="6+")
