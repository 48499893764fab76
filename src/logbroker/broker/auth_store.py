"""Users and their SCRAM-SHA-256 credentials, in the broker's LMDB
(``users`` table of metastore.py): name -> msgpack map of mechanism, salt,
stored key, server key and iteration count. Never a password: the client
derives the credentials (RFC 5802) and the broker keeps them as given, so
a copy of the data dir lets nobody log in without cracking the salted hash.

Reads and writes are short LMDB transactions on the broker's loop (each
write committed durably, like a topic's config). A single node only:
cluster mode does not support authentication yet (docs/security.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack

from ..errors import InvalidRequestError
from ..protocol.auth_messages import MAX_ITERATIONS, MECHANISM, MIN_ITERATIONS, check_user_name
from ..storage.metastore import MetaStore

KEY_BYTES = 32  # SHA-256
MIN_SALT_BYTES, MAX_SALT_BYTES = 8, 64


@dataclass(frozen=True)
class Credentials:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def check(self) -> "Credentials":
        """INVALID_REQUEST unless these are SCRAM-SHA-256 credentials the
        broker can use (key sizes, salt size, iteration count in Kafka's bounds)."""
        if self.mechanism != MECHANISM:
            raise InvalidRequestError(f"mechanism must be {MECHANISM}, got {self.mechanism[:40]!r}")
        if len(self.stored_key) != KEY_BYTES or len(self.server_key) != KEY_BYTES:
            raise InvalidRequestError(f"stored_key and server_key must be {KEY_BYTES} bytes")
        if not MIN_SALT_BYTES <= len(self.salt) <= MAX_SALT_BYTES:
            raise InvalidRequestError(f"salt must be {MIN_SALT_BYTES}..{MAX_SALT_BYTES} bytes")
        if not MIN_ITERATIONS <= self.iterations <= MAX_ITERATIONS:
            raise InvalidRequestError(f"iterations must be {MIN_ITERATIONS}..{MAX_ITERATIONS}, "
                                      f"got {self.iterations}")
        return self


class UserStore:
    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta
        self.db = meta.db("users")

    def get(self, name: str) -> "Credentials | None":
        with self.meta.read() as txn:
            raw = txn.get(name.encode(), db=self.db)
        if raw is None:
            return None
        d = msgpack.unpackb(raw)
        return Credentials(d["mechanism"], d["salt"], d["stored_key"], d["server_key"],
                           d["iterations"])

    def put(self, name: str, cred: Credentials) -> bool:
        """Store ``name``'s credentials; True if the user is new."""
        check_user_name(name)
        cred.check()
        value = msgpack.packb({"mechanism": cred.mechanism, "salt": cred.salt,
                               "stored_key": cred.stored_key, "server_key": cred.server_key,
                               "iterations": cred.iterations})
        with self.meta.write() as txn:
            new = txn.get(name.encode(), db=self.db) is None
            txn.put(name.encode(), value, db=self.db)
        return new

    def delete(self, name: str) -> bool:
        """Forget ``name``; False if there was no such user."""
        with self.meta.write() as txn:
            return txn.delete(name.encode(), db=self.db)

    def list(self) -> list[tuple[str, str, int]]:
        """(name, mechanism, iterations) of every user, by name."""
        with self.meta.read() as txn:
            rows = [(k.decode(), msgpack.unpackb(v)) for k, v in txn.cursor(db=self.db)]
        return [(name, d["mechanism"], d["iterations"]) for name, d in rows]

    def empty(self) -> bool:
        with self.meta.read() as txn:
            return txn.stat(self.db)["entries"] == 0
