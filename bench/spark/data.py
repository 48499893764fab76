"""Test data of the Spark benchmark (``python -m bench.spark``): a data dir
written with ``Store`` directly, and the same records as Parquet (pyarrow)
and as JSON lines (Spark, from the Parquet copy)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.common.stats import MiB
from logbroker.records.encoder import encode_batch
from logbroker.storage.config import LogConfig, StorageConfig
from logbroker.storage.store import Store

TOPIC = "bench"
KEY_BYTES = 16
VALUE_BYTES = 200
DISTINCT_KEYS = 1024
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, ms


def key_of(i: int) -> bytes:
    return b"key-%012d" % (i % DISTINCT_KEYS)


KEYS = [key_of(i) for i in range(DISTINCT_KEYS)]
assert all(len(k) == KEY_BYTES for k in KEYS)


def write_store(path: str, records: int, partitions: int, batch_records: int, segment_bytes: int,
                progress=None) -> dict:
    """Write ``records`` records (16-byte keys among 1024, 200-byte random values)
    round-robin by batch over ``partitions`` partitions of topic ``bench``; then
    close the store so the checkpointed high watermark covers everything.

    Returns the layout and, per partition, the Arrow columns of what was written
    (for the Parquet copy; exactly the records the data source will return)."""
    store = Store.open(path, StorageConfig(log=LogConfig(flush="lazy", segment_bytes=segment_bytes)))
    cols = {p: {"key": [], "value": [], "offset": [], "timestamp": []} for p in range(partitions)}
    next_offset = [0] * partitions
    start = time.perf_counter()
    try:
        store.create_topic(TOPIC, partitions=partitions)
        logs = [store.get_log(TOPIC, p) for p in range(partitions)]
        done, b = 0, 0
        while done < records:
            n = min(batch_records, records - done)
            p = b % partitions
            blob = os.urandom(n * VALUE_BYTES)
            values = [blob[j * VALUE_BYTES:(j + 1) * VALUE_BYTES] for j in range(n)]
            keys = [KEYS[(done + j) % DISTINCT_KEYS] for j in range(n)]
            ts = T0 + b
            logs[p].append([encode_batch([ts] * n, keys, values, {})])
            c = cols[p]
            c["key"] += keys
            c["value"] += values
            c["offset"].extend(range(next_offset[p], next_offset[p] + n))
            c["timestamp"].extend([ts] * n)
            next_offset[p] += n
            done += n
            b += 1
            if progress and b % 200 == 0:
                progress(f"wrote {done:,}/{records:,} records")
        segment_files = sum(1 for f in Path(path).rglob("*.log"))
        seg_bytes = sum(f.stat().st_size for f in Path(path).rglob("*.log"))
    finally:
        store.close()
    return {"records": records, "partitions": partitions, "batches": b, "end_offsets": next_offset,
            "segment_files": segment_files, "segment_bytes_on_disk": seg_bytes,
            "payload_bytes": records * (KEY_BYTES + VALUE_BYTES),
            "write_s": time.perf_counter() - start, "_cols": cols}


def write_parquet(out_dir: str, cols: dict, row_group_rows: int = 131_072) -> int:
    """One Parquet file per partition (Kafka-source columns, snappy, pyarrow
    defaults otherwise); returns bytes on disk."""
    os.makedirs(out_dir, exist_ok=True)
    total = 0
    for p, c in cols.items():
        n = len(c["offset"])
        table = pa.table({
            "key": pa.array(c["key"], pa.binary()),
            "value": pa.array(c["value"], pa.binary()),
            "topic": pa.array([TOPIC] * n, pa.string()),
            "partition": pa.array([p] * n, pa.int32()),
            "offset": pa.array(c["offset"], pa.int64()),
            "timestamp": pa.array(c["timestamp"], pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * n, pa.int32()),
        })
        f = os.path.join(out_dir, f"part-{p:05d}.parquet")
        pq.write_table(table, f, row_group_size=row_group_rows, compression="snappy")
        total += os.path.getsize(f)
    return total


def dir_bytes(path: str) -> int:
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file() and not f.name.startswith(("_", ".")))


def write_json(spark, parquet_dir: str, out_dir: str) -> int:
    """The Parquet copy rewritten by Spark as JSON lines (binary as base64 strings)."""
    spark.read.parquet(parquet_dir).write.mode("overwrite").json(out_dir)
    return dir_bytes(out_dir)


def fmt_mib(n: int) -> str:
    return f"{n / MiB:,.1f} MiB"
