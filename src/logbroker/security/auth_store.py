"""Users and their SCRAM credentials: ``Credentials`` and their encoding (a
msgpack map of mechanism, salt, stored key, server key and iteration
count: SCRAM-SHA-256's; and, when the user has them, ``more``: the same
password's SCRAM-SHA-512 credentials, as Kafka keeps one credential per
mechanism), and ``UserStore``, a single node's users in its LMDB
(``users`` table of metastore.py, name -> that map). Never a password: the
client derives the credentials (RFC 5802) and the broker keeps them as
given, so a copy of the data dir lets nobody log in without cracking the
salted hash.

The users' interface, the same in both backings (in cluster mode,
cluster/access_store.py's ``EtcdUserStore`` keeps them in etcd):

- ``get(name)``, ``list()``, ``empty()``, ``bootstrap_open()``: synchronous
  and cheap (never wait for I/O beyond a short LMDB read), for the request
  path;
- ``await put(name, cred, first=False)`` (True if the user is new) and
  ``await delete(name, supers=frozenset())`` (False if there was none)
  return once the change is durable and visible to ``get``. ``first``: the
  bootstrap rule's write, refused (CLUSTER_AUTHORIZATION_FAILED) if any
  user exists or ever existed by then, atomically with the write.

The bootstrap rule never reopens: every write also records, durably and
atomically with it, that a user has existed (``bootstrap_open()`` is
False from then on, even with no user left), and ``delete`` refuses
(INVALID_REQUEST, ``keeper``) to remove the last user, or the last
existing user named in ``supers`` (the super users' names), so users stay
administrable. Only removing that record offline reopens the rule (a
fresh data dir; in a cluster, the etcd key ``users_existed``).

Here reads and writes are short LMDB transactions on the broker's loop,
each write committed durably (like a topic's config); the writes never
suspend, so a write's check and its commit happen in one loop turn.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from ..errors import ClusterAuthorizationFailedError, InvalidRequestError
from ..protocol.auth_messages import (MAX_ITERATIONS, MECHANISM, MIN_ITERATIONS, SCRAM_SHA_512,
                                      check_user_name)
from ..storage.metastore import MetaStore

KEY_BYTES = 32  # SHA-256
KEY_BYTES_OF = {MECHANISM: KEY_BYTES, SCRAM_SHA_512: 64}  # each SCRAM mechanism's key size
MIN_SALT_BYTES, MAX_SALT_BYTES = 8, 64
FIRST_USER_TAKEN = ("user administration needs an authenticated connection (another user "
                    "was created first)")
EXISTED = b"users_existed"  # key in the meta table: a user has existed (the bootstrap rule closed)


@dataclass(frozen=True)
class Credentials:
    """A user's SCRAM-SHA-256 credentials; ``more``: other mechanisms'
    (``Credentials`` too, SCRAM-SHA-512 only, each without ``more``)."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int
    more: tuple = ()

    def check(self) -> "Credentials":
        """INVALID_REQUEST unless these are credentials the broker can use:
        SCRAM-SHA-256's first, at most one more of SCRAM-SHA-512; key sizes,
        salt size, iteration count in Kafka's bounds."""
        if self.mechanism != MECHANISM:
            raise InvalidRequestError(f"mechanism must be {MECHANISM}, got {self.mechanism[:40]!r}")
        if len(self.more) > 1 or any(c.mechanism != SCRAM_SHA_512 or c.more for c in self.more):
            raise InvalidRequestError(f"further credentials: at most one, of {SCRAM_SHA_512}")
        for cred in (self, *self.more):
            cred._check_one()
        return self

    def _check_one(self) -> None:
        size = KEY_BYTES_OF[self.mechanism]
        if len(self.stored_key) != size or len(self.server_key) != size:
            raise InvalidRequestError(f"{self.mechanism}: stored_key and server_key must be "
                                      f"{size} bytes")
        if not MIN_SALT_BYTES <= len(self.salt) <= MAX_SALT_BYTES:
            raise InvalidRequestError(f"salt must be {MIN_SALT_BYTES}..{MAX_SALT_BYTES} bytes")
        if not MIN_ITERATIONS <= self.iterations <= MAX_ITERATIONS:
            raise InvalidRequestError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                                      f"got {self.iterations}")

    def of(self, mechanism: str) -> "Credentials | None":
        """The credentials for SCRAM ``mechanism``, None when the user has none."""
        return next((c for c in (self, *self.more) if c.mechanism == mechanism), None)

    def pack(self) -> bytes:
        d = {"mechanism": self.mechanism, "salt": self.salt, "stored_key": self.stored_key,
             "server_key": self.server_key, "iterations": self.iterations}
        if self.more:  # absent for SCRAM-SHA-256 only: the encoding of earlier versions
            d["more"] = [[c.mechanism, c.salt, c.stored_key, c.server_key, c.iterations]
                         for c in self.more]
        return msgpack.packb(d)

    @classmethod
    def unpack(cls, raw: bytes) -> "Credentials":
        """From ``pack()``'s bytes; ValueError, KeyError or TypeError if they are not that."""
        d = msgpack.unpackb(raw)
        more = tuple(cls(*row) for row in d.get("more", ()))
        return cls(d["mechanism"], d["salt"], d["stored_key"], d["server_key"], d["iterations"],
                   more)


