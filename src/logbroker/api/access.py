"""User and ACL administration: CreateUser, DeleteUser, ListUsers,
CreateAcls, DeleteAcls, DescribeAcls (docs/security.md).

With ``auth_required`` each needs an authenticated connection allowed to
alter (describe, for the listings) the cluster — a super user's when
``super_users`` is set — or, for user administration only, the bootstrap
rule: a connection from a loopback address while no user exists
(``Session.may_administer``). A change is answered once the store has it
(LMDB: at once; etcd: once etcd has it). The bootstrap rule's write is
conditional in the store (no user may exist, or ever have existed, by
then), so of two racing first users the second is refused, on one broker
or across a cluster; and the store refuses to delete the last user or the
last super user (INVALID_REQUEST), so the rule never has to reopen.
"""

from __future__ import annotations

import logging

from ..errors import ClusterAuthorizationFailedError, InvalidRequestError, ResourceNotFoundError
from ..protocol import messages as m
from ..protocol.auth_messages import check_user_name
from ..security.acl import MAX_FILTERS, MAX_PER_REQUEST, AclBinding, AnyOf
from ..security.auth_store import Credentials

log = logging.getLogger("logbroker.auth")


def _who(session) -> str:
    return session.principal or session.peer


def list_users(svc, req: m.ListUsers, session) -> m.ListUsersResponse:
    users = svc.auth.users
    session.may_administer("describe", users)
    return m.ListUsersResponse(users=tuple(users.list()))


async def create_user(svc, req: m.CreateUser, session) -> m.CreateUserResponse:
    users = svc.auth.users
    try:
        first = session.may_administer("alter", users)
        check_user_name(req.name)
        cred = Credentials(req.mechanism, req.salt, req.stored_key, req.server_key,
                           req.iterations, tuple(Credentials(*c) for c in req.more)).check()
        created = await users.put(req.name, cred, first=first)
    except ClusterAuthorizationFailedError as exc:  # the bootstrap rule is closed, or ACLs
        log.info("%s may not create user %r: %s", _who(session), req.name[:60], exc.message)
        raise
    log.info("%s %s user %r", _who(session), "created" if created else "changed the password of",
             req.name)
    return m.CreateUserResponse(created=created)


async def delete_user(svc, req: m.DeleteUser, session) -> m.DeleteUserResponse:
    users = svc.auth.users
    session.may_administer("alter", users)
    check_user_name(req.name)
    try:
        gone = await users.delete(req.name, svc.auth.super_user_names)
    except InvalidRequestError as exc:  # the last user or super user stays
        log.info("%s: %s", _who(session), exc.message)
        raise
    if not gone:
        raise ResourceNotFoundError(f"no user {req.name!r}")
    log.info("%s deleted user %r", _who(session), req.name)
    return m.DeleteUserResponse()


def _filter(req) -> AclBinding:
    return AclBinding(req.principal, req.resource_type, req.name, req.pattern, req.operation,
                      req.permission)


def _bounded(what: str, count: int, most: int) -> None:
    """INVALID_REQUEST past ``most`` bindings or filters in one request."""
    if count > most:
        raise InvalidRequestError(f"{what}: {count} in one request, at most {most}")


async def create_acls(svc, req: m.CreateAcls, session) -> m.CreateAclsResponse:
    session.may_administer("alter")
    _bounded("CreateAcls bindings", len(req.acls), MAX_PER_REQUEST)
    created = await svc.auth.acls.add([AclBinding(*row) for row in req.acls])
    log.info("%s added %d ACL(s)", _who(session), created)
    return m.CreateAclsResponse(created=created)


async def delete_acls(svc, req: m.DeleteAcls, session) -> m.DeleteAclsResponse:
    session.may_administer("alter")
    _bounded("DeleteAcls filters", 1 + len(req.also), MAX_FILTERS)
    flt = _filter(req)
    if req.also:  # a Kafka DeleteAcls' further filters: one pass over the bindings for all
        flt = AnyOf((flt, *(AclBinding(*row) for row in req.also)))
    gone = await svc.auth.acls.remove(flt)
    log.info("%s removed %d ACL(s)", _who(session), len(gone))
    return m.DeleteAclsResponse(acls=tuple(b.fields() for b in gone))


def describe_acls(svc, req: m.DescribeAcls, session) -> m.DescribeAclsResponse:
    session.may_administer("describe")
    flt = _filter(req)
    return m.DescribeAclsResponse(acls=tuple(b.fields() for b in svc.auth.acls.list()
                                             if b.matches(flt)))
