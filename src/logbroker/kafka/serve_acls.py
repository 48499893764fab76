"""Kafka's ACL APIs (DescribeAcls 29, CreateAcls 30, DeleteAcls 31, v0-1)
over our CreateAcls / DescribeAcls / DeleteAcls (api/access.py), so both
listeners see and change the same bindings (docs/kafka.md, "ACLs").

Kafka's enums map to our binding model (security/acl.py): resource types
TOPIC, GROUP and CLUSTER (Kafka's cluster resource ``kafka-cluster`` is our
``logbroker``); pattern types LITERAL and PREFIXED, and in filters ANY and
MATCH (the bindings that apply to the named resource); operations ALL,
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION; permissions
ALLOW and DENY; the principal ``User:NAME`` or ``User:*``. Our bindings have
no host: a creation must name host ``*`` (every host); a filter's host
``*`` or null matches, any other host matches nothing.

- CreateAcls: one result per creation, in order. A creation outside that
  model (another resource type, operation or host, an UNKNOWN or filter-only
  enum, a bad principal or name) gets INVALID_REQUEST (42) naming the rule;
  the others are added in one of our CreateAcls.
- DescribeAcls: the bindings passing the filter, grouped by resource
  pattern; a bad filter is INVALID_REQUEST for the whole answer. A filter
  naming a Kafka resource type or operation we have no binding for matches
  nothing (as in Kafka when none exists).
- DeleteAcls: one result per filter, listing the bindings it matched and
  removed (a bad filter: INVALID_REQUEST in its result); the valid filters
  travel in one of our DeleteAcls. At most 1000 creations and 16 filters
  a request (more: every result INVALID_REQUEST): each filter is a pass
  over every binding.

Authorization is our handlers': alter on the cluster to create or delete,
describe on the cluster to describe (CLUSTER_AUTHORIZATION_FAILED, 31).
With ``auth_required`` off the bindings are stored and listed but enforced
by nobody, as on our listener (Kafka would answer SECURITY_DISABLED).
"""

from __future__ import annotations

import logging

from ..errors import InvalidRequestError
from ..protocol import messages as m
from ..security.acl import TRANSACTIONAL_ID
from ..security.acl import (ALL, ALLOW, CLUSTER, CLUSTER_NAME, DENY, GROUP, LITERAL, MATCH,
                            MAX_FILTERS, MAX_PER_REQUEST, PREFIX, TOPIC, AclBinding)
from .plan import KafkaSite, Plan
from .wire_errors import kafka_code, kafka_message

log = logging.getLogger("logbroker.kafka")

KAFKA_CLUSTER = "kafka-cluster"  # Kafka's one cluster resource name
ANY_CODE = 1  # Kafka's ANY in every enum of a filter
RESOURCES = {TOPIC: 2, GROUP: 3, CLUSTER: 4, TRANSACTIONAL_ID: 5}
KAFKA_ONLY_RESOURCES = frozenset({6, 7})  # DELEGATION_TOKEN, USER
PATTERNS = {LITERAL: 3, PREFIX: 4}
MATCH_CODE = 2
OPERATIONS = {ALL: 2, "read": 3, "write": 4, "create": 5, "delete": 6, "alter": 7,
              "describe": 8, "cluster_action": 9}
KAFKA_ONLY_OPERATIONS = frozenset(range(10, 15))  # *_CONFIGS, IDEMPOTENT_WRITE, *_TOKENS
PERMISSIONS = {DENY: 2, ALLOW: 3}
_NAMES = {kind: {code: name for name, code in table.items()}
          for kind, table in (("resource type", RESOURCES), ("pattern type", PATTERNS),
                              ("operation", OPERATIONS), ("permission type", PERMISSIONS))}
NOTHING = object()  # a valid filter that no binding of ours can pass


def _enum(kind: str, code: int, *, any_ok: bool, kafka_only=frozenset()):
    """Our name for Kafka's ``code`` ("" for a filter's ANY), NOTHING for a
    Kafka value we keep no binding of; INVALID_REQUEST for anything else."""
    if any_ok and code == ANY_CODE:
        return ""
    name = _NAMES[kind].get(code)
    if name is not None:
        return name
    if code in kafka_only:
        if any_ok:
            return NOTHING
        raise InvalidRequestError(f"{kind} {code} is not supported by this broker (ACLs cover "
                                  f"{', '.join(_NAMES[kind].values())})")
    raise InvalidRequestError(f"{kind} {code} is not valid here")


def _our_name(resource_type: str, name: str) -> str:
    return CLUSTER_NAME if resource_type in (CLUSTER, "") and name == KAFKA_CLUSTER else name


def _kafka_name(resource_type: str, name: str) -> str:
    return KAFKA_CLUSTER if resource_type == CLUSTER else name


def binding_of(c) -> AclBinding:
    """Our binding for a Kafka AclCreation; INVALID_REQUEST naming the rule."""
    rtype = _enum("resource type", c.resource_type, any_ok=False,
                  kafka_only=KAFKA_ONLY_RESOURCES)
    if rtype == CLUSTER and c.resource_name != KAFKA_CLUSTER:
        raise InvalidRequestError(f"the cluster resource is named {KAFKA_CLUSTER!r}")
    if c.host != "*":
        raise InvalidRequestError(f"host {c.host[:60]!r}: this broker's ACLs apply to every "
                                  "host (use host \"*\")")
    return AclBinding(c.principal, rtype, _our_name(rtype, c.resource_name),
                      _enum("pattern type", c.resource_pattern_type, any_ok=False),
                      _enum("operation", c.operation, any_ok=False,
                            kafka_only=KAFKA_ONLY_OPERATIONS),
                      _enum("permission type", c.permission_type, any_ok=False)).check()


