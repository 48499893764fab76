"""One Spark task of the ``logbroker`` sink: Arrow record batches into topics
through one ``logbroker.Producer`` (never into segment files).

``TaskWriter(config)``: ``write(batch)`` checks a batch's columns (Arrow
types, no null ``value``, no null ``topic``, no null header key) before it
sends any of its rows, then hands every row to ``Producer.send`` -- whole
columns are turned into Python lists once (``to_pylist``), so a row costs
its bytes objects, the ``send`` call and its handle, nothing more.
``finish()`` flushes the producer and checks every record's delivery; a
``RecordHandle`` is ``(producer batch, index)`` and a batch's records share
one outcome (client/handles.py), so one handle per producer batch is kept
and checked, and acknowledged batches are dropped as the task goes.

With a ``transactional_id_prefix`` (sink.py's ``transactional`` option) the
task's producer is transactional, id ``PREFIX-<task id>`` (the Spark
partition id, the same for every attempt of the task): it takes the id
(``init_transactions``, which fences an earlier attempt and aborts its open
transaction) and begins a transaction on its first row, commits in
``finish`` once every record is acknowledged, and aborts in ``close`` after
a failure (bounded by ``request_timeout_ms``; a task that dies without it
leaves its transaction to the next attempt's fence or to
``transaction_timeout_ms``).

Every failure is a ``SparkSinkError`` naming the topic and partition (and,
for a row refused by ``send``, the row): ``orders[3]: ...``. A partition
not chosen yet is shown as the partitioner would choose it (keyed: the key's
hash) or ``orders[round-robin]``. No pyspark here.
"""

from __future__ import annotations

import bisect
import itertools
import logging
from collections import Counter
from dataclasses import dataclass, field
from operator import itemgetter

import pyarrow as pa
import pyarrow.compute as pc

from ..errors import LogbrokerError
from ..client.producer.partitioner import partition_for_key
from .options import SparkSourceError

log = logging.getLogger("logbroker.spark.sink")
_BATCH = itemgetter(0)  # a RecordHandle's producer batch (handles.py: a (batch, index) tuple)
BYTES = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())
STRINGS = (pa.string(), pa.large_string())
SHOWN = {"value": "binary or string", "key": "binary or string", "topic": "string",
         "partition": "int", "headers": "array<struct<key: string, value: binary>>"}
COLUMNS = tuple(SHOWN)  # the sink's columns; any other column is ignored (as Spark's Kafka sink)


class SparkSinkError(SparkSourceError):
    """A wrong option or column of the sink, or a row a task could not deliver."""

    def __str__(self) -> str:
        return self.message  # no registry name: this error never goes over the wire


@dataclass(frozen=True)
class SinkConfig:
    """What a task needs, checked on the driver (sink.py): plain data, pickled
    to the executors. ``topic`` is the ``topic`` option (overrides the column)
    or None; ``producer`` the ``Producer`` keyword arguments;
    ``transactional_id_prefix`` (None: no transactions) and
    ``transaction_timeout_ms`` (None: the Producer's default)."""

    bootstrap: str
    topic: "str | None" = None
    producer: dict = field(default_factory=dict)
    transactional_id_prefix: "str | None" = None
    transaction_timeout_ms: "int | None" = None

    @property
    def transactional(self) -> bool:
        return self.transactional_id_prefix is not None

    def producer_kwargs(self, task_id: "int | None") -> dict:
        """The Producer's keyword arguments for task ``task_id``."""
        if not self.transactional:
            return dict(self.producer)
        out = {**self.producer, "transactional_id": f"{self.transactional_id_prefix}-{task_id}"}
        if self.transaction_timeout_ms is not None:
            out["transaction_timeout_ms"] = self.transaction_timeout_ms
        return out

    def flush_timeout(self) -> float:
        """Seconds a task's final flush may take: every batch is acknowledged
        or failed within ``delivery_timeout_ms``; a request's timeout on top."""
        p = self.producer
        return (p.get("delivery_timeout_ms", 120_000) + p.get("request_timeout_ms", 30_000)) / 1000


