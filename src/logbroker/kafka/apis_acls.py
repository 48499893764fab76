"""Schemas of the ACL APIs: DescribeAcls (29, v0-1), CreateAcls (30,
v0-1), DeleteAcls (31, v0-1), written from Kafka's message specs
(DescribeAcls*, CreateAcls*, DeleteAcls*). v1 adds the resource pattern
type (v0 means LITERAL); v2 is the first flexible version, declared and
not served. docs/kafka.md, "ACLs".

Every enum travels as an int8; ``kafka/serve_acls.py`` maps them to our
binding model (security/acl.py).
"""

from __future__ import annotations

from .schema import Api, Array, F, S

LITERAL_CODE = 3  # Kafka's PatternType.LITERAL: what a v0 request means

# an ACL filter: DescribeAcls' request, each of DeleteAcls' filters
FILTER = (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", nullable="0+", default=None),
    F("pattern_type_filter", "int8", "1+", default=LITERAL_CODE),
    F("principal_filter", "string", nullable="0+", default=None),
    F("host_filter", "string", nullable="0+", default=None),
    F("operation", "int8"),
    F("permission_type", "int8"),
)

DESCRIBE_ACLS = Api(29, "DescribeAcls", 0, 1, S(
    "DescribeAclsRequest", *FILTER,
), S(
    "DescribeAclsResponse",
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+", default=None),
    F("resources", Array(S(
        "DescribeAclsResource",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=LITERAL_CODE),
        F("acls", Array(S(
            "AclDescription",
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"))))))),
), flexible="2+")

CREATE_ACLS = Api(30, "CreateAcls", 0, 1, S(
    "CreateAclsRequest",
    F("creations", Array(S(
        "AclCreation",
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("resource_pattern_type", "int8", "1+", default=LITERAL_CODE),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8")))),
), S(
    "CreateAclsResponse",
    F("throttle_time_ms", "int32"),
    F("results", Array(S(
        "AclCreationResult",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None)))),
), flexible="2+")

DELETE_ACLS = Api(31, "DeleteAcls", 0, 1, S(
    "DeleteAclsRequest",
    F("filters", Array(S("DeleteAclsFilter", *FILTER))),
), S(
    "DeleteAclsResponse",
    F("throttle_time_ms", "int32"),
    F("filter_results", Array(S(
        "DeleteAclsFilterResult",
        F("error_code", "int16"),
        F("error_message", "string", nullable="0+", default=None),
        F("matching_acls", Array(S(
            "DeleteAclsMatchingAcl",
            F("error_code", "int16"),
            F("error_message", "string", nullable="0+", default=None),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("pattern_type", "int8", "1+", default=LITERAL_CODE),
            F("principal", "string"),
            F("host", "string"),
            F("operation", "int8"),
            F("permission_type", "int8"))))))),
), flexible="2+")