class UserStore:
    """A single node's users in its LMDB (module docstring)."""

    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta
        self.db = meta.db("users")
        self.flags = meta.db("meta")

    def get(self, name: str) -> "Credentials | None":
        with self.meta.read() as txn:
            raw = txn.get(name.encode(), db=self.db)
        return None if raw is None else Credentials.unpack(raw)

    async def put(self, name: str, cred: Credentials, first: bool = False) -> bool:
        """Store ``name``'s credentials; True if the user is new."""
        check_user_name(name)
        value = cred.check().pack()
        with self.meta.write() as txn:
            if first and (txn.stat(self.db)["entries"] or txn.get(EXISTED, db=self.flags)):
                raise ClusterAuthorizationFailedError(FIRST_USER_TAKEN)
            new = txn.get(name.encode(), db=self.db) is None
            txn.put(name.encode(), value, db=self.db)
            txn.put(EXISTED, b"1", db=self.flags)
        return new

    async def delete(self, name: str, supers: frozenset = frozenset()) -> bool:
        """Forget ``name``; False if there was no such user; INVALID_REQUEST
        if it is the last user or the last super user (``keeper``)."""
        with self.meta.write() as txn:
            if txn.get(name.encode(), db=self.db) is None:
                return False

            def any_other():
                for key in txn.cursor(db=self.db).iternext(values=False):
                    if key != name.encode():
                        return key.decode()
                return None
            keeper(name, supers, lambda n: txn.get(n.encode(), db=self.db) is not None, any_other)
            txn.put(EXISTED, b"1", db=self.flags)
            return txn.delete(name.encode(), db=self.db)

    def list(self) -> list[tuple[str, str, int]]:
        """(name, mechanism, iterations) of every user, by name."""
        with self.meta.read() as txn:
            rows = [(k.decode(), msgpack.unpackb(v)) for k, v in txn.cursor(db=self.db)]
        return [(name, d["mechanism"], d["iterations"]) for name, d in rows]

    def empty(self) -> bool:
        with self.meta.read() as txn:
            return txn.stat(self.db)["entries"] == 0

    def bootstrap_open(self) -> bool:
        """No user exists and none ever did: the bootstrap rule applies."""
        with self.meta.read() as txn:
            return txn.stat(self.db)["entries"] == 0 and txn.get(EXISTED, db=self.flags) is None


def keeper(name: str, supers: frozenset, exists, any_other) -> str:
    """A user that remains once ``name`` (an existing user) is deleted and
    keeps users administrable: another existing super user when ``name``
    is one (``supers``: the super users' names; ``exists(n)``), else any
    other user (``any_other()``, None if there is none). INVALID_REQUEST,
    naming the rule, when there is none: the bootstrap rule never reopens,
    so nobody could administer users again."""
    if name in supers:
        for other in sorted(supers - {name}):
            if exists(other):
                return other
        raise InvalidRequestError(
            f"DeleteUser refused: {name!r} is the last super user (super_users); without one "
            "nobody could administer users and ACLs again (the bootstrap rule does not reopen): "
            "create another super user first")
    other = any_other()
    if other is None:
        raise InvalidRequestError(
            f"DeleteUser refused: {name!r} is the last user; without one nobody could "
            "authenticate again (the bootstrap rule does not reopen): create another user first")
    return other
