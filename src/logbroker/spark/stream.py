"""The streaming side of the ``logbroker`` data source (``spark.readStream``).

    spark.readStream.format("logbroker").option("path", DATA_DIR)
         .option("subscribe", "orders").load()

Spark calls, on the driver (one long-lived Python worker holds this object):
``initialOffset()`` once for a new query, then per trigger
``latestOffset(start, limit)`` (where the next micro-batch ends),
``partitions(start, end)`` (its splits) and ``commit(end)``; ``read()``
runs in the tasks, as for a batch query. Offsets are Kafka-shaped JSON
(offsets.py) journaled in Spark's checkpoint: a restarted query resumes at
the last committed end, so each record reaches the query once.

What a trigger sees, as Spark's Kafka source:

- the partitions the options select *now*: a topic created later that
  ``subscribePattern`` (or ``subscribe``) matches, or a partition added to
  a topic, is read from its earliest offset;
- records below the checkpointed high watermark (docs/spark.md: a broker
  checkpoints every ``checkpoint_interval_ms``);
- ``maxOffsetsPerTrigger`` caps a micro-batch (shared among partitions by
  their backlog); ``minOffsetsPerTrigger`` holds a trigger back until that
  many are waiting or ``maxTriggerDelay`` passed since the last batch;
- ``Trigger.AvailableNow`` reads up to the high watermarks at its start, in
  micro-batches of ``maxOffsetsPerTrigger``, then stops;
- a partition whose next offset retention deleted, or that vanished, is
  data loss: an error unless ``failOnDataLoss=false`` (then a warning and
  the records still there).
"""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                              ReadMinRows, SupportsTriggerAvailableNow)

from . import offsets as lo
from ..protocol.messages import EARLIEST
from .options import Options, SparkSourceError, data_loss, parse_options
from .partition import LogbrokerPartition
from .plan import PlannerBase
from .planners import make_planner
from .scan import read_split

log = logging.getLogger(__name__)
_UNITS_MS = {"us": 0.001, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000,
             "d": 86_400_000}
DEFAULT_MAX_TRIGGER_DELAY_MS = 15 * 60_000
BEHIND_GRACE_S = 30.0  # a high watermark below the stream's position is waited out this long


def duration_ms(raw: str, name: str) -> int:
    """Spark's duration strings (``"15m"``, ``"30s"``, ``"500ms"``; a bare
    number is ms) as ms."""
    text = str(raw).strip().lower()
    digits = text.rstrip("abcdefghijklmnopqrstuvwxyz")
    unit = text[len(digits):].strip() or "ms"
    try:
        value = float(digits)
    except ValueError:
        value = -1.0
    if unit not in _UNITS_MS or value < 0:
        raise SparkSourceError(f"option {name} must be a duration like 15m, 30s or 500ms, "
                               f"got {raw!r}")
    return int(value * _UNITS_MS[unit])


@dataclass(frozen=True)
class TriggerLimits:
    """``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``, ``maxTriggerDelay``."""

    max_offsets: "int | None" = None
    min_offsets: "int | None" = None
    max_delay_ms: int = DEFAULT_MAX_TRIGGER_DELAY_MS

    @classmethod
    def parse(cls, raw: dict) -> "TriggerLimits":
        opts = {str(k).lower(): v for k, v in raw.items()}
        values = {}
        for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger"):
            value = opts.get(name.lower())
            if value is not None:
                try:
                    values[name] = int(str(value).strip())
                except ValueError:
                    values[name] = 0
                if values[name] < 1:
                    raise SparkSourceError(f"option {name} must be an integer >= 1, got {value!r}")
        delay = opts.get("maxtriggerdelay")
        return cls(values.get("maxOffsetsPerTrigger"), values.get("minOffsetsPerTrigger"),
                   DEFAULT_MAX_TRIGGER_DELAY_MS if delay is None
                   else duration_ms(delay, "maxTriggerDelay"))


class LogbrokerStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A micro-batch stream over a data dir. Holds no open file or LMDB
    handle between calls (it is pickled into the tasks)."""

    def __init__(self, options: dict, columns: tuple = ()) -> None:
        self.options: Options = parse_options(options, streaming=True, columns=columns)
        self.limits = TriggerLimits.parse(options)
        self._target: "dict | None" = None  # Trigger.AvailableNow: read no further
        self._initial: "dict | None" = None
        self._behind: dict = {}  # (topic, p) -> since when its high watermark is below our position
        self._remote: "PlannerBase | None" = None  # bootstrap: kept open between triggers
        self._last_batch = time.monotonic()

    # -- offsets ------------------------------------------------------------------------------
    @contextmanager
    def _planning(self) -> Iterator[PlannerBase]:
        """A planner for one call: a data dir's is opened and closed again;
        the remote one (an ``Admin`` client) is kept for the query's life,
        its bounds forgotten each time (every trigger asks afresh)."""
        if not self.options.bootstrap:
            planner = make_planner(self.options)
            try:
                yield planner
            finally:
                planner.close()
            return
        if self._remote is None:
            self._remote = make_planner(self.options)
        self._remote.forget()
        yield self._remote

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_remote": None}  # tasks get no client

    def stop(self) -> None:
        if self._remote is not None:
            self._remote.close()
            self._remote = None

    def initialOffset(self) -> dict:
        """Where a new query starts: ``startingOffsets`` (default latest),
        ``startingTimestamp`` or ``startingOffsetsByTimestamp``; resolved at
        the first call and the same at every later one (Spark asks again
        when it plans the first micro-batch: "latest" must not move on)."""
        if self._initial is None:
            self._initial = self._resolve_initial()
        return self._initial

    def _resolve_initial(self) -> dict:
        o = self.options
        with self._planning() as planner:
            start = {tp: planner.resolve(*tp, o.starting, o.starting_ts, o.starting_by_ts,
                                         EARLIEST, b)
                     for tp, b in planner.selected().items()}
        return lo.to_json(start)

    def prepareForTriggerAvailableNow(self) -> None:
        with self._planning() as planner:
            self._target = {tp: b[2] for tp, b in planner.selected().items()}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.limits.max_offsets is not None:
            return ReadMaxRows(self.limits.max_offsets)
        if self.limits.min_offsets is not None and self._target is None:
            return ReadMinRows(self.limits.min_offsets)
        return ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: the high watermarks (capped by
        AvailableNow's target and ``limit``); ``start`` itself when
        ``minOffsetsPerTrigger`` holds the batch back."""
        begin = lo.from_json(start, "the stream's start offsets")
        with self._planning() as planner:
            bounds = planner.selected()
        latest = self._not_behind(begin, {tp: b[2] for tp, b in bounds.items()})
        if self._target is not None:
            latest = {tp: min(end, self._target[tp]) for tp, end in latest.items()
                      if tp in self._target}
        # a partition new since the last batch starts at its log start (as Kafka's)
        first = {**{tp: bounds[tp][1] for tp in latest if tp not in begin}, **begin}
        waiting = lo.pending(first, latest)
        minimum = self.limits.min_offsets
        if isinstance(limit, ReadMinRows):
            minimum = limit.min_rows
        if (minimum is not None and self._target is None and not isinstance(limit, ReadAllAvailable)
                and waiting < minimum
                and (time.monotonic() - self._last_batch) * 1000 < self.limits.max_delay_ms):
            return start
        maximum = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        if maximum is not None:
            latest = lo.rate_limit(first, latest, maximum)
        end = {**{tp: off for tp, off in begin.items() if tp not in latest}, **latest}
        if waiting:
            self._last_batch = time.monotonic()
        return lo.to_json(end)

    def _not_behind(self, begin: dict, latest: dict) -> dict:
        """``latest`` with a high watermark below where the stream already is
        held at that point for up to ``BEHIND_GRACE_S`` (a new leader's lags
        for a moment after a failover); still behind after that, it is let
        through and ``partitions`` reports the offsets as gone backwards."""
        now, out = time.monotonic(), dict(latest)
        for tp, hw in latest.items():
            at = begin.get(tp)
            if at is None or hw >= at:
                self._behind.pop(tp, None)
                continue
            since = self._behind.setdefault(tp, now)
            if now - since < BEHIND_GRACE_S:
                log.warning("%s-%d: high watermark %d is below the stream's position %d; "
                            "waiting (a leader change?)", tp[0], tp[1], hw, at)
                out[tp] = at
        return out

    # -- micro-batches --------------------------------------------------------------------------
    def partitions(self, start: dict, end: dict) -> list:
        """The splits of records [start, end) of every partition in ``end``."""
        begin = lo.from_json(start, "the micro-batch's start offsets")
        stop = lo.from_json(end, "the micro-batch's end offsets")
        with self._planning() as planner:
            splits = []
            planner.prefetch(sorted(stop))
            for tp, last in sorted(stop.items()):
                pid, lso, hw = planner.bounds(*tp)
                # the whole journaled range, even above a high watermark seen now (a new
                # leader's may lag for a moment): capped, the next batch would skip the rest
                bounds = (pid, lso, max(hw, last))
                first = begin.get(tp, lso)
                if last < first:
                    data_loss(self.options.fail_on_data_loss,
                              f"{tp[0]}-{tp[1]}: offsets went back from {first} to {last} "
                              "(was the topic deleted and created again?)")
                    continue
                if first < last:
                    splits.extend(planner.plan_range(*tp, first, last, bounds))
        return [LogbrokerPartition(s) for s in splits]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        yield from read_split(partition.split)

    def commit(self, end: dict) -> None:
        """Nothing to do: the offsets live in Spark's checkpoint."""
