"""Shared pieces of the storage benchmark (``python -m bench.storage``):
parameters, test data and store helpers."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from contextlib import contextmanager
from dataclasses import dataclass

from bench.common.stats import GiB, MiB
from logbroker.records.encoder import encode_batch
from logbroker.storage import segment as segment_mod
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

SECTIONS = ("encode", "append", "read", "decode", "reopen")
SHAPES = [(1024, 1), (1024, 10), (1024, 100), (1024, 1000), (100, 1), (100, 10), (100, 100),
          (100, 1000)]  # (record bytes, records per batch); 1024 x 1000 is the ~1 MiB batch
TOPIC = "bench"


@dataclass(frozen=True)
class Params:
    repeats: int = 3
    append_repeats: int = 5
    append_seconds: float = 1.5  # per case, repeat and target (raw, fsync; lazy gets half)
    append_slices: int = 10  # raw and fsync alternate in this many slices per repeat
    append_max_calls: int = 20_000
    append_max_bytes: int = 768 * MiB
    encode_seconds: float = 0.4
    encode_max_records: int = 400_000
    read_log_bytes: int = 256 * MiB  # per read log
    read_segment_bytes: int = 64 * MiB
    read_seconds: float = 1.0
    read_max_passes: int = 100
    decode_seconds: float = 2.0
    records_seconds: float = 1.0
    records_max_batches: int = 200
    reopen_bytes: int = 2 * GiB
    reopen_segment_bytes: int = 256 * MiB
    crash_tails: tuple = (32 * MiB, 128 * MiB)


QUICK = Params(repeats=3, append_repeats=3, append_seconds=0.08, append_slices=4, append_max_calls=40, append_max_bytes=2 * MiB,
               encode_seconds=0.02, encode_max_records=5_000, read_log_bytes=4 * MiB,
               read_segment_bytes=1 * MiB, read_seconds=0.05, read_max_passes=5, decode_seconds=0.1,
               records_seconds=0.05, records_max_batches=2, reopen_bytes=8 * MiB,
               reopen_segment_bytes=2 * MiB, crash_tails=(1 * MiB, 2 * MiB))


# -- instrumentation -----------------------------------------------------------------------
@contextmanager
def count_segment_reads():
    """Count bytes read through ``Segment.read`` (instrumentation, this process only)."""
    counter = {"bytes": 0, "calls": 0}
    original = segment_mod.Segment.read

    def counting(self, position: int, size: int) -> bytes:
        out = original(self, position, size)
        counter["bytes"] += len(out)
        counter["calls"] += 1
        return out

    segment_mod.Segment.read = counting
    try:
        yield counter
    finally:
        segment_mod.Segment.read = original


# -- test data -----------------------------------------------------------------------------
def make_values(size: int, count: int, seed: int) -> list[bytes]:
    block = hashlib.sha256(str(seed).encode()).digest() * (size // 32 + 1)
    return [(i.to_bytes(4, "big") + block)[:size] for i in range(count)]


def make_batch(size: int, records: int, seed: int = 0) -> bytes:
    """One batch of ``records`` values of ``size`` bytes (no keys), by the producer's encoder."""
    now = time.time_ns() // 1_000_000
    return encode_batch([now] * records, [None] * records, make_values(size, records, seed), {})


def batch_pool(size: int, records: int) -> list[bytes]:
    """A few distinct prebuilt batches (built before any timing), cycled by the loops."""
    count = max(2, min(16, (16 * MiB) // max(1, size * records)))
    return [make_batch(size, records, seed) for seed in range(count)]


# -- stores --------------------------------------------------------------------------------
def remove(path: str) -> None:
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.unlink(path)


def open_store(path: str, flush: str = "fsync", segment_bytes: "int | None" = None) -> Store:
    store = Store.open(path, StorageConfig(log=LogConfig(flush=flush)))
    if store.topics.get(TOPIC) is None:
        store.create_topic(TOPIC, **({"segment_bytes": segment_bytes} if segment_bytes else {}))
    return store


def crash(store: Store) -> None:
    """Drop a store without closing it (as the tests simulate a crash): no flush,
    no checkpoint, no clean marker; descriptors released so the dir can reopen."""
    store.files.close_all()
    store.meta.close()
    os.close(store._lock_fd)


def fill(lg, pool: list[bytes], target_bytes: int) -> int:
    """Append batches from ``pool`` until the log holds ``target_bytes``; returns bytes added."""
    added, i = 0, 0
    while lg.size_in_bytes() < target_bytes:
        lg.append([pool[i % len(pool)]])
        added += len(pool[i % len(pool)])
        i += 1
    return added
