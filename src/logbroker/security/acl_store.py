"""ACL bindings of a single node, in its LMDB (``acls`` table of
metastore.py): the key is the msgpack of a binding's six fields, the value
empty.

The bindings' interface, the same in both backings (in cluster mode,
cluster/access_store.py's ``EtcdAclStore`` keeps them in etcd):

- ``list()``: every binding, sorted; synchronous and cheap;
- ``await add(bindings)`` (how many were new) and ``await remove(flt)``
  (the bindings removed) return once the change is durable and ``list()``
  shows it; ``on_change()`` (the Authorizer's re-index, security/auth.py)
  has run by then.

Here writes are short LMDB transactions on the broker's loop, committed
durably; they never suspend.
"""

from __future__ import annotations

import msgpack

from ..storage.metastore import MetaStore
from .acl import AclBinding


class AclStore:
    def __init__(self, meta: MetaStore, on_change=lambda: None) -> None:
        self.meta = meta
        self.db = meta.db("acls")
        self.on_change = on_change

    def list(self) -> list[AclBinding]:
        """Every binding, sorted."""
        with self.meta.read() as txn:
            keys = [bytes(k) for k, _ in txn.cursor(db=self.db)]
        return sorted(AclBinding(*msgpack.unpackb(k)) for k in keys)

    async def add(self, bindings) -> int:
        """Store ``bindings`` (each checked first, INVALID_REQUEST); how many were new."""
        keys = [_key(b.check()) for b in bindings]
        new = 0
        with self.meta.write() as txn:
            for key in keys:
                new += txn.put(key, b"", db=self.db, overwrite=False)
        self.on_change()
        return new

    async def remove(self, flt: AclBinding) -> list[AclBinding]:
        """Remove every binding passing ``flt`` (empty fields match anything); those removed."""
        gone = [b for b in self.list() if b.matches(flt)]
        if not gone:  # nothing to write, nothing to index again
            return []
        with self.meta.write() as txn:
            for b in gone:
                txn.delete(_key(b), db=self.db)
        self.on_change()
        return gone


def _key(b: AclBinding) -> bytes:
    return msgpack.packb(list(b.fields()))
