"""Users and ACL bindings of a cluster, in etcd (keys in state.py), shared
by every broker: the cluster-mode backings of broker/auth_store.py's
``UserStore`` and broker/acl_store.py's ``AclStore``, with the same
interface (see those modules).

Reads come from the broker's mirror (access_view.py): memory, no etcd
round trip on the request path. A write is one etcd transaction; once etcd
has it, it is applied to this broker's mirror at the transaction's
revision before the call returns, so this broker sees it at once and the
other brokers when their watch delivers it (milliseconds, typically).
Errors reaching etcd raise CLUSTER_UNAVAILABLE (retriable); the write may
or may not have been applied then.

The bootstrap rule's write (``put(..., first=True)``) is conditional in
etcd: applied only if no key exists under ``users/`` and the key
``users_existed`` does not exist, so of two brokers creating a first user
at once, one is refused (CLUSTER_AUTHORIZATION_FAILED). Every user write
also puts ``users_existed`` in the same transaction, so the rule stays
closed for the whole cluster once any user was created, even if every
user is deleted later. A delete is conditional on the user that must
remain (auth_store.keeper: another super user, or any other user) still
existing in etcd, so two deletes racing through two brokers cannot
remove the last super user between them.
"""

from __future__ import annotations

from ..security.acl import AclBinding
from ..security.auth_store import FIRST_USER_TAKEN, Credentials, keeper
from ..errors import ClusterAuthorizationFailedError, InvalidRequestError
from ..protocol.auth_messages import check_user_name
from .access_view import AccessView, acl_value
from .etcd import Etcd
from .state import Keys


class EtcdUserStore:
    def __init__(self, etcd: Etcd, keys: Keys, view: AccessView) -> None:
        self.etcd, self.keys, self.view = etcd, keys, view

    def get(self, name: str) -> "Credentials | None":
        return self.view.users.get(name)

    def list(self) -> list[tuple[str, str, int]]:
        """(name, mechanism, iterations) of every user, by name."""
        return [(n, c.mechanism, c.iterations) for n, c in sorted(self.view.users.items())]

    def empty(self) -> bool:
        return not self.view.users

    def bootstrap_open(self) -> bool:
        """No user exists and none ever did, as this broker's mirror sees it
        (the bootstrap write checks again in etcd)."""
        return not self.view.users and not self.view.users_existed

    async def put(self, name: str, cred: Credentials, first: bool = False) -> bool:
        """Store ``name``'s credentials; True if the user is new."""
        check_user_name(name)
        key, value = self.keys.user(name), cred.check().pack()
        ops = [(key, value), (self.keys.users_existed, b"1")]
        done = await self.etcd.write(ops, only_if_empty=self.keys.users if first else None,
                                     absent=(self.keys.users_existed,) if first else ())
        if not done.applied:
            raise ClusterAuthorizationFailedError(FIRST_USER_TAKEN)
        self.view.apply_all(ops, done.revision)
        return done.changed[0]

    async def delete(self, name: str, supers: frozenset = frozenset()) -> bool:
        """Forget ``name``; False if there was no such user; INVALID_REQUEST
        if it is the last user or the last super user (auth_store.keeper),
        also when another broker deleted the one that was to remain meanwhile."""
        users = self.view.users
        if name not in users:  # as etcd may still have it: a delete of nothing is harmless
            done = await self.etcd.write([(self.keys.user(name), None)])
            self.view.apply(self.keys.user(name), None, done.revision)
            return done.changed[0]
        stays = keeper(name, supers, users.__contains__,
                       lambda: next((n for n in sorted(users) if n != name), None))
        ops = [(self.keys.user(name), None), (self.keys.users_existed, b"1")]
        done = await self.etcd.write(ops, present=(self.keys.user(stays),))
        if not done.applied:
            raise InvalidRequestError(f"DeleteUser refused: {stays!r}, the user to remain once "
                                      f"{name!r} is gone, was deleted meanwhile; retry")
        self.view.apply_all(ops, done.revision)
        return done.changed[0]


class EtcdAclStore:
    def __init__(self, etcd: Etcd, keys: Keys, view: AccessView) -> None:
        self.etcd, self.keys, self.view = etcd, keys, view

    def list(self) -> list[AclBinding]:
        """Every binding, sorted."""
        return sorted(self.view.acls.values())

    async def add(self, bindings) -> int:
        """Store ``bindings`` (each checked first, INVALID_REQUEST); how many were new."""
        ops = list({self.keys.acl(b.fields()): acl_value(b) for b in
                    (b.check() for b in bindings)}.items())
        if not ops:
            return 0
        done = await self.etcd.write(ops)
        self.view.apply_all(ops, done.revision)
        return sum(done.changed)

    async def remove(self, flt: AclBinding) -> list[AclBinding]:
        """Remove every binding passing ``flt`` (empty fields match anything)
        as this broker sees them; those that were still in etcd."""
        gone = [(key, b) for key, b in sorted(self.view.acls.items(), key=lambda kv: kv[1])
                if b.matches(flt)]
        if not gone:
            return []
        done = await self.etcd.write([(key, None) for key, _ in gone])
        self.view.apply_all([(key, None) for key, _ in gone], done.revision)
        return [b for (_, b), removed in zip(gone, done.changed) if removed]
