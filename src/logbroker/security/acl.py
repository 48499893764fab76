"""Access control lists: who may do what to which resource (pure, no I/O;
docs/security.md, "Authorization").

An ``AclBinding`` is principal x resource (type, name, literal or prefix
pattern) x operation x allow/deny. ``Authorizer(bindings, super_users)``
answers ``authorize(principal, operation, resource_type, name)`` with
Kafka's rules:

- a super user is always allowed;
- with ``allow_if_no_acl`` (Kafka's ``allow.everyone.if.no.acl.found``) a
  resource no binding matches at all (of any principal, operation or
  permission) is allowed to everyone; once one matches, the bindings decide;
- a matching deny wins over any allow;
- no matching allow: denied (ACLs are enforced only where the broker says
  so, security/auth.py);
- a binding matches a resource by its literal name (``*``: every name of
  that type) or, with pattern ``prefix``, every name starting with it;
- a connection that did not authenticate is ``User:ANONYMOUS``
  (``ANONYMOUS``; security/auth.py names it): bindings may name it and
  ``User:*`` matches it, as in Kafka; the empty principal matches nothing;
- operation ``all`` matches every operation; an allow of read, write,
  delete or alter implies describe (a deny does not widen: deny read does
  not deny describe), as in Kafka.

The check is a dict lookup of the literal bindings of (type, name) and
(type, ``*``) plus a scan of the type's prefix bindings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..errors import InvalidRequestError

TOPIC, GROUP, CLUSTER = "topic", "group", "cluster"
TRANSACTIONAL_ID = "transactional_id"  # a transactional producer's id (Kafka's TransactionalId)
RESOURCE_TYPES = (TOPIC, GROUP, CLUSTER, TRANSACTIONAL_ID)
CLUSTER_NAME = "logbroker"  # the one cluster resource
LITERAL, PREFIX = "literal", "prefix"
PATTERNS = (LITERAL, PREFIX)
MATCH = "match"  # a filter's pattern only: the bindings that apply to the named resource
ALLOW, DENY = "allow", "deny"
PERMISSIONS = (ALLOW, DENY)
ALL = "all"
OPERATIONS = ("read", "write", "create", "delete", "describe", "alter", "cluster_action", ALL)
WILDCARD_PRINCIPAL, WILDCARD_NAME = "User:*", "*"
ANONYMOUS = "User:ANONYMOUS"  # the principal of a connection that did not authenticate
_IMPLIED_BY = {"describe": frozenset({"read", "write", "delete", "alter"})}  # allow only
# Kafka's config operations (api/configs.py): describe_configs is implied by alter_configs
OPERATIONS = OPERATIONS[:-1] + ("describe_configs", "alter_configs", ALL)  # ALL stays last
_IMPLIED_BY["describe_configs"] = frozenset({"alter_configs"})
MAX_NAME_CHARS = 249
MAX_PER_REQUEST = 1000  # bindings of a CreateAcls (api/access.py)
MAX_FILTERS = 16  # filters of a DeleteAcls: each is a pass over every binding


@dataclass(frozen=True, order=True)
class AclBinding:
    principal: str  # "User:NAME" or "User:*"
    resource_type: str  # topic, group, cluster or transactional_id
    name: str  # the resource's name or prefix ("logbroker" for the cluster)
    pattern: str = LITERAL
    operation: str = ALL
    permission: str = ALLOW

    def check(self) -> "AclBinding":
        """INVALID_REQUEST unless every field is one the broker knows."""
        if not (isinstance(self.principal, str) and self.principal.startswith("User:")
                and 5 < len(self.principal) <= MAX_NAME_CHARS + 5):
            raise InvalidRequestError(f"principal must be User:NAME or User:*, got "
                                      f"{str(self.principal)[:60]!r}")
        for value, known, what in ((self.resource_type, RESOURCE_TYPES, "resource type"),
                                   (self.pattern, PATTERNS, "pattern"),
                                   (self.operation, OPERATIONS, "operation"),
                                   (self.permission, PERMISSIONS, "permission")):
            if value not in known:
                raise InvalidRequestError(f"{what} must be one of {', '.join(known)}, got "
                                          f"{str(value)[:40]!r}")
        if not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME_CHARS:
            raise InvalidRequestError(f"resource name must be 1-{MAX_NAME_CHARS} characters")
        if self.resource_type == CLUSTER and self.name != CLUSTER_NAME:
            raise InvalidRequestError(f"the cluster resource is named {CLUSTER_NAME!r}")
        return self

    def matches(self, flt: "AclBinding") -> bool:
        """Whether this binding passes ``flt``, whose empty fields match
        anything. A filter whose pattern is ``match`` (Kafka's MATCH) with a
        name passes the bindings that apply to that resource: literal ones of
        that name or of ``*``, and prefix ones the name starts with. An
        ``AnyOf`` passes the bindings that pass any of its filters."""
        if flt.__class__ is AnyOf:
            return any(self.matches(f) for f in flt.filters)
        if (flt.principal and flt.principal != self.principal
                or flt.resource_type and flt.resource_type != self.resource_type
                or flt.operation and flt.operation != self.operation
                or flt.permission and flt.permission != self.permission):
            return False
        name = flt.name
        if flt.pattern == MATCH:
            return not name or (name.startswith(self.name) if self.pattern == PREFIX
                                else self.name in (name, WILDCARD_NAME))
        return (not name or name == self.name) and (not flt.pattern or flt.pattern == self.pattern)

    def fields(self) -> tuple:
        return (self.principal, self.resource_type, self.name, self.pattern, self.operation,
                self.permission)


class AnyOf:
    """Several filters as one (a Kafka DeleteAcls' filters): one pass over
    the bindings removes those passing any of them (``AclBinding.matches``)."""

    __slots__ = ("filters",)

    def __init__(self, filters) -> None:
        self.filters = tuple(filters)


class Authorizer:
    """The bindings in force, indexed for the per-request check."""

    def __init__(self, bindings: Iterable[AclBinding] = (), super_users: Iterable[str] = (),
                 allow_if_no_acl: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self.bindings = tuple(sorted(set(bindings)))
        self._literal: dict[tuple[str, str], list[AclBinding]] = {}
        self._prefix: dict[str, list[AclBinding]] = {}
        for b in self.bindings:
            if b.pattern == PREFIX:
                self._prefix.setdefault(b.resource_type, []).append(b)
            else:
                self._literal.setdefault((b.resource_type, b.name), []).append(b)

    def authorize(self, principal: str, operation: str, resource_type: str, name: str) -> bool:
        """True if ``principal`` may do ``operation`` on the resource (module docstring)."""
        if principal in self.super_users:
            return True
        if not principal:
            return False
        allowed, found = False, False
        for b in self._matching(resource_type, name):
            found = True
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.permission == DENY:
                if b.operation == operation or b.operation == ALL:
                    return False
            elif not allowed and (b.operation == operation or b.operation == ALL
                                  or b.operation in _IMPLIED_BY.get(operation, ())):
                allowed = True
        return allowed or (not found and self.allow_if_no_acl)

    def _matching(self, resource_type: str, name: str):
        literal = self._literal
        yield from literal.get((resource_type, name), ())
        yield from literal.get((resource_type, WILDCARD_NAME), ())
        for b in self._prefix.get(resource_type, ()):
            if name.startswith(b.name):
                yield b
