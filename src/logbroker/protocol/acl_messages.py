"""Protocol messages of ACL administration (docs/security.md,
"Authorization"; broker/acl.py has the model).

Registered in the same tables as messages.py (which re-exports them). A
binding on the wire is ``(principal, resource_type, name, pattern,
operation, permission)``, all strings; a filter has the same fields, ""
matching anything, and its pattern may also be ``match`` (the bindings
that apply to the named resource: Kafka's MATCH, security/acl.py).

- ``CreateAcls``: add bindings (one already there is not added twice).
- ``DeleteAcls``: remove every binding passing the filter, or any of the
  filters in ``also`` (each a binding's six fields, "" matching anything;
  a Kafka DeleteAcls carries several); the answer lists them.
- ``DescribeAcls``: the bindings passing the filter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .message_base import RESP as _RESP, Message, Response, register as _register
from .parts import AclRow

BINDING = AclRow  # a binding: (principal, resource_type, name, pattern, operation, permission)
FILTER = {"principal": str, "resource_type": str, "name": str, "pattern": str, "operation": str,
          "permission": str}


@_register
@dataclass(frozen=True)
class CreateAcls(Message):
    """acls: (principal, resource_type, name, pattern, operation, permission)."""

    API, SCHEMA = 28, {"acls": [BINDING]}
    acls: tuple = ()


@_register
@dataclass(frozen=True)
class CreateAclsResponse(Response):
    """created: how many of the bindings were new."""

    API, SCHEMA = 28, {**_RESP, "created": int}
    error: int = 0
    message: str = ""
    created: int = 0


@dataclass(frozen=True)
class _Filter(Message):
    principal: str = ""
    resource_type: str = ""
    name: str = ""
    pattern: str = ""
    operation: str = ""
    permission: str = ""


@_register
@dataclass(frozen=True)
class DeleteAcls(_Filter):
    API, SCHEMA = 29, {**FILTER, "also": [BINDING]}
    also: tuple = ()  # more filters, as (principal, resource_type, name, pattern, ...)


@_register
@dataclass(frozen=True)
class DeleteAclsResponse(Response):
    """acls: the bindings removed."""

    API, SCHEMA = 29, {**_RESP, "acls": [BINDING]}
    error: int = 0
    message: str = ""
    acls: tuple = ()


@_register
@dataclass(frozen=True)
class DescribeAcls(_Filter):
    API, SCHEMA = 30, dict(FILTER)


@_register
@dataclass(frozen=True)
class DescribeAclsResponse(Response):
    """acls: the bindings passing the filter, sorted."""

    API, SCHEMA = 30, {**_RESP, "acls": [BINDING]}
    error: int = 0
    message: str = ""
    acls: tuple = ()
