"""The PySpark Python data source ``logbroker`` (pyspark >= 4.0).

    spark.read.format("logbroker").option("path", DATA_DIR)
         .option("subscribe", "orders").load()

The reader plans in ``partitions()`` (on the driver; LMDB opened read-only
and closed again) and returns picklable ``LogbrokerPartition``s; ``read()``
(on an executor) opens the segment files and yields Arrow record batches.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from .plan import Planner, Split, parse_options
from .scan import read_split

HEADERS = ArrayType(StructType([StructField("key", StringType()),
                                StructField("value", BinaryType())]))


def spark_schema(include_headers: bool) -> StructType:
    fields = [StructField("key", BinaryType()), StructField("value", BinaryType()),
              StructField("topic", StringType()), StructField("partition", IntegerType()),
              StructField("offset", LongType()), StructField("timestamp", TimestampType()),
              StructField("timestampType", IntegerType())]
    if include_headers:
        fields.append(StructField("headers", HEADERS))
    return StructType(fields)


class LogbrokerPartition(InputPartition):
    """One planned offset range (a ``Split``); plain data, so it pickles."""

    def __init__(self, split: Split) -> None:
        super().__init__(split)
        self.split = split

    def __repr__(self) -> str:
        s = self.split
        return f"LogbrokerPartition({s.topic}-{s.partition} [{s.start}, {s.end}))"


class LogbrokerReader(DataSourceReader):
    def __init__(self, options: dict) -> None:
        self.options = parse_options(options)

    def partitions(self) -> list[LogbrokerPartition]:
        planner = Planner(self.options)
        try:
            splits = planner.plan()
        finally:
            planner.close()
        return [LogbrokerPartition(s) for s in splits]

    def read(self, partition: LogbrokerPartition) -> Iterator[pa.RecordBatch]:
        yield from read_split(partition.split)


class LogbrokerDataSource(DataSource):
    """Format ``logbroker``: a broker data dir read as Spark's Kafka source reads a topic."""

    @classmethod
    def name(cls) -> str:
        return "logbroker"

    def schema(self) -> StructType:
        raw = {str(k).lower(): v for k, v in self.options.items()}
        return spark_schema(str(raw.get("includeheaders", "false")).lower() == "true")

    def reader(self, schema: StructType) -> LogbrokerReader:
        return LogbrokerReader(dict(self.options))
