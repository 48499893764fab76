"""A do-nothing Python data source for the Spark benchmark (``python -m
bench.spark --profile``): each task yields one prebuilt Arrow batch of the logbroker schema
(16-byte keys, 200-byte values; only the columns of a given schema) over and over, so a query over it costs only
what Spark's Python data source path costs (Python worker, Arrow to the JVM,
rows). It is the ceiling any Python data source can reach on this machine.

The Python workers import this module as ``bench.spark.floor``: the bench
puts the checkout on ``PYTHONPATH`` before Spark starts.
"""

from __future__ import annotations

import os

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition


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
        n = min(self.rows, max(1, per_task))
        offsets = pa.array(range(0, n * 200 + 1, 200), pa.int32()).buffers()[1]
        value = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(os.urandom(n * 200))])
        key = pa.array([b"key-%012d" % (i % 1024) for i in range(n)], pa.binary())
        cols = {"key": key, "value": value, "topic": pa.array(["bench"] * n),
                "partition": pa.array([partition.value] * n, pa.int32()), "offset": pa.array(range(n), pa.int64()),
                "timestamp": pa.array([0] * n, pa.timestamp("us", tz="UTC")), "timestampType": pa.array([0] * n, pa.int32())}
        batch = pa.RecordBatch.from_arrays([cols[c] for c in self.columns], names=self.columns)
        left = per_task
        while left > 0:
            yield batch if left >= n else batch.slice(0, left)
            left -= n


class FloorSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "logbroker_bench_floor"

    def schema(self) -> str:
        return ("key binary, value binary, topic string, partition int, offset long, "
                "timestamp timestamp, timestampType int")

    def reader(self, schema) -> FloorReader:
        return FloorReader(dict(self.options), [f.name for f in schema.fields])
