"""ACL bindings in the broker's LMDB (``acls`` table of metastore.py): the
key is the msgpack of a binding's six fields, the value empty. Writes are
short transactions on the broker's loop, committed durably. A single node
only, as the users (auth_store.py): cluster mode does not support
authentication yet (docs/security.md).
"""

from __future__ import annotations

import msgpack

from ..storage.metastore import MetaStore
from .acl import AclBinding


class AclStore:
    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta
        self.db = meta.db("acls")

    def list(self) -> list[AclBinding]:
        """Every binding, sorted."""
        with self.meta.read() as txn:
            keys = [bytes(k) for k, _ in txn.cursor(db=self.db)]
        return sorted(AclBinding(*msgpack.unpackb(k)) for k in keys)

    def add(self, bindings) -> int:
        """Store ``bindings`` (each checked first, INVALID_REQUEST); how many were new."""
        keys = [_key(b.check()) for b in bindings]
        new = 0
        with self.meta.write() as txn:
            for key in keys:
                new += txn.put(key, b"", db=self.db, overwrite=False)
        return new

    def remove(self, flt: AclBinding) -> list[AclBinding]:
        """Remove every binding passing ``flt`` (empty fields match anything); those removed."""
        gone = [b for b in self.list() if b.matches(flt)]
        with self.meta.write() as txn:
            for b in gone:
                txn.delete(_key(b), db=self.db)
        return gone


def _key(b: AclBinding) -> bytes:
    return msgpack.packb(list(b.fields()))