def column_problem(name: str, arrow_type: pa.DataType) -> "str | None":
    """Why column ``name`` of this Arrow type cannot go to the sink, or None."""
    if name in ("value", "key"):
        ok = arrow_type in BYTES
    elif name == "topic":
        ok = arrow_type in STRINGS
    elif name == "partition":
        ok = arrow_type == pa.int32()
    elif name == "headers":
        ok = _headers_type(arrow_type)
    else:
        return None
    return None if ok else f"column {name} must be {SHOWN[name]}"


def _headers_type(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    s = t.value_type
    return (pa.types.is_struct(s) and s.num_fields == 2
            and s.field(0).name == "key" and s.field(0).type in STRINGS
            and s.field(1).name == "value" and s.field(1).type in (pa.binary(), pa.large_binary()))


@dataclass
class Rows:
    """One Arrow batch as the arguments of ``Producer.send``: a constant
    ``topic`` or a list ``topics``, and lists (or None: absent) per column."""

    n: int
    topic: "str | None"
    topics: "list | None"
    values: list
    keys: "list | None"
    headers: "list | None"
    partitions: "list | None"

    def args(self) -> list:
        """``[topics, values, keys, headers, partitions]``: one iterable each."""
        n, repeat = self.n, itertools.repeat
        return [repeat(self.topic, n) if self.topics is None else self.topics, self.values,
                repeat(None, n) if self.keys is None else self.keys,
                repeat(None, n) if self.headers is None else self.headers,
                repeat(None, n) if self.partitions is None else self.partitions]

    def topic_of(self, row: int) -> str:
        return self.topic if self.topics is None else self.topics[row]


def to_rows(batch: pa.RecordBatch, topic_option: "str | None", producer=None) -> Rows:
    """Check and convert one batch. Raises ``SparkSinkError`` naming the
    column (a wrong type, no ``value``, no topic) or the row (a null value,
    topic or header key; the row's topic and partition as far as known:
    ``producer`` tells a keyed row's partition)."""
    names = batch.schema.names
    cols = {}
    for name in COLUMNS:
        if name in names:
            col = batch.column(name)
            problem = column_problem(name, col.type)
            if problem:
                raise SparkSinkError(f"{problem}, not {col.type}")
            cols[name] = col
    if "value" not in cols:
        raise SparkSinkError(f"the sink needs a value column (binary or string); the batch has "
                             f"{', '.join(names) or 'no columns'}")
    if topic_option is None and "topic" not in cols:
        raise SparkSinkError("no topic: set option topic or give the DataFrame a topic column")
    n = batch.num_rows
    rows = Rows(n, topic_option, None, [], None, None, None)
    if topic_option is None:
        _take_topics(rows, cols["topic"])
    if "partition" in cols:
        rows.partitions = cols["partition"].to_pylist()
    if "key" in cols:
        rows.keys = _binary(cols["key"]).to_pylist()
    values = _binary(cols["value"])
    rows.values = values.to_pylist()
    if values.null_count:
        row = _first_null(values)
        raise SparkSinkError(f"{where(rows, row, producer)}: row {row} of an Arrow batch of {n}: "
                             "value is null; the sink writes no record without a value")
    if "headers" in cols:
        rows.headers = _headers(cols["headers"], rows, producer)
    return rows


def _take_topics(rows: Rows, col: pa.Array) -> None:
    if col.null_count:
        row = _first_null(col)
        raise SparkSinkError(f"row {row} of an Arrow batch of {rows.n}: topic is null "
                             "(set option topic, or give every row a topic)")
    if rows.n and pc.count_distinct(col).as_py() == 1:
        rows.topic = col[0].as_py()
    else:
        rows.topics = col.to_pylist()


def _binary(col: pa.Array) -> pa.Array:
    """A string column as binary (the same buffers: UTF-8 bytes)."""
    if col.type == pa.string():
        return col.view(pa.binary())
    if col.type == pa.large_string():
        return col.view(pa.large_binary())
    return col


def _first_null(col: pa.Array) -> int:
    return pc.index(col.is_null(), True).as_py()


def _headers(col: pa.Array, rows: Rows, producer) -> list:
    """Each row's headers as a list of ``(key, value)`` pairs (one slice of
    one list of pairs per row; a null array of headers is no headers)."""
    offsets = col.offsets
    start = offsets[0].as_py()
    bounds = pc.subtract(offsets, start).to_pylist()  # into the entries of this (sliced) column
    entries = col.values.slice(start, bounds[-1])
    keys, values = entries.field(0), entries.field(1)
    if entries.null_count or keys.null_count:
        at = _first_null(entries if entries.null_count else keys)
        row = bisect.bisect_right(bounds, at) - 1
        raise SparkSinkError(f"{where(rows, row, producer)}: row {row} of an Arrow batch of "
                             f"{rows.n}: a header (or its key) is null; a header needs a string key")
    pairs = list(zip(keys.to_pylist(), values.to_pylist()))
    out = list(map(pairs.__getitem__, map(slice, bounds[:-1], bounds[1:])))
    if col.null_count:
        out = [h if ok else None for h, ok in zip(out, col.is_valid().to_pylist())]
    return out


def where(rows: Rows, row: int, producer=None) -> str:
    """``topic[partition]`` of ``row``: the partition column's value, else
    the key's hash partition (when the partition count is known), else
    ``round-robin`` for a record without a key."""
    topic = rows.topic_of(row)
    if rows.partitions is not None and rows.partitions[row] is not None:
        return f"{topic}[{rows.partitions[row]}]"
    key = rows.keys[row] if rows.keys is not None else None
    if key is None:
        return f"{topic}[round-robin]"
    count = None
    if producer is not None:
        try:
            count = producer.partitions_for(topic)
        except (LogbrokerError, TypeError):
            pass
    return f"{topic}[{partition_for_key(key, count)}]" if count else f"{topic}[by key]"


class TaskWriter:
    """One task's writes: one Producer, made on the first row (a task with
    no rows connects to nothing). ``write`` per Arrow batch, then ``finish``
    (flush, check every delivery) and ``close`` -- also after a failure.
    ``rows``, ``bytes`` (keys + values) and ``topics`` (rows per topic)
    count what was handed to the producer. ``task_id``: the Spark partition
    id (transactional: the id's suffix, module docstring)."""

    def __init__(self, config: SinkConfig, make_producer=None,
                 task_id: "int | None" = None) -> None:
        self.config, self.task_id = config, task_id
        self._make_producer = make_producer
        self.producer = None
        self.rows = self.bytes = self.batches = 0
        self.topics: dict[str, int] = {}
        self._pending: dict = {}  # producer batch -> one handle of its records
        self._handles: list = []

    def _open(self):
        if self.producer is None:
            if self._make_producer is None:
                from ..client.producer.sync import Producer

                self.producer = Producer(self.config.bootstrap,
                                         **self.config.producer_kwargs(self.task_id))
            else:
                self.producer = self._make_producer(self.config)
            if self.config.transactional:
                self._begin()
        return self.producer

    def _begin(self) -> None:
        tid = self.config.producer_kwargs(self.task_id)["transactional_id"]
        try:
            self.producer.init_transactions()  # bounded by max_block_ms (the Producer's)
            self.producer.begin_transaction()
        except (LogbrokerError, TimeoutError) as exc:
            raise SparkSinkError(f"transactional id {tid!r}: could not start the task's "
                                 f"transaction: {exc}") from exc

    def write(self, batch: pa.RecordBatch) -> None:
        """Send every row of ``batch`` (returns once each is queued; blocks
        only as ``Producer.send`` does). Raises ``SparkSinkError``; the rows
        of the batch before a refused row may have been sent."""
        if batch.num_rows == 0:
            return
        producer = self._open()
        rows = to_rows(batch, self.config.topic, producer)
        for topic in ((rows.topic,) if rows.topics is None else dict.fromkeys(rows.topics)):
            try:
                producer.partitions_for(topic)
            except (LogbrokerError, TypeError) as exc:
                raise SparkSinkError(f"topic {topic!r}: {exc}") from exc
        handles = self._handles
        try:
            handles.extend(map(producer.send, *rows.args()))
        except (LogbrokerError, TypeError, ValueError) as exc:
            row = len(handles)  # extend keeps the handles made before the refused row
            raise SparkSinkError(f"{where(rows, row, producer)}: row {row} of an Arrow batch of "
                                 f"{rows.n}: {exc}") from exc
        finally:
            self._pending.update(zip(map(_BATCH, handles), handles))
            handles.clear()
        self._count(batch, rows)
        self._settle(False)

    def _count(self, batch: pa.RecordBatch, rows: Rows) -> None:
        self.rows += rows.n
        for name in ("key", "value"):
            if name in batch.schema.names:
                self.bytes += pc.sum(pc.binary_length(_binary(batch.column(name)))).as_py() or 0
        if rows.topics is None:
            self.topics[rows.topic] = self.topics.get(rows.topic, 0) + rows.n
        else:
            for topic, count in Counter(rows.topics).items():
                self.topics[topic] = self.topics.get(topic, 0) + count

    def _settle(self, final: bool) -> None:
        """Check the producer batches whose outcome is known; with ``final``
        every one must be known (after the flush). A failed one raises."""
        for pbatch, handle in list(self._pending.items()):
            if not handle.done():
                if not final:
                    continue
                raise SparkSinkError(f"{handle.topic}[{handle.partition}]: records not "
                                     f"acknowledged within {self.config.flush_timeout():.0f} s")
            exc = handle.exception(0)
            if exc is not None:
                raise SparkSinkError(f"{handle.topic}[{handle.partition}]: delivery failed: "
                                     f"{exc}") from exc
            del self._pending[pbatch]
            self.batches += 1

    def finish(self) -> dict:
        """Flush and check every record: returns the counts, or raises
        ``SparkSinkError`` for the first producer batch that failed (or was
        not acknowledged within ``SinkConfig.flush_timeout``)."""
        if self.producer is not None:
            try:
                self.producer.flush(self.config.flush_timeout())
            except TimeoutError:
                pass  # the check below names a partition still waiting
            self._settle(True)
            if self.config.transactional:
                self._commit()
        return {"rows": self.rows, "bytes": self.bytes, "batches": self.batches,
                "topics": dict(self.topics)}

    def _commit(self) -> None:
        try:
            self.producer.commit_transaction(self.config.flush_timeout())
        except (LogbrokerError, TimeoutError) as exc:
            tid = self.config.producer_kwargs(self.task_id)["transactional_id"]
            fenced = " (fenced: a newer attempt of this task took the id)" \
                if getattr(exc, "name", "") in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH") else ""
            raise SparkSinkError(f"transactional id {tid!r}: commit failed{fenced}: "
                                 f"{exc}") from exc

    def close(self, ok: bool) -> None:
        """Close the producer: after ``finish`` (``ok``) nothing is left to
        send; after a failure records still queued fail, at once (and with
        transactions, the open one is aborted first, bounded)."""
        if self.producer is not None:
            try:
                if not ok and self.config.transactional:
                    self._abort()
            finally:
                self.producer.close(None if ok else 0)
                self.producer = None

    def _abort(self) -> None:
        """Abort the task's transaction after a failure; a failure to (the
        broker gone, the producer fenced) is logged, not raised: the task's
        own error is the one Spark shows, and the next attempt's fence or
        the transaction timeout aborts it."""
        try:
            self.producer.abort_transaction(self.config.producer.get("request_timeout_ms",
                                                                     30_000) / 1000)
        except Exception as exc:  # noqa: BLE001 - the task's own failure is what is raised
            log.warning("logbroker sink: aborting the task's transaction failed (the next "
                        "attempt or the transaction timeout aborts it): %s", exc)
