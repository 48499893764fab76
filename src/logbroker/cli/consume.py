"""``logbroker consume TOPIC``: print records from an offset, a time or a group.

Start: ``--offset N|earliest|latest|@TIMESTAMP_MS|@-AGE`` (AGE: a number
with ``s``, ``m``, ``h`` or ``d``, e.g. ``@-1h``: records of the last hour);
without it, a group's committed offsets (when ``--group``), else the
earliest offset. ``--offset N`` must be within every chosen partition's
``log start..log end`` (``OFFSET_OUT_OF_RANGE`` names the valid range
otherwise; N = log end reads nothing, or waits with ``--follow``). Without
``--follow`` it stops at the high watermark each partition had when it
started; with it, it waits for new records until interrupted or
``--max-messages``. With ``--group`` it commits the offsets after what it
printed when it stops and, with ``--follow``, at most every
``--commit-interval-ms`` (5 s, Kafka's ``auto.commit.interval.ms``): only
partitions that moved, so an idle follower writes nothing. An unknown
topic is ``UNKNOWN_TOPIC_OR_PARTITION``.

``--group`` without ``--partition`` and ``--offset`` joins the group as a
member: the group's members share the topic's partitions (two ``consume
--group g --follow`` processes split them), each printing what it is
assigned; a partition taken away is committed before it goes. With
``--partition`` or ``--offset`` the group only stores offsets (no membership).

``--isolation read_committed`` prints only committed transactions' records
and stops at each partition's last stable offset (without ``--follow``: the
one it had when it started); ``read_uncommitted`` (the default, as Kafka's
console consumer) prints every record, those of open and aborted
transactions too. Transaction markers are never printed.
"""

from __future__ import annotations

import re
import signal
import sys
import time

import click

from .common import bootstrap_option, emit_json, record_json
from ..errors import InvalidRequestError, OffsetOutOfRangeError, UnknownTopicOrPartitionError
from ..limits import check_group_name, check_offset, check_partition, check_timestamp, check_topic_name

_AGE = re.compile(r"^-(\d{1,12})(s|m|h|d)\Z")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
JOIN_WAIT_S = 30.0  # a one-shot member waits this long for its first assignment
OFFSET_FORMS = "N, earliest, latest, @TIMESTAMP_MS or @-AGE (e.g. @-30s, @-15m, @-1h, @-2d)"


def parse_offset(text: "str | None", now_ms: "int | None" = None):
    """``--offset``'s value: None, "earliest", "latest", an offset, or
    ``("ts", ms)``. Raises INVALID_REQUEST naming the accepted forms."""
    if text is None or text in ("earliest", "latest"):
        return text
    if text.startswith("@"):
        age = _AGE.match(text[1:])
        if age:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            return ("ts", max(now - int(age[1]) * _UNIT_MS[age[2]], 0))
        if not re.fullmatch(r"\d{1,20}", text[1:]):
            raise InvalidRequestError(f"--offset {text!r}: use {OFFSET_FORMS}")
        return ("ts", check_timestamp(int(text[1:]), "--offset timestamp"))
    if not re.fullmatch(r"\d{1,20}", text):
        raise InvalidRequestError(f"--offset {text!r}: use {OFFSET_FORMS}")
    return check_offset(int(text), "--offset")


@click.command()
@click.argument("topic")
@bootstrap_option
@click.option("-o", "--offset", default=None, help=f"Where to start: {OFFSET_FORMS}.")
@click.option("-p", "--partition", type=int, default=None,
              help="Only this partition (default: all).")
@click.option("-g", "--group", default=None,
              help="Join this consumer group (share the partitions with its other members) "
                   "and commit to it; with -p/-o it only stores offsets.")
