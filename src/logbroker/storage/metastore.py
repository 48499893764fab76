"""The LMDB environment of a data dir (``<data>/meta.lmdb``) and its tables.

One environment per data dir, opened with explicit ``map_size`` and
``max_dbs``, every write transaction committed durably (LMDB's default
sync). Tables (named databases):

    derived, rebuildable from segments       primary, never rebuilt
    oidx   (pid, offset) -> (segment, pos)   topics   topic configs
    tidx   (pid, max ts) -> offset           groups   committed group offsets
    segs   (pid, segment base) -> summary    ckpt     per-partition checkpoints
    aidx   (pid, marker offset) -> aborted   epochs   leader-epoch history
           transaction (aborted_index.py)    txns     transaction state snapshots (txn_store.py)
                                             parts    partition name -> pid
                                             meta     counters
                                             users    SCRAM credentials (broker/auth_store.py)
                                             acls     ACL bindings (broker/acl_store.py)

Keys are fixed-width big-endian so they sort by (pid, offset). The hot
append path never writes here: a Log buffers its index entries and writes
them with its checkpoint in one transaction.
"""

from __future__ import annotations

import struct
from contextlib import contextmanager
from typing import Iterator

import lmdb

from ..errors import StorageError

TABLES = ("oidx", "tidx", "segs", "topics", "groups", "ckpt", "epochs", "parts", "meta", "users",
          "acls", "aidx", "txns")
DERIVED = ("oidx", "tidx", "segs", "aidx")
PID = struct.Struct(">I")
PID_U64 = struct.Struct(">IQ")
FILENAME = "meta.lmdb"


class MetaStore:
    """Thin owner of the LMDB environment; tables by name, txns as contexts."""

    def __init__(self, path: str, *, map_size: int = 1 << 30, max_dbs: int = 16,
                 readonly: bool = False) -> None:
        self.path = path
        try:
            self.env = lmdb.open(path, subdir=False, map_size=map_size, max_dbs=max_dbs,
                                 readonly=readonly, create=not readonly, lock=True, sync=True,
                                 metasync=True, max_readers=256)
            self.dbs = {name: self.env.open_db(name.encode(), create=not readonly)
                        for name in TABLES if not readonly or self._has_table(name)}
        except lmdb.Error as exc:
            raise StorageError(f"cannot open {path}: {exc}. If the file is damaged, move it "
                               "aside: the index is rebuilt from segments, but topic configs "
                               "and group offsets kept in it are lost") from None

    def _has_table(self, name: str) -> bool:
        with self.env.begin() as txn:
            return txn.get(name.encode()) is not None

    @contextmanager
    def write(self) -> Iterator[lmdb.Transaction]:
        """A write transaction, committed (durably) when the block ends."""
        try:
            with self.env.begin(write=True) as txn:
                yield txn
        except lmdb.MapFullError:
            raise StorageError(f"{self.path} is full: raise map_size") from None
        except lmdb.Error as exc:
            raise StorageError(f"{self.path}: {exc}") from None

    def read(self) -> lmdb.Transaction:
        """A read transaction, for ``with``: the environment's own (no
        generator around it: a start-up at 50,000 partitions opens ~10 each)."""
        return self.env.begin()

    def db(self, name: str):
        return self.dbs[name]

    def has(self, name: str) -> bool:
        return name in self.dbs

    def partition_id(self, name: str, *, create: bool = True) -> "int | None":
        """The stable small integer naming partition ``name`` in index keys."""
        key = name.encode()
        with self.read() as txn:
            raw = txn.get(key, db=self.dbs.get("parts")) if "parts" in self.dbs else None
        if raw is not None or not create:
            return None if raw is None else PID.unpack(raw)[0]
        with self.write() as txn:
            raw = txn.get(key, db=self.dbs["parts"])
            if raw is not None:
                return PID.unpack(raw)[0]
            counter = txn.get(b"next_pid", db=self.dbs["meta"])
            pid = PID.unpack(counter)[0] if counter else 1
            txn.put(key, PID.pack(pid), db=self.dbs["parts"])
            txn.put(b"next_pid", PID.pack(pid + 1), db=self.dbs["meta"])
            return pid

    def partition_ids(self, names: list) -> dict:
        """``partition_id`` of many partitions in one transaction: name ->
        (pid, True if allocated now)."""
        out = {}
        with self.write() as txn:
            counter = txn.get(b"next_pid", db=self.dbs["meta"])
            pid = PID.unpack(counter)[0] if counter else 1
            for name in names:
                raw = txn.get(name.encode(), db=self.dbs["parts"])
                if raw is not None:
                    out[name] = (PID.unpack(raw)[0], False)
                    continue
                txn.put(name.encode(), PID.pack(pid), db=self.dbs["parts"])
                out[name] = (pid, True)
                pid += 1
            txn.put(b"next_pid", PID.pack(pid), db=self.dbs["meta"])
        return out

    def forget_partition(self, txn, name: str, pid: int) -> None:
        """Drop every row keyed by ``pid`` (a deleted partition)."""
        prefix = PID.pack(pid)
        for table in ("oidx", "tidx", "segs", "ckpt", "epochs", "aidx", "txns"):
            delete_prefix(txn, self.dbs[table], prefix)
        txn.delete(name.encode(), db=self.dbs["parts"])

    def drop_derived(self) -> None:
        """Empty the rebuildable tables (tests, and a forced rebuild)."""
        with self.write() as txn:
            for table in DERIVED:
                txn.drop(self.dbs[table], delete=False)

    def close(self) -> None:
        self.env.close()


def iter_prefix(txn, db, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` rows whose key begins with ``prefix``, in key order."""
    cur = txn.cursor(db=db)
    if not cur.set_range(prefix):
        return
    for key, value in cur:
        if not key.startswith(prefix):
            return
        yield key, value


def delete_prefix(txn, db, prefix: bytes, start: "bytes | None" = None,
                  stop: "bytes | None" = None) -> int:
    """Delete keys beginning with ``prefix`` in [start, stop); returns the count."""
    cur = txn.cursor(db=db)
    n = 0
    if not cur.set_range(start or prefix):
        return 0
    while cur.key().startswith(prefix) and (stop is None or cur.key() < stop):
        n += 1
        if not cur.delete():
            break
    return n
