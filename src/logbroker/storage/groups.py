"""Consumer group offsets (primary state in LMDB's ``groups`` table).

An offset means "the next offset to read", as in Kafka; any int64 is
stored as given (Kafka clients commit -1 / -2 to reset a group, and their
readers apply their reset policy to a negative one). Every commit is
durable when ``commit`` returns (the LMDB transaction is synced).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

import msgpack

from ..errors import InvalidRequestError
from .metastore import MetaStore, delete_prefix, iter_prefix

_PART = struct.Struct(">I")


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str = ""
    commit_ms: int = 0


def _key(group: str, topic: str, partition: int) -> bytes:
    return group.encode() + b"\0" + topic.encode() + b"\0" + _PART.pack(partition)


def _parse(key: bytes) -> tuple[str, str, int]:
    group, topic, part = key.split(b"\0", 2)
    return group.decode(), topic.decode(), _PART.unpack(part)[0]


class GroupStore:
    def __init__(self, meta: MetaStore) -> None:
        self.meta = meta

    def commit(self, group: str, offsets: dict[tuple[str, int], "int | CommittedOffset"]) -> None:
        """Store ``{(topic, partition): offset}`` for ``group`` atomically."""
        if not group or "\0" in group:
            raise InvalidRequestError(f"invalid group name {group!r}")
        now = int(time.time() * 1000)
        with self.meta.write() as txn:
            for (topic, partition), value in offsets.items():
                c = value if isinstance(value, CommittedOffset) else CommittedOffset(value)
                txn.put(_key(group, topic, partition),
                        msgpack.packb([c.offset, c.metadata, c.commit_ms or now]),
                        db=self.meta.db("groups"))

    def fetch(self, group: str, topic: "str | None" = None) -> dict[tuple[str, int], CommittedOffset]:
        """Committed offsets of ``group`` (optionally of one topic)."""
        prefix = group.encode() + b"\0" + (topic.encode() + b"\0" if topic else b"")
        with self.meta.read() as txn:
            return {_parse(key)[1:]: CommittedOffset(*msgpack.unpackb(value))
                    for key, value in iter_prefix(txn, self.meta.db("groups"), prefix)}

    def groups(self) -> list[str]:
        names: list[str] = []
        with self.meta.read() as txn:
            for key in txn.cursor(db=self.meta.db("groups")).iternext(values=False):
                name = _parse(key)[0]
                if not names or names[-1] != name:
                    names.append(name)
        return names

    def delete(self, group: str) -> int:
        with self.meta.write() as txn:
            return delete_prefix(txn, self.meta.db("groups"), group.encode() + b"\0")