@click.option("-n", "--max-messages", type=click.IntRange(min=1), default=None)
@click.option("-f", "--follow", is_flag=True, help="Wait for new records instead of exiting.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
@click.option("--isolation", type=click.Choice(["read_uncommitted", "read_committed"]),
              default="read_uncommitted", show_default=True,
              help="read_committed: only committed transactions' records, up to the last "
                   "stable offset.")
@click.option("--commit-interval-ms", type=click.IntRange(min=1, max=86_400_000), default=5000,
              show_default=True,
              help="With --group --follow: commit what was printed at most this often, and "
                   "only partitions that moved (an idle follower writes nothing).")
def consume(topic, conn, offset, partition, group, max_messages, follow, fmt, isolation,
            commit_interval_ms):
    """Print the records of TOPIC: values one per line, or JSON objects."""
    from .. import Admin, Consumer

    check_topic_name(topic)
    start = parse_offset(offset)
    if group is not None:
        check_group_name(group)
    if partition is not None:
        check_partition(partition)
    with Admin(**conn) as admin:
        count = admin.list_topics().get(topic)
        if count is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {topic!r}")
        if partition is not None and partition >= count:
            raise UnknownTopicOrPartitionError(f"{topic}[{partition}]: the topic has "
                                               f"{count} partition(s)")
        parts = [(topic, partition)] if partition is not None else [(topic, p) for p in range(count)]
        ends = {tp: o.offset for tp, o in admin.list_offsets(
            parts, "latest", isolation_level=isolation).items()}
        if isinstance(start, int):
            starts = {tp: o.offset for tp, o in admin.list_offsets(parts, "earliest").items()}
            _check_in_range(start, parts, starts, ends)
    reset = "latest" if follow and start is None and group is None else "earliest"
    member = group is not None and partition is None and start is None
    done: dict = {}  # (topic, partition) -> the offset after the last record printed
    with Consumer(**conn, group=group, auto_offset_reset=reset, enable_auto_commit=False,
                  isolation_level=isolation) as consumer:
        if member:
            consumer.subscribe([topic], on_revoke=lambda ps: _commit_revoked(consumer, done, ps))
        else:
            consumer.assign(parts)
            _seek(consumer, start, group)
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            printed = _loop(consumer, parts if not member else None, ends, follow, max_messages,
                            fmt, group, done, Commits(consumer, done, commit_interval_ms / 1000,
                                                      not member))
        finally:
            signal.signal(signal.SIGTERM, previous)
    click.echo(f"consumed {printed} record(s)", err=True)


def _check_in_range(offset: int, parts, starts: dict, ends: dict) -> None:
    for t, p in parts:
        if not starts[(t, p)] <= offset <= ends[(t, p)]:
            hint = " (pick one with -p)" if len(parts) > 1 else ""
            raise OffsetOutOfRangeError(f"{t}[{p}]: offset {offset} is not in "
                                        f"{starts[(t, p)]}..{ends[(t, p)]}, the partition's "
                                        f"log start..log end{hint}")


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def _seek(consumer, start, group) -> None:
    if start == "earliest" or (start is None and group is None):
        consumer.seek_to_beginning()
    elif start == "latest":
        consumer.seek_to_end()
    elif isinstance(start, tuple):
        consumer.seek_to_timestamp(start[1])
    elif isinstance(start, int):
        for t, p in consumer.assignment():
            consumer.seek(t, p, start)


def _commit_revoked(consumer, done: dict, partitions) -> None:
    """A member's partitions go to another member: commit what was printed of them."""
    mine = {tp: done.pop(tp) for tp in partitions if tp in done}
    if mine:
        consumer.commit(mine)


class Commits:
    """The printed offsets (``done``) a ``--group`` consumer commits: those
    that moved since its last commit, at most every ``every_s`` while
    following, and once more at the end; a member commits only partitions
    it still owns (``fixed``: assigned ones, all of them)."""

    def __init__(self, consumer, done: dict, every_s: float, fixed: bool) -> None:
        self.consumer, self.done, self.every_s, self.fixed = consumer, done, every_s, fixed
        self.committed: dict = {}
        self.due = time.monotonic() + every_s

    def maybe(self) -> None:
        now = time.monotonic()
        if now >= self.due:
            self.due = now + self.every_s
            self.now()

    def now(self) -> None:
        owned = None if self.fixed else self.consumer.assignment()
        moved = {tp: off for tp, off in self.done.items()
                 if self.committed.get(tp) != off and (owned is None or tp in owned)}
        if moved:
            self.consumer.commit(moved)
            self.committed.update(moved)


def _at_end(consumer, parts, ends: dict, joined_by: float) -> bool:
    """Without --follow: every partition read (``parts`` None: the member's
    assignment, once it has one; INVALID_REQUEST if it got none in time)."""
    if parts is None:
        parts = consumer.assignment()
        if not parts:
            if time.monotonic() > joined_by:
                raise InvalidRequestError("the group assigned this consumer no partition within "
                                          f"{JOIN_WAIT_S:.0f} s (more members than partitions?)")
            return False
    return all(consumer.position(t, p) >= ends[(t, p)] for t, p in parts)


def _loop(consumer, parts, ends, follow, max_messages, fmt, group, done, commits) -> int:
    printed, out = 0, sys.stdout.buffer
    joined_by = time.monotonic() + JOIN_WAIT_S
    try:
        while True:
            if not follow and _at_end(consumer, parts, ends, joined_by):
                break
            for rec in consumer.poll(timeout=0.5):
                if not follow and rec.offset >= ends[(rec.topic, rec.partition)]:
                    continue
                if fmt == "json":
                    emit_json(record_json(rec))
                else:
                    out.write((rec.value or b"") + b"\n")
                done[(rec.topic, rec.partition)] = rec.offset + 1
                printed += 1
                if max_messages and printed >= max_messages:
                    return printed
            sys.stdout.flush()
            out.flush()
            if follow and group:
                commits.maybe()
    except KeyboardInterrupt:
        pass
    finally:
        sys.stdout.flush()
        out.flush()
        if group:
            commits.now()
    return printed
