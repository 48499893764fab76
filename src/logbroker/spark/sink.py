"""The sink of format ``logbroker``: ``df.write`` and ``df.writeStream`` into
topics through ``logbroker.Producer`` (never into segment files).

    (df.selectExpr("CAST(id AS STRING) AS key", "payload AS value")
       .write.format("logbroker").option("bootstrap", "127.0.0.1:9555")
       .option("topic", "orders").mode("append").save())

Columns as Spark's Kafka sink: ``value`` (binary or string, required),
``key`` (binary or string), ``headers`` (array<struct<key: string, value:
binary>>), ``topic`` (string; the ``topic`` option overrides it) and
``partition`` (int; null or absent: the producer's partitioner). Other
columns are ignored. Options: ``bootstrap`` (required), ``topic``, and the
Producer's keyword arguments by name (``acks``, ``linger_ms``,
``batch_size``, ``delivery_timeout_ms``, ...; Spark lower-cases option
names, so they match in any case).

Options and column types are checked here, on the driver, when Spark asks
for the writer: before any task runs, a ``SparkSinkError`` names the
option or column. Each task (sink_rows.py) writes with one Producer,
idempotent by default (acks=all), flushes at its end and fails if any of
its records was not acknowledged, naming the topic and partition.
Guarantee: at least once, as Spark's Kafka sink (a retried task, or a
micro-batch run again after a failure, writes its rows again); order is kept
per partition within a task.

``transactional`` (true/false, default false) with ``transactional_id_prefix``
(required then) makes each task write its rows in one transaction of the
Producer whose transactional id is ``PREFIX-<Spark partition id>``: a
task attempt's rows appear to read_committed readers all together or not
at all, and a retried attempt of the same partition fences the attempt
before it (its open transaction is aborted by the retry's
``init_transactions``). A task that committed and runs again still writes
again: at least once across attempts (docs/spark.md, "Transactions").
``transaction_timeout_ms`` is the Producer's.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, fields
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import (DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)
from pyspark.sql.types import StructType

from ..client.net.link import parse_bootstrap
from ..client.settings import ProducerSettings, client_options
from ..errors import LogbrokerError
from ..limits import check_topic_name
from .sink_rows import COLUMNS, SHOWN, SinkConfig, SparkSinkError, TaskWriter, column_problem

__all__ = ["LogbrokerWriter", "LogbrokerStreamWriter", "SinkCommitMessage", "SparkSinkError",
           "parse_sink_options", "check_schema", "producer_options"]

log = logging.getLogger(__name__)

CONNECTION = {"request_timeout_ms": int, "connect_timeout_ms": int, "client_id": str}
TXN_OPTIONS = {"transactional": bool, "transactional_id_prefix": str,
               "transaction_timeout_ms": int}  # the sink's own: a transaction per task
MAX_TASK_SUFFIX = "-2147483647"  # "-" + the largest Spark partition id
CLIENT_ID = "logbroker-spark-sink"
SPARK_OPTIONS = frozenset({"checkpointlocation"})  # Spark's own, passed to a stream's sink too


def producer_options() -> dict[str, type]:
    """Option name -> value type of every ``Producer`` keyword argument the
    sink passes through (the settings' own fields, so new ones come along)."""
    out: dict[str, type] = {"acks": str}
    out.update((f.name, type(f.default)) for f in fields(ProducerSettings) if f.name != "acks")
    out.update(CONNECTION)
    return out


def _value(name: str, raw: object, kind: type):
    text = str(raw).strip()
    if kind is bool:
        if text.lower() not in ("true", "false"):
            raise SparkSinkError(f"option {name} must be true or false, got {raw!r}")
        return text.lower() == "true"
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise SparkSinkError(f"option {name} must be {what}, got {raw!r}") from None
    return text


def parse_sink_options(raw: dict) -> SinkConfig:
    """Spark's options (names in any case, string values) -> ``SinkConfig``.
    Raises ``SparkSinkError`` for an unknown option (listing the known ones),
    a missing ``bootstrap``, a bad topic name or a producer setting the
    ``Producer`` would refuse."""
    opts = {str(k).lower(): v for k, v in raw.items()}
    known = producer_options()
    unknown = sorted(set(opts) - set(known) - {"bootstrap", "topic"} - SPARK_OPTIONS
                     - set(TXN_OPTIONS))
    if unknown:
        raise SparkSinkError(f"unknown option(s) {', '.join(unknown)} for the logbroker sink; it "
                             f"takes bootstrap, topic, {', '.join(TXN_OPTIONS)} and the "
                             f"Producer's settings: {', '.join(sorted(known))}")
    bootstrap = str(opts.get("bootstrap") or "").strip()
    if not bootstrap:
        raise SparkSinkError('option bootstrap is required (the brokers, "host:port,...")')
    topic = opts.get("topic")
    if topic is not None:
        try:
            topic = check_topic_name(str(topic))
        except LogbrokerError as exc:
            raise SparkSinkError(f"option topic: {exc.message}") from None
    producer = {name: _value(name, opts[name], kind) for name, kind in known.items()
                if name in opts}
    producer.setdefault("client_id", CLIENT_ID)
    settings = {k: v for k, v in producer.items() if k not in CONNECTION}
    try:
        parse_bootstrap(bootstrap)
    except ValueError as exc:
        raise SparkSinkError(f"option bootstrap: {exc}") from None
    try:
        ProducerSettings.make(**settings)
        client_options(bootstrap, producer["client_id"], producer.get("request_timeout_ms", 30_000),
                       producer.get("connect_timeout_ms", 5_000))
    except (ValueError, TypeError) as exc:
        raise SparkSinkError(f"bad producer option: {exc}") from None
    prefix, timeout_ms = _transactions(opts, producer)
    return SinkConfig(bootstrap, topic, producer, prefix, timeout_ms)


def _transactions(opts: dict, producer: dict) -> "tuple[str | None, int | None]":
    """``(transactional id prefix, transaction timeout)`` of the options,
    (None, None) when not transactional; ``SparkSinkError`` for a prefix
    without ``transactional=true`` or the reverse, an id the Producer would
    refuse, or producer settings a transaction cannot have."""
    from ..client.producer.transactions import check_transactional

    given = {name: _value(name, opts[name], kind) for name, kind in TXN_OPTIONS.items()
             if name in opts}
    on = given.get("transactional", False)
    prefix, timeout_ms = given.get("transactional_id_prefix"), given.get("transaction_timeout_ms")
    if not on:
        extra = [name for name in ("transactional_id_prefix", "transaction_timeout_ms")
                 if name in given]
        if extra:
            raise SparkSinkError(f"option {extra[0]} needs option transactional=true")
        return None, None
    if not prefix:
        raise SparkSinkError("option transactional=true needs option transactional_id_prefix "
                             "(each task's transactional id is PREFIX-<partition id>; use one "
                             "prefix per query, the same when the query runs again)")
    try:
        check_transactional(prefix + MAX_TASK_SUFFIX, 60_000 if timeout_ms is None else timeout_ms,
                            producer.get("acks", "all"), producer.get("idempotent"))
    except (ValueError, TypeError) as exc:
        raise SparkSinkError(f"option transactional: {exc}") from None
    return prefix, timeout_ms


def check_schema(schema: StructType, config: SinkConfig) -> None:
    """The DataFrame's columns against the sink's (``SHOWN``): ``value``
    present, each known column of its type (as Arrow will carry it to the
    task), a topic from the option or a column. Raises ``SparkSinkError``
    naming the column."""
    from pyspark.sql.pandas.types import to_arrow_type

    have = {f.name: f.dataType for f in schema.fields}
    if "value" not in have:
        raise SparkSinkError(f"the sink needs a value column (binary or string); the DataFrame "
                             f"has: {', '.join(have) or 'no columns'}")
    for name in COLUMNS:
        if name in have:
            try:
                arrow = to_arrow_type(have[name])
            except (TypeError, ValueError, NotImplementedError):
                arrow = pa.null()
            if column_problem(name, arrow):
                raise SparkSinkError(f"column {name} must be {SHOWN[name]}, not "
                                     f"{have[name].simpleString()}")
    if config.topic is None and "topic" not in have:
        raise SparkSinkError("no topic: set option topic or give the DataFrame a topic column")


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote: rows, key + value bytes, producer batches
    acknowledged, rows per topic."""

    rows: int = 0
    bytes: int = 0
    batches: int = 0
    topics: dict = field(default_factory=dict)


def write_task(config: SinkConfig, batches: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
    """A task: every batch through one Producer, flushed and checked (with
    ``transactional``: in one transaction, its id from the task's partition id)."""
    task = TaskWriter(config, task_id=_partition_id() if config.transactional else None)
    ok = False
    try:
        for batch in batches:
            task.write(batch)
        counts = task.finish()
        ok = True
    finally:
        task.close(ok)
    return SinkCommitMessage(**counts)


def _partition_id() -> int:
    """The running Spark task's partition id (the same for every attempt)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise SparkSinkError("option transactional: no Spark task context (the transactional id "
                             "is made from the task's partition id)")
    return ctx.partitionId()


def summary(messages: list) -> str:
    """One line for the driver's log: rows, bytes and topics of the tasks
    that finished (a failed task's message is None)."""
    done = [m for m in messages if isinstance(m, SinkCommitMessage)]
    topics: dict[str, int] = {}
    for m in done:
        for topic, rows in m.topics.items():
            topics[topic] = topics.get(topic, 0) + rows
    per_topic = ", ".join(f"{t}: {n}" for t, n in sorted(topics.items())) or "no rows"
    return (f"{sum(m.rows for m in done)} rows, {sum(m.bytes for m in done)} bytes "
            f"({per_topic}) from {len(done)} of {len(messages)} tasks")


class LogbrokerWriter(DataSourceArrowWriter):
    """``df.write.format("logbroker")``: options and columns checked here (on
    the driver); ``write`` runs once per task on an executor."""

    def __init__(self, options: dict, schema: StructType) -> None:
        self.config = parse_sink_options(options)
        check_schema(schema, self.config)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.config, iterator)

    def commit(self, messages: list) -> None:
        log.info("logbroker sink: wrote %s", summary(messages))

    def abort(self, messages: list) -> None:
        log.warning("logbroker sink: write failed; the tasks that finished wrote %s "
                    "(at least once: those records stay in their topics%s)", summary(messages),
                    _aborted_note(self.config))


def _aborted_note(config: SinkConfig) -> str:
    return ("; with transactional, a failed task's records are aborted: read_committed readers "
            "never see them" if config.transactional else "")


class LogbrokerStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("logbroker")``: as ``LogbrokerWriter``, once
    per micro-batch; a batch run again after a failure writes again."""

    def __init__(self, options: dict, schema: StructType) -> None:
        self.config = parse_sink_options(options)
        check_schema(schema, self.config)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.config, iterator)

    def commit(self, messages: list, batchId: int) -> None:
        log.info("logbroker sink: micro-batch %d wrote %s", batchId, summary(messages))

    def abort(self, messages: list, batchId: int) -> None:
        log.warning("logbroker sink: micro-batch %d failed; the tasks that finished wrote %s "
                    "(at least once: those records stay in their topics%s)", batchId,
                    summary(messages), _aborted_note(self.config))