def filter_of(f):
    """Our filter for a Kafka ACL filter (a DescribeAcls body or a
    DeleteAclsFilter): an AclBinding with "" for any, or NOTHING;
    INVALID_REQUEST for a filter Kafka refuses too (an UNKNOWN enum)."""
    rtype = _enum("resource type", f.resource_type_filter, any_ok=True,
                  kafka_only=KAFKA_ONLY_RESOURCES)
    pattern = (MATCH if f.pattern_type_filter == MATCH_CODE
               else _enum("pattern type", f.pattern_type_filter, any_ok=True))
    operation = _enum("operation", f.operation, any_ok=True, kafka_only=KAFKA_ONLY_OPERATIONS)
    permission = _enum("permission type", f.permission_type, any_ok=True)
    if NOTHING in (rtype, operation) or f.host_filter not in (None, "*"):
        return NOTHING
    name = f.resource_name_filter or ""
    return AclBinding(f.principal_filter or "", rtype, _our_name(rtype, name), pattern,
                      operation, permission)


def _kafka_acl(row) -> dict:
    """One of our bindings as the fields Kafka's answers name it by."""
    principal, rtype, name, pattern, operation, permission = row
    return {"resource_type": RESOURCES[rtype], "resource_name": _kafka_name(rtype, name),
            "pattern_type": PATTERNS[pattern], "principal": principal, "host": "*",
            "operation": OPERATIONS[operation], "permission_type": PERMISSIONS[permission]}


def _refused(api: str, why: str) -> None:
    """The debug line of one refused creation or filter (a whole refused
    request is logged by the connection: net/refusals.py)."""
    log.debug("Kafka %s refused: %s", api, why)


def create_acls(site: KafkaSite, header, body) -> Plan:
    errors: dict[int, str] = {}
    bindings = []
    if len(body.creations) > MAX_PER_REQUEST:
        why = f"{len(body.creations)} creations in one request, at most {MAX_PER_REQUEST}"
        errors = {i: why for i in range(len(body.creations))}
    else:
        for i, creation in enumerate(body.creations):
            try:
                bindings.append(binding_of(creation))
            except InvalidRequestError as exc:
                errors[i] = exc.message
    for i, why in errors.items():
        _refused("CreateAcls", f"creation {i}: {why}")
    count = len(body.creations)

    def answer(resp: "m.CreateAclsResponse | None") -> dict:
        code, message = (kafka_code(resp.error), kafka_message(resp.message)) if resp else (0, None)
        return {"results": [
            {"error_code": InvalidRequestError.code, "error_message": errors[i]} if i in errors
            else {"error_code": code, "error_message": message} for i in range(count)]}
    if not bindings:
        return Plan(None, answer)
    return Plan(m.CreateAcls(acls=tuple(b.fields() for b in bindings)), answer)


def describe_acls(site: KafkaSite, header, body) -> Plan:
    try:
        flt = filter_of(body)
    except InvalidRequestError as exc:
        _refused("DescribeAcls", exc.message)
        why = exc.message
        return Plan(None, lambda resp: {"error_code": InvalidRequestError.code,
                                        "error_message": why, "resources": []})
    if flt is NOTHING:
        return Plan(None, lambda resp: {"error_code": 0, "resources": []})

    def answer(resp: m.DescribeAclsResponse) -> dict:
        if resp.error:
            return {"error_code": kafka_code(resp.error),
                    "error_message": kafka_message(resp.message), "resources": []}
        grouped: dict = {}
        for row in resp.acls:
            acl = _kafka_acl(row)
            key = (acl["resource_type"], acl["resource_name"], acl["pattern_type"])
            grouped.setdefault(key, []).append(
                {k: acl[k] for k in ("principal", "host", "operation", "permission_type")})
        return {"error_code": 0, "resources": [
            {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
            for (t, n, p), acls in grouped.items()]}
    return Plan(m.DescribeAcls(*flt.fields()), answer)


def delete_acls(site: KafkaSite, header, body) -> Plan:
    filters: list = []  # per Kafka filter: an AclBinding, NOTHING, or the refusal's text
    if len(body.filters) > MAX_FILTERS:
        why = f"{len(body.filters)} filters in one request, at most {MAX_FILTERS}"
        filters = [why] * len(body.filters)
    else:
        for f in body.filters:
            try:
                filters.append(filter_of(f))
            except InvalidRequestError as exc:
                filters.append(exc.message)
    for i, f in enumerate(filters):
        if isinstance(f, str):
            _refused("DeleteAcls", f"filter {i}: {f}")
    valid = [f for f in filters if isinstance(f, AclBinding)]

    def result(f, resp, removed) -> dict:
        if isinstance(f, str):
            return {"error_code": InvalidRequestError.code, "error_message": f,
                    "matching_acls": []}
        if resp is not None and resp.error:
            return {"error_code": kafka_code(resp.error),
                    "error_message": kafka_message(resp.message), "matching_acls": []}
        if f is NOTHING:
            removed = ()
        elif len(valid) > 1:  # which filter removed which binding (at most MAX_FILTERS passes)
            removed = [(b, acl) for b, acl in removed if b.matches(f)]
        return {"error_code": 0, "matching_acls": [acl for _b, acl in removed]}

    def answer(resp: "m.DeleteAclsResponse | None") -> dict:
        rows = () if resp is None or resp.error else resp.acls
        removed = [(AclBinding(*row), {"error_code": 0, **_kafka_acl(row)}) for row in rows]
        return {"filter_results": [result(f, resp, removed) for f in filters]}
    if not valid:
        return Plan(None, answer)
    first, *more = valid
    return Plan(m.DeleteAcls(*first.fields(), also=tuple(f.fields() for f in more)), answer)
