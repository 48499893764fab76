"""AccessView: this broker's mirror of the cluster's users and ACL bindings
in etcd (``users/`` and ``acls/`` under the cluster's root, and whether
``users_existed`` is set: state.py), so
that authentication and every authorization check read memory, never etcd.

Pure: no I/O. The node feeds it from its one watch of the cluster's keys
(``reset`` after each full load, ``apply`` per event, node.py) and the
writes of this broker apply themselves at once (access_store.py), so a
broker sees its own change as soon as etcd has it and the others within
their watch's delay.

Order: each key remembers the etcd revision of what the view holds for it
(or of its deletion); an event or a write older than that is ignored. So a
broker's own write, applied before the watch delivers it, is never undone
by an older event still in flight, and a ``reset`` from a load taken
before that write keeps it. A value that cannot be decoded is logged and
skipped (etcd is shared; one bad key must not stop a broker).

``on_acls()`` runs after every change of the bindings (the Authorizer's
re-index, security/auth.py), once per ``reset`` or ``apply_all``.
"""

from __future__ import annotations

import logging

import msgpack

from ..security.acl import AclBinding
from ..security.auth_store import Credentials
from ..errors import LogbrokerError
from .etcd import Item
from .state import Keys

log = logging.getLogger("logbroker.cluster")


def acl_value(b: AclBinding) -> bytes:
    return msgpack.packb(list(b.fields()))


def acl_from(raw: bytes) -> AclBinding:
    fields = msgpack.unpackb(raw)
    if not isinstance(fields, list) or len(fields) != 6:
        raise ValueError("not six fields")
    return AclBinding(*fields).check()


class AccessView:
    def __init__(self, keys: Keys, on_acls=lambda: None) -> None:
        self.keys = keys
        self.on_acls = on_acls
        self.users: dict[str, Credentials] = {}
        self.users_existed = False  # the key users_existed is set (the bootstrap rule closed)
        self.acls: dict[str, AclBinding] = {}  # etcd key -> binding
        self._revisions: dict[str, int] = {}  # key -> revision of what we hold, or of its deletion

    def owns(self, key: str) -> bool:
        return (key.startswith(self.keys.users) or key.startswith(self.keys.acls)
                or key == self.keys.users_existed)

    def reset(self, items: "list[Item]", revision: int) -> None:
        """Replace everything with a full load taken at ``revision`` (items of
        other keys are skipped); what this view holds newer than the load
        (our own writes since) stays."""
        newer = {k: r for k, r in self._revisions.items() if r > revision}
        users = self.keys.users
        kept = {k: (self.users.get(k[len(users):]) if k.startswith(users) else None,
                    self.acls.get(k)) for k in newer}
        existed = self.users_existed and self.keys.users_existed in newer
        self.users, self.acls, self._revisions = {}, {}, {}
        self.users_existed = existed
        for it in items:
            if self.owns(it.key) and it.key not in newer:
                self._set(it.key, it.value, it.version)
        for key, (user, binding) in kept.items():
            self._revisions[key] = newer[key]
            if user is not None:
                self.users[key[len(self.keys.users):]] = user
            if binding is not None:
                self.acls[key] = binding
        self.on_acls()

    def apply(self, key: str, value: "bytes | None", revision: int) -> bool:
        """One change (None: deleted) at ``revision``; False if ignored (not
        ours, or older than what the view holds)."""
        changed = self._set(key, value, revision)
        if changed and key.startswith(self.keys.acls):
            self.on_acls()
        return changed

    def apply_all(self, changes: "list[tuple[str, bytes | None]]", revision: int) -> None:
        """Several changes of one etcd transaction (``on_acls`` once)."""
        acls = False
        for key, value in changes:
            acls |= self._set(key, value, revision) and key.startswith(self.keys.acls)
        if acls:
            self.on_acls()

    def _set(self, key: str, value: "bytes | None", revision: int) -> bool:
        if not self.owns(key) or revision < self._revisions.get(key, 0):
            return False
        try:
            if key == self.keys.users_existed:
                self.users_existed = value is not None
            elif key.startswith(self.keys.users):
                name = key[len(self.keys.users):]
                if value is None:
                    self.users.pop(name, None)
                else:
                    self.users[name] = Credentials.unpack(value).check()
            elif value is None:
                self.acls.pop(key, None)
            else:
                self.acls[key] = acl_from(value)
        except (ValueError, KeyError, TypeError, msgpack.UnpackException, LogbrokerError) as exc:
            log.warning("ignoring undecodable etcd key %s: %s", key, exc)
            return False
        self._revisions[key] = revision
        return True
