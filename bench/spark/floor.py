"""The no-work Python data source of the Spark benchmark (``python -m
bench.spark``), format ``logbroker_bench_floor``: what any Python data source
costs at least on this machine (Spark's Python worker, Arrow to the JVM, rows).

It yields the rows the benchmark's data dir holds, with nothing read or
decoded: ``records`` rows over ``parts`` tasks (as the data's partitions),
the logbroker schema's columns (or those of a given schema, in its order),
keys of ``KEY_BYTES`` among ``DISTINCT_KEYS`` and values of ``VALUE_BYTES``
(bench/spark/data.py), from one prebuilt Arrow batch of ``rows`` rows (the
reader's default ``maxRecordsPerBatch``) yielded over and over.

The Python workers import this module as ``bench.spark.floor``: the bench
puts the checkout on ``PYTHONPATH`` before Spark starts.
"""

from __future__ import annotations

import os

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from bench.spark.data import DISTINCT_KEYS, KEYS, T0, TOPIC, VALUE_BYTES

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, "
          "timestamp timestamp, timestampType int")


def prebuilt(n: int, partition: int, columns: list) -> pa.RecordBatch:
    """``n`` rows of the data's shape, only ``columns``, in that order."""
    ends = pa.array(range(0, n * VALUE_BYTES + 1, VALUE_BYTES), pa.int32()).buffers()[1]
    cols = {"key": pa.array([KEYS[i % DISTINCT_KEYS] for i in range(n)], pa.binary()),
            "value": pa.Array.from_buffers(pa.binary(), n, [None, ends, pa.py_buffer(os.urandom(n * VALUE_BYTES))]),
            "topic": pa.array([TOPIC] * n, pa.string()),
            "partition": pa.array([partition] * n, pa.int32()),
            "offset": pa.array(range(n), pa.int64()),
            "timestamp": pa.array([T0 * 1000] * n, pa.timestamp("us", tz="UTC")),
            "timestampType": pa.array([0] * n, pa.int32())}
    return pa.RecordBatch.from_arrays([cols[c] for c in columns], names=columns)


class FloorReader(DataSourceReader):
    def __init__(self, options: dict, columns: list) -> None:
        self.columns = columns
        self.records = int(options.get("records", 1_000_000))
        self.rows = int(options.get("rows", 10_000))
        self.parts = int(options.get("parts", 2))

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.parts)]

    def read(self, partition: InputPartition):
        per_task = self.records // self.parts + (partition.value < self.records % self.parts)
        batch = prebuilt(min(self.rows, max(1, per_task)), partition.value, self.columns)
        left = per_task
        while left > 0:
            yield batch if left >= batch.num_rows else batch.slice(0, left)
            left -= batch.num_rows


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "logbroker_bench_floor"

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema) -> FloorReader:
        return FloorReader(dict(self.options), [f.name for f in schema.fields])
