"""Log compaction helpers (tests/storage/test_compaction*.py, tests/kafka/):
a store whose topics compact at once (``COMPACT``, ``open_compacted``), the
records of a log read through its gaps, a batch of keyed records, and ticks
until a pass compacts nothing more."""

from __future__ import annotations

from logbroker.records import build_batch, decode_batch, scan_batches
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

COMPACT = dict(cleanup_policy="compact", min_cleanable_dirty_percent=0, segment_bytes=700,
               delete_retention_ms=1000, file_delete_delay_ms=0)


def open_compacted(path, map_bytes: int = 1 << 20, **settings) -> Store:
    cfg = LogConfig(**{**COMPACT, **settings})
    return Store.open(str(path), StorageConfig(log=cfg, map_size=64 << 20,
                                               compaction_map_bytes=map_bytes))


def records_of(lg) -> list:
    """(offset, key, value) of every record, read batch by batch from the log
    start (a read in a gap that lasts to the log end returns nothing)."""
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20)
        if not data:
            break
        for pos, header in scan_batches(data):
            out += [(r.offset, r.key, r.value) for r in
                    decode_batch(data[pos:pos + header.size]).records() if r.offset >= offset]
            offset = header.next_offset
    return out


def keyed(pairs, **kw) -> bytes:
    return build_batch([(value, key, (), 1_000) for key, value in pairs], **kw)


def compact_all(store, now: int = 10_000, ticks: int = 20) -> None:
    for _ in range(ticks):
        if not store.tick(now)["compacted_bytes"]:
            return
