"""``logbroker produce TOPIC [VALUE...]``: send records, one per argument or line.

Checked first, then sent: the whole input (the VALUEs, stdin or ``--file``)
is read and checked before anything is sent — every JSON line parsed, every
key separator found, every timestamp, partition and record size in range,
the partitions against the topic's count. A bad line N is reported as
``error: INVALID_REQUEST: line N: ...`` and nothing is stored. Stdin is
read once into a spooled temporary file (memory up to 64 MiB, then disk),
so input of any size can be checked and then sent.

Once sending has started, a failure (broker unreachable, a record the
broker refuses) stops it and is reported with how far it got:
``error: NAME: message (K of N record(s) acknowledged)``, exit 1; records
not acknowledged may or may not be stored. Exit 0 only when every record
was acknowledged (``--acks 0``: sent, nothing is confirmed).

``--transactional-id ID``: the whole input is sent as one transaction
(``--transaction-records N``: one per N records, in input order), committed
at its end: read_committed consumers see all of it or, after a failure,
none of it (the open transaction is aborted and the error says how many
records earlier transactions committed). Starting fences any other
producer of the same id (its open transaction is aborted).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from dataclasses import dataclass
from typing import Callable, Iterator

import click

from .common import bootstrap_option, json_record, utf8
from ..errors import InvalidRequestError, LogbrokerError, RequestTimedOutError, UnknownError
from ..limits import check_int, check_partition, check_topic_name

SPOOL_BYTES = 64 << 20
MAX_RECORD_BYTES = (16 << 20) - 1024  # under the producer's max_request_size (16 MiB)


@dataclass(frozen=True)
class Shape:
    """What the checking pass learned: records and the highest partition named."""

    records: int
    top_partition: int  # -1: none named
    top_line: int


def _lines(stream) -> Iterator[bytes]:
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def _records(lines, fmt: str, key, sep, headers, partition) -> Iterator[tuple[int, dict]]:
    """``(line number, send() kwargs)`` per record; raises InvalidRequestError
    naming the line for one that cannot be sent."""
    for n, raw in enumerate(lines, 1):
        if fmt == "json":
            if not raw.strip():
                continue
            try:
                rec = json_record(raw.decode("utf-8"), n)
            except UnicodeDecodeError:
                raise InvalidRequestError(f"line {n}: not UTF-8") from None
            rec["headers"] = rec["headers"] + headers
            if rec["partition"] is None:
                rec["partition"] = partition
        else:
            k = key
            if sep is not None:
                if sep not in raw:
                    raise InvalidRequestError(f"line {n}: no key separator {sep!r}")
                k, raw = raw.split(sep, 1)
            rec = {"value": raw, "key": k, "headers": headers, "timestamp_ms": None,
                   "partition": partition}
        check_int(_size(rec), f"line {n}: record of", 0, MAX_RECORD_BYTES)
        yield n, rec


def _size(rec: dict) -> int:
    """An upper bound of the bytes a record takes in a batch."""
    return (64 + len(rec["value"] or b"") + len(rec["key"] or b"")
            + sum(16 + len(k.encode()) + len(v or b"") for k, v in rec["headers"]))


def _check(records) -> Shape:
    count, top, top_line = 0, -1, 0
    for n, rec in records:
        count += 1
        if rec["partition"] is not None and rec["partition"] > top:
            top, top_line = rec["partition"], n
    return Shape(count, top, top_line)


class _Input:
    """The input lines (VALUEs, ``--file`` or stdin), readable twice."""

    def __init__(self, values, path: "str | None") -> None:
        self.values, self.path, self._spool = values, path, None

    def __enter__(self) -> "_Input":
        if not self.values and not self.path:
            self._spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
            shutil.copyfileobj(sys.stdin.buffer, self._spool, 1 << 20)
        return self

    def lines(self) -> Iterator[bytes]:
        if self.values:
            yield from (os.fsencode(v) for v in self.values)
        elif self.path:
            with open(self.path, "rb") as fh:
                yield from _lines(fh)
        else:
            self._spool.seek(0)
            yield from _lines(self._spool)

    def __exit__(self, *exc) -> None:
        if self._spool is not None:
            self._spool.close()


@click.command()
@click.argument("topic")
@click.argument("values", nargs=-1)
@bootstrap_option
@click.option("-k", "--key", default=None, help="Key of every record.")
@click.option("--key-separator", default=None, help="Split each line into KEY SEP VALUE.")
@click.option("-H", "--header", "headers", multiple=True, metavar="K=V",
              help="Header of every record (repeatable).")
@click.option("-p", "--partition", type=int, default=None,
              help="Partition (default: by key hash, or round-robin without a key; "
                   "a JSON line's own `partition` wins).")
@click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: lines as `consume --format json` writes them "
                                      "(value, key, headers, timestamp, partition).")
@click.option("-f", "--file", "path", type=click.Path(exists=True, dir_okay=False),
              help="Read lines from this file (with a progress bar) instead of stdin.")
@click.option("--transactional-id", "txn_id", default=None,
              help="Send the input as one transaction of this transactional id (all or "
                   "nothing for read_committed consumers).")
@click.option("--transaction-records", "txn_records", type=click.IntRange(min=1), default=None,
              help="With --transactional-id: commit every N records (default: the whole input "
                   "is one transaction).")
def produce(topic, values, conn, key, key_separator, headers, partition, acks, fmt, path,
            txn_id, txn_records):
    """Send VALUEs (or stdin lines, or the lines of --file) to TOPIC.

    The whole input is read (stdin to its end) and checked first (JSON, key
    separators, timestamps, partitions, sizes): a bad line N is reported as
    `line N: ...` and nothing is sent. If sending then fails (broker
    unreachable, a record refused), the error says how many records were
    acknowledged.
    """
    check_topic_name(topic)
    if partition is not None:
        check_partition(partition)
    if key_separator == "":
        raise InvalidRequestError("--key-separator must not be empty")
    hdrs = []
    for h in headers:
        if "=" not in h:
            raise click.BadParameter(f"{h!r} is not K=V", param_hint="--header")
        k, v = h.split("=", 1)
        hdrs.append((utf8(k, "header key"), os.fsencode(v)))
    if txn_id is not None and acks != "all":
        raise InvalidRequestError("--transactional-id needs --acks all (a transactional "
                                  "producer is idempotent)")
    if txn_records is not None and txn_id is None:
        raise InvalidRequestError("--transaction-records needs --transactional-id")
    sep = os.fsencode(key_separator) if key_separator is not None else None
    kbytes = os.fsencode(key) if key is not None else None
    with _Input(values, path) as source:
        def records():
            return _records(source.lines(), fmt, kbytes, sep, hdrs, partition)

        shape = _check(records())
        if txn_id is not None:
            from .produce_txn import deliver_in_transactions

            deliver_in_transactions(topic, records, shape, conn, path, txn_id, txn_records,
                                    _check_partitions, _progress)
        else:
            _deliver(topic, records, shape, conn, acks, path)


def _deliver(topic: str, records: Callable, shape: Shape, conn: dict, acks: str,
             path: "str | None") -> None:
    from .. import Producer

    wait_ms = conn["request_timeout_ms"]
    with Producer(**conn, acks=acks if acks == "all" else int(acks), max_block_ms=wait_ms,
                  delivery_timeout_ms=wait_ms) as producer:
        _check_partitions(producer, topic, shape)
        tally = _Tally()
        try:
            with _progress(path) as advance:
                for _, rec in records():
                    if tally.failed:
                        break
                    producer.send(topic, **rec).add_done_callback(tally.done)
                    advance(len(rec["value"] or b"") + 1)
            producer.flush(wait_ms / 1000 + 1)
        except LogbrokerError as exc:
            tally.fail(exc)
        except TimeoutError:
            tally.fail(None)
    if tally.failed or tally.acked < shape.records:
        raise tally.short_of(shape.records)
    confirmed = "" if acks != "0" else " (acks=0: sent, not confirmed)"
    click.echo(f"produced {shape.records} record(s) to {topic}{confirmed}", err=True)


def _check_partitions(producer, topic: str, shape: Shape) -> None:
    count = producer.partitions_for(topic)
    if shape.top_partition >= count:
        raise InvalidRequestError(f"line {shape.top_line}: partition {shape.top_partition} "
                                  f"is not in 0..{count - 1} ({topic} has {count} partition(s))")


class _Tally:
    """Acknowledgements and the first failure, counted from handle callbacks
    (which run on the producer's I/O thread)."""

    def __init__(self) -> None:
        self.acked = 0
        self.failed: list = []
        self._lock = threading.Lock()

    def done(self, handle) -> None:
        exc = handle.exception()
        with self._lock:
            if exc is None:
                self.acked += 1
            elif not self.failed:
                self.failed.append(exc)

    def short_of(self, total: int) -> LogbrokerError:
        """The first failure, its message saying how many records got through."""
        exc = self.failed[0] if self.failed else RequestTimedOutError("not acknowledged in time")
        if not isinstance(exc, LogbrokerError):
            exc = UnknownError(f"{type(exc).__name__}: {exc}")
        return type(exc)(f"{exc.message} ({self.acked} of {total} record(s) acknowledged)")

    def fail(self, exc) -> None:
        with self._lock:
            if not self.failed and exc is not None:
                self.failed.append(exc)


class _progress:
    """A progress bar on stderr by bytes of --file (no-op without a file)."""

    def __init__(self, path: "str | None") -> None:
        self.path = path

    def __enter__(self):
        if not self.path:
            return lambda n: None
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(transient=True, console=Console(stderr=True))
        self.bar.start()
        task = self.bar.add_task(os.path.basename(self.path), total=os.path.getsize(self.path))
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc) -> None:
        if self.path:
            self.bar.stop()
