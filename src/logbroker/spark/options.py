"""The options of the ``logbroker`` Spark source, checked, and what a task gets.

``parse_options(raw, streaming)`` turns Spark's options (case-insensitive
keys, string values) into ``Options`` with errors naming the option;
``Split`` is one Spark input partition: plain frozen data, pickled to the
task. No pyspark, no I/O beyond checking that a ``path`` is a data dir.
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass, field

from ..errors import LogbrokerError
from ..storage.metastore import FILENAME

log = logging.getLogger("logbroker.spark")
DEFAULT_SPLIT_BYTES = 128 << 20
DEFAULT_MAX_ROWS = 10_000
DEFAULT_MAX_BYTES = 16 << 20


class SparkSourceError(LogbrokerError, ValueError):
    """A wrong option, path or topic, or (failOnDataLoss) a lost range."""


def data_loss(fail: bool, what: str) -> None:
    """The one failOnDataLoss rule: ``what`` (offsets that cannot be read)
    raises ``SparkSourceError`` when ``fail``, else is logged as skipped."""
    if fail:
        raise SparkSourceError(f"{what}; set failOnDataLoss=false to skip them")
    log.warning("%s; skipping them (failOnDataLoss=false)", what)


@dataclass(frozen=True)
class Split:
    """One Spark input partition: records [start, end) of topic-partition,
    with a hint (segment base, byte position) of the batch holding ``start``."""

    data_dir: str
    topic: str
    partition: int
    start: int
    end: int
    hint_segment: int = -1
    hint_position: int = 0
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    columns: tuple = ()  # output columns in order; () = the whole schema
    compacted: bool = False  # cleanup_policy has compact: offsets without a batch are gaps
    bootstrap: str = ""  # read from the partition's leader over the protocol (not data_dir)
    client: tuple = ()  # (name, value) pairs of client keywords for bootstrap (tls_ca, ...)
    # bootstrap + paths (the JVM engine): ((host, data dir), ...) of the partition's in-sync
    # replicas that have a path, the leader first; a task reads the files of one on its host
    replicas: tuple = ()
    # read_committed: (producer id, first offset) of each aborted transaction with records in
    # [start, end) (records/txn_filter.py leaves its batches out); markers are left out always
    aborted: tuple = ()
    read_committed: bool = False  # a bootstrap read fetches with isolation 1 (its aborted list)


@dataclass
class Options:
    data_dir: str
    bootstrap: str = ""  # "host:port,...": plan and read over the protocol instead
    subscribe: "list[str] | None" = None
    pattern: "re.Pattern | None" = None
    assign: "dict[str, list[int]] | None" = None
    starting: "str | dict" = "earliest"
    ending: "str | dict" = "latest"
    starting_ts: "int | None" = None
    ending_ts: "int | None" = None
    starting_by_ts: "dict | None" = None  # {topic: {partition: timestamp ms}}
    ending_by_ts: "dict | None" = None
    streaming: bool = False
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int = 0
    split_bytes: int = DEFAULT_SPLIT_BYTES
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: int = DEFAULT_MAX_BYTES
    columns: tuple = ()
    client: tuple = ()  # bootstrap: (name, value) client keywords, checked (CLIENT_OPTIONS)
    paths: dict = field(default_factory=dict)  # bootstrap: {broker id: its data dir on its host}
    read_committed: bool = False  # kafka.isolation.level = read_committed (Spark's Kafka name)
    extra: dict = field(default_factory=dict)


def _bool(opts: dict, name: str, default: bool) -> bool:
    raw = str(opts.get(name.lower(), default)).strip().lower()
    if raw not in ("true", "false"):
        raise SparkSourceError(f"option {name} must be true or false, got {raw!r}")
    return raw == "true"


def _int(opts: dict, name: str, default: "int | None", minimum: int = 0) -> "int | None":
    raw = opts.get(name.lower())
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SparkSourceError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SparkSourceError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _offsets(opts: dict, name: str, default: str) -> "str | dict":
    raw = str(opts.get(name.lower(), default)).strip()
    if raw.lower() in ("earliest", "latest"):
        return raw.lower()
    try:
        spec = json.loads(raw)
        out = {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in spec.items()}
    except (ValueError, AttributeError, TypeError):
        out = None
    if out is None or any(p < 0 or o < -2 for parts in out.values() for p, o in parts.items()):
        raise SparkSourceError(f"option {name} must be earliest, latest or JSON like "
                               f'{{"topic":{{"0":23,"1":-2}}}} (an offset >= 0, -2 earliest, '
                               f"-1 latest; partitions >= 0), got {raw!r}")
    return out


def _by_timestamp(opts: dict, name: str) -> "dict | None":
    """``{"topic": {"0": ts_ms}}`` -> ``{topic: {0: ts}}`` (Kafka's
    ``startingOffsetsByTimestamp`` shape)."""
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        spec = json.loads(str(raw))
        out = {str(t): {int(p): int(ts) for p, ts in parts.items()} for t, parts in spec.items()}
    except (ValueError, AttributeError, TypeError):
        out = None
    if not out or any(ts < 0 for parts in out.values() for ts in parts.values()):
        raise SparkSourceError(f'option {name} must be JSON like {{"orders":{{"0":1700000000000}}}} '
                               f"(ms since the epoch, >= 0), got {raw!r}")
    return out


# Options passed to the clients of bootstrap mode, as the clients name them
# (docs/security.md): TLS to the brokers.
CLIENT_OPTIONS = ("tls_ca", "tls_cert", "tls_key", "tls_check_hostname")


def _client(opts: dict, bootstrap: str) -> tuple:
    """The client keywords among ``opts`` as sorted (name, value) pairs,
    checked now (a missing or non-PEM file is named here, not in a task)."""
    picked = {n: opts[n] for n in CLIENT_OPTIONS if opts.get(n) is not None}
    if not picked:
        return ()
    if not bootstrap:
        raise SparkSourceError(f"options {', '.join(sorted(picked))} are for bootstrap mode "
                               "(a data dir is read directly)")
    if "tls_check_hostname" in picked:
        picked["tls_check_hostname"] = _bool(opts, "tls_check_hostname", True)
    from ..client.settings import TlsSettings

    try:
        TlsSettings(**picked).tls_context()
    except LogbrokerError as exc:
        raise SparkSourceError(f"TLS options: {exc.message}") from None
    return tuple(sorted(picked.items()))


def _paths(opts: dict, bootstrap: str) -> dict:
    """Option ``paths``: JSON ``{"<broker id>": "<its data dir on its host>"}``
    -> ``{id: dir}``; only with ``bootstrap`` (the brokers' ids come from its
    metadata). The dirs are on the brokers' hosts, so only their form is
    checked here: absolute (an executor's working dir is no anchor)."""
    raw = opts.get("paths")
    if raw is None:
        return {}
    if not bootstrap:
        raise SparkSourceError("option paths (each broker's data dir on its host) is for "
                               "bootstrap mode; with path the one data dir is read")
    try:
        spec = json.loads(str(raw))
        out = {int(b): v for b, v in spec.items()}
    except (ValueError, AttributeError, TypeError):
        out = None
    if not out or any(b < 0 or not isinstance(d, str) or not os.path.isabs(d)
                      for b, d in out.items()):
        raise SparkSourceError('option paths must be JSON like {"1":"/var/lib/logbroker"} '
                               "(broker id >= 0: that broker's data dir on its host, an "
                               f"absolute path), got {raw!r}")
    return dict(sorted(out.items()))


def _isolation(opts: dict) -> bool:
    """Option ``kafka.isolation.level`` (the name Spark's Kafka source
    passes to its consumers): read_uncommitted (default) or read_committed
    -> whether reads stop at the last stable offset and leave aborted
    transactions out."""
    raw = str(opts.get("kafka.isolation.level", "read_uncommitted")).strip().lower()
    if raw not in ("read_uncommitted", "read_committed"):
        raise SparkSourceError("option kafka.isolation.level must be read_uncommitted or "
                               f"read_committed, got {raw!r}")
    return raw == "read_committed"


def parse_options(raw: dict, streaming: bool = False, columns: tuple = ()) -> Options:
    """Spark's options (case-insensitive keys) as ``Options``; clear errors.
    ``streaming``: for ``readStream`` — ``startingOffsets`` defaults to
    latest (as Spark's Kafka source) and ending options are refused.
    ``columns``: the names a user-given schema picked (() = all); naming
    ``headers`` reads headers."""
    opts = {str(k).lower(): v for k, v in raw.items()}
    path, bootstrap = opts.get("path"), str(opts.get("bootstrap") or "").strip()
    if bool(path) == bool(bootstrap):
        raise SparkSourceError('exactly one of the options "path" (a broker data dir) and '
                               '"bootstrap" (host:port,... of running brokers) is required')
    paths = _paths(opts, bootstrap)
    if path:
        if not os.path.isdir(path):
            raise SparkSourceError(f"data dir {path!r} does not exist or is not a directory")
        if not os.path.exists(os.path.join(path, FILENAME)):
            raise SparkSourceError(f"{path!r} is not a logbroker data dir (no {FILENAME})")
    chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
    if len(chosen) != 1:
        raise SparkSourceError("exactly one of the options subscribe, subscribePattern, assign "
                               f"is required, got {len(chosen)}")
    o = Options(data_dir=os.path.abspath(path) if path else "", bootstrap=bootstrap)
    if "subscribe" in chosen:
        o.subscribe = [t.strip() for t in str(opts["subscribe"]).split(",") if t.strip()]
    elif "subscribepattern" in chosen:
        try:
            o.pattern = re.compile(str(opts["subscribepattern"]))
        except re.error as exc:
            raise SparkSourceError(f"subscribePattern is not a valid regex: {exc}") from None
    else:
        try:
            spec = json.loads(opts["assign"])
            o.assign = {str(t): [int(p) for p in parts] for t, parts in spec.items()}
        except (ValueError, AttributeError, TypeError):
            raise SparkSourceError('option assign must be JSON like {"orders":[0,1]}, '
                                   f"got {opts['assign']!r}") from None
    o.streaming = streaming
    o.starting = _offsets(opts, "startingOffsets", "latest" if streaming else "earliest")
    o.starting_ts = _int(opts, "startingTimestamp", None)
    o.starting_by_ts = _by_timestamp(opts, "startingOffsetsByTimestamp")
    if streaming:
        for name in ("endingOffsets", "endingTimestamp", "endingOffsetsByTimestamp"):
            if name.lower() in opts:
                raise SparkSourceError(f"option {name} is for batch queries; a stream has no end")
    else:
        o.ending = _offsets(opts, "endingOffsets", "latest")
        o.ending_ts = _int(opts, "endingTimestamp", None)
        o.ending_by_ts = _by_timestamp(opts, "endingOffsetsByTimestamp")
    if not streaming and (o.starting == "latest" or
                          (isinstance(o.ending, str) and o.ending == "earliest")):
        raise SparkSourceError("a batch query needs startingOffsets != latest and "
                               "endingOffsets != earliest")
    o.read_committed = _isolation(opts)
    o.fail_on_data_loss = _bool(opts, "failOnDataLoss", True)
    o.include_headers = _bool(opts, "includeHeaders", False)
    o.min_partitions = _int(opts, "minPartitions", 0)
    o.split_bytes = _int(opts, "splitBytes", DEFAULT_SPLIT_BYTES, minimum=1)
    o.max_rows = _int(opts, "maxRecordsPerBatch", DEFAULT_MAX_ROWS, minimum=1)
    o.max_bytes = _int(opts, "maxBytesPerBatch", DEFAULT_MAX_BYTES, minimum=1)
    if columns:
        o.columns, o.include_headers = tuple(columns), "headers" in columns
    o.client = _client(opts, bootstrap)
    o.paths = paths
    return o
