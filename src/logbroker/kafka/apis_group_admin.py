"""Schemas of the group administration APIs: ListGroups (v0-2),
DescribeGroups (v0-4), DeleteGroups (v0-1) (non-flexible versions only;
docs/kafka.md §4.5). Written from the protocol's documented fields
(Kafka's ListGroups*, DescribeGroups*, DeleteGroups* message specs).

- ListGroups: no request field before v4 (states filter); v1+ answers a
  throttle time. Each group is its id and protocol type.
- DescribeGroups: v3+ asks for the group's authorized operations (answered
  as a bitfield, INT32_MIN when omitted); v4+ names each member's
  ``group_instance_id``. Protocol data (the assignor) and the member bytes
  are Kafka's "only in the Stable state".
- DeleteGroups: one result per group id; a throttle time from v0.

The flexible versions (ListGroups 3+, DescribeGroups 5+, DeleteGroups 2+)
are declared, as Kafka's specs do; the ranges stop before them.
"""

from __future__ import annotations

from .schema import Api, Array, F, S

AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)  # Kafka's INT32_MIN: "not provided"

LIST_GROUPS = Api(16, "ListGroups", 0, 2, S(
    "ListGroupsRequest",
), S(
    "ListGroupsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("error_code", "int16"),
    F("groups", Array(S(
        "ListedGroup",
        F("group_id", "string"),
        F("protocol_type", "string")))),
), flexible="3+")

DESCRIBE_GROUPS = Api(15, "DescribeGroups", 0, 4, S(
    "DescribeGroupsRequest",
    F("groups", Array("string")),
    F("include_authorized_operations", "bool", "3+"),
), S(
    "DescribeGroupsResponse",
    F("throttle_time_ms", "int32", "1+"),
    F("groups", Array(S(
        "DescribedGroup",
        F("error_code", "int16"),
        F("group_id", "string"),
        F("group_state", "string"),
        F("protocol_type", "string"),
        F("protocol_data", "string"),
        F("members", Array(S(
            "DescribedGroupMember",
            F("member_id", "string"),
            F("group_instance_id", "string", "4+", nullable="4+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("member_metadata", "bytes"),
            F("member_assignment", "bytes")))),
        F("authorized_operations", "int32", "3+", default=AUTHORIZED_OPERATIONS_OMITTED)))),
), flexible="5+")

DELETE_GROUPS = Api(42, "DeleteGroups", 0, 1, S(
    "DeleteGroupsRequest",
    F("groups_names", Array("string")),
), S(
    "DeleteGroupsResponse",
    F("throttle_time_ms", "int32"),
    F("results", Array(S(
        "DeletableGroupResult",
        F("group_id", "string"),
        F("error_code", "int16")))),
), flexible="2+")
