"""The PySpark Python data source ``logbroker`` (pyspark >= 4.0).

    spark.read.format("logbroker").option("path", DATA_DIR)
         .option("subscribe", "orders").load()

``spark.readStream`` with the same options streams (stream.py). The reader plans in ``partitions()`` (on the driver; LMDB opened read-only
and closed again) and returns picklable ``LogbrokerPartition``s; ``read()``
(on an executor) opens the segment files and yields Arrow record batches.
"""

from __future__ import annotations

from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import (ArrayType, BinaryType, IntegerType, LongType, StringType,
                               StructField, StructType, TimestampType)

from .partition import LogbrokerPartition
from .plan import SparkSourceError, parse_options
from .options import log
from .planners import make_planner
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


def pick_columns(schema: "StructType | None") -> tuple:
    """The column names of a schema given to the reader, checked against the
    source's own: a user may pass ``.schema("key binary, value binary")`` to read
    (and ship to the JVM) fewer columns -- Python data sources get no column
    pruning from Spark. Each field must be one of the source's with its type."""
    if schema is None:
        return ()
    full = {f.name: f.dataType for f in spark_schema(True).fields}
    allowed = ", ".join(f"{n} {t.simpleString()}" for n, t in full.items())
    if not schema.fields:
        raise SparkSourceError(f"a schema for the logbroker source needs at least one of: {allowed}")
    for f in schema.fields:
        if full.get(f.name) != f.dataType or not f.nullable:
            raise SparkSourceError(f"column {f.name} {f.dataType.simpleString()} is not one the "
                                   f"logbroker source has (same type, nullable, nested fields too); "
                                   f"pick from: {allowed}")
    return tuple(f.name for f in schema.fields)


class LogbrokerReader(DataSourceReader):
    def __init__(self, options: dict, schema: "StructType | None" = None) -> None:
        self.options = parse_options(options, columns=pick_columns(schema))
        _say_engine(options, self.options.bootstrap, bool(self.options.paths))

    def partitions(self) -> list[LogbrokerPartition]:
        planner = make_planner(self.options)
        try:
            splits = planner.plan()
        finally:
            planner.close()
        return [LogbrokerPartition(s) for s in splits]

    def read(self, partition: LogbrokerPartition) -> Iterator[pa.RecordBatch]:
        yield from read_split(partition.split)


_said = False


def _say_engine(options: dict, bootstrap: str, paths: bool = False) -> None:
    """Option ``engine``: the JVM connector (connector.py) serves a batch
    read of a data dir, or of running brokers with ``paths`` (their data
    dirs, read on the replicas' hosts), whenever it is on the session's
    classpath, so the Python source getting one means it is not:
    ``engine=jvm`` is an error, ``auto`` (the default) says why once per
    process. The Python engine reads a bootstrap read by Fetch and ignores
    ``paths``."""
    global _said
    engine = str({str(k).lower(): v for k, v in options.items()}.get("engine", "auto")).lower()
    if engine not in ("auto", "jvm", "python"):
        raise SparkSourceError(f"option engine must be jvm, python or auto, got {engine!r}")
    if engine == "jvm" and bootstrap and not paths:
        raise SparkSourceError("engine jvm reads files: a bootstrap read on it needs option "
                               "paths (each broker's data dir); without it use engine auto or "
                               "python (Fetch from the leaders)")
    if engine == "python" or (bootstrap and not paths):
        return
    from .connector import why_python

    if engine == "jvm":
        raise SparkSourceError(f"engine jvm: {why_python()}")
    if not _said:
        _said = True
        log.warning("logbroker: reading with the Python source: %s", why_python())


class LogbrokerDataSource(DataSource):
    """Format ``logbroker``: a broker data dir read as Spark's Kafka source reads a topic."""

    @classmethod
    def name(cls) -> str:
        return "logbroker"

    def schema(self) -> StructType:
        raw = {str(k).lower(): v for k, v in self.options.items()}
        return spark_schema(str(raw.get("includeheaders", "false")).lower() == "true")

    def reader(self, schema: StructType) -> LogbrokerReader:
        return LogbrokerReader(dict(self.options), schema)

    def writer(self, schema: StructType, overwrite: bool):
        """``df.write.format("logbroker")``: rows into topics through the
        Producer (sink.py). A topic is appended to: ``mode("overwrite")`` is
        refused, as by Spark's Kafka sink."""
        from .sink import LogbrokerWriter, SparkSinkError

        if overwrite:
            raise SparkSinkError('the logbroker sink only appends to topics: use mode("append"), '
                                 'not mode("overwrite")')
        return LogbrokerWriter(dict(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        """``df.writeStream.format("logbroker")`` (sink.py)."""
        from .sink import LogbrokerStreamWriter

        return LogbrokerStreamWriter(dict(self.options), schema)

    def streamReader(self, schema: StructType):
        """``spark.readStream.format("logbroker")``: stream.py."""
        from .stream import LogbrokerStreamReader

        return LogbrokerStreamReader(dict(self.options), pick_columns(schema))


class LogbrokerPythonSource(LogbrokerDataSource):
    """The same source as format ``logbroker_python``: where the JVM
    connector owns ``logbroker``, it writes through this one (Spark checks
    that a Python source's name is the one it was asked for)."""

    @classmethod
    def name(cls) -> str:
        return "logbroker_python"
