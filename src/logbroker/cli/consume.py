"""``logbroker consume TOPIC``: print records from an offset, a time or a group.

Start: ``--offset N|earliest|latest|@TIMESTAMP_MS``; without it, a group's
committed offsets (when ``--group``), else the earliest offset. Without
``--follow`` it stops at the high watermark each partition had when it
started; with it, it waits for new records until interrupted or
``--max-messages``. With ``--group`` it commits the offsets after what it
printed (when it stops, and after each poll with ``--follow``).
"""

from __future__ import annotations

import signal
import sys

import click

from .common import bootstrap_option, emit_json, record_json
from ..errors import InvalidRequestError


def _parse_offset(text: "str | None"):
    if text is None or text in ("earliest", "latest"):
        return text
    try:
        if text.startswith("@"):
            return ("ts", int(text[1:]))
        value = int(text)
    except ValueError:
        raise click.BadParameter(f"{text!r}: use N, earliest, latest or @TIMESTAMP_MS",
                                 param_hint="--offset") from None
    if value < 0:
        raise click.BadParameter("offsets are >= 0", param_hint="--offset")
    return value


@click.command()
@click.argument("topic")
@bootstrap_option
@click.option("-o", "--offset", default=None, help="N, earliest, latest or @TIMESTAMP_MS.")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None,
              help="Only this partition (default: all).")
@click.option("-g", "--group", default=None, help="Start from and commit to this group.")
@click.option("-n", "--max-messages", type=click.IntRange(min=1), default=None)
@click.option("-f", "--follow", is_flag=True, help="Wait for new records instead of exiting.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True)
def consume(topic, conn, offset, partition, group, max_messages, follow, fmt):
    """Print the records of TOPIC: values one per line, or JSON objects."""
    from .. import Admin, Consumer

    start = _parse_offset(offset)
    with Admin(**conn) as admin:
        count = admin.list_topics().get(topic)
        if count is None:
            raise InvalidRequestError(f"unknown topic {topic!r}")
        parts = [(topic, partition)] if partition is not None else [(topic, p) for p in range(count)]
        if partition is not None and partition >= count:
            raise InvalidRequestError(f"topic {topic!r} has {count} partition(s)")
        ends = {tp: o.offset for tp, o in admin.list_offsets(parts, "latest").items()}
    reset = "latest" if follow and start is None and group is None else "earliest"
    with Consumer(**conn, group=group, auto_offset_reset=reset) as consumer:
        consumer.assign(parts)
        _seek(consumer, start, group)
        signal.signal(signal.SIGTERM, _interrupt)
        printed = _loop(consumer, parts, ends, follow, max_messages, fmt, group)
    click.echo(f"consumed {printed} record(s)", err=True)


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


def _loop(consumer, parts, ends, follow, max_messages, fmt, group) -> int:
    printed, done, out = 0, {}, sys.stdout.buffer
    try:
        while True:
            if not follow and all(consumer.position(t, p) >= ends[(t, p)] for t, p in parts):
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
            if follow and group and done:
                consumer.commit(dict(done))
    except KeyboardInterrupt:
        pass
    finally:
        sys.stdout.flush()
        out.flush()
        if group and done:
            consumer.commit(dict(done))
    return printed
