"""``logbroker produce TOPIC [VALUE...]``: send records, one per argument or line.

Exit status 0 only when every record was acknowledged; otherwise the first
error is printed and the status is 1.
"""

from __future__ import annotations

import os
import sys
from typing import Iterator

import click

from .common import bootstrap_option, json_record
from ..errors import InvalidRequestError, LogbrokerError


def _lines(stream) -> Iterator[bytes]:
    for line in stream:
        yield line[:-1] if line.endswith(b"\n") else line


def _records(values, stream, fmt: str, key, sep, headers) -> Iterator[dict]:
    source = (v.encode() for v in values) if values else _lines(stream)
    for n, raw in enumerate(source, 1):
        if fmt == "json":
            if not raw.strip():
                continue
            try:
                rec = json_record(raw.decode("utf-8"), n)
            except UnicodeDecodeError:
                raise InvalidRequestError(f"line {n}: not UTF-8") from None
            rec["headers"] = rec["headers"] + headers
            yield rec
            continue
        k = key
        if sep is not None:
            if sep not in raw:
                raise InvalidRequestError(f"line {n}: no key separator {sep!r}")
            k, raw = raw.split(sep, 1)
        yield {"value": raw, "key": k, "headers": headers, "timestamp_ms": None}


@click.command()
@click.argument("topic")
@click.argument("values", nargs=-1)
@bootstrap_option
@click.option("-k", "--key", default=None, help="Key of every record.")
@click.option("--key-separator", default=None, help="Split each line into KEY SEP VALUE.")
@click.option("-H", "--header", "headers", multiple=True, metavar="K=V",
              help="Header of every record (repeatable).")
@click.option("-p", "--partition", type=click.IntRange(min=0), default=None,
              help="Partition (default: by key hash, or round-robin without a key).")
@click.option("--acks", type=click.Choice(["all", "1", "0"]), default="all", show_default=True)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
              show_default=True, help="json: lines as `consume --format json` writes them.")
@click.option("-f", "--file", "path", type=click.Path(exists=True, dir_okay=False),
              help="Read lines from this file (with a progress bar) instead of stdin.")
def produce(topic, values, conn, key, key_separator, headers, partition, acks, fmt, path):
    """Send VALUEs (or stdin lines, or the lines of --file) to TOPIC."""
    from .. import Producer

    hdrs = []
    for h in headers:
        if "=" not in h:
            raise click.BadParameter(f"{h!r} is not K=V", param_hint="--header")
        k, v = h.split("=", 1)
        hdrs.append((k, v.encode()))
    sep = key_separator.encode() if key_separator is not None else None
    kbytes = key.encode() if key is not None else None
    stream = open(path, "rb") if path else sys.stdin.buffer
    try:
        with _progress(path) as advance, Producer(
                **conn, acks=acks if acks == "all" else int(acks)) as producer:
            sent, failed = 0, []
            for rec in _records(values, stream, fmt, kbytes, sep, hdrs):
                handle = producer.send(topic, partition=partition, **rec)
                handle.add_done_callback(lambda h: h.exception() and failed.append(h.exception()))
                sent += 1
                advance(len(rec["value"] or b"") + 1)
            producer.flush()
    finally:
        if path:
            stream.close()
    if failed:
        raise failed[0] if isinstance(failed[0], LogbrokerError) else LogbrokerError(str(failed[0]))
    click.echo(f"produced {sent} record(s) to {topic}", err=True)


class _progress:
    """A progress bar on stderr by bytes of --file (no-op without a file)."""

    def __init__(self, path: "str | None") -> None:
        self.path = path

    def __enter__(self):
        if not self.path:
            return lambda n: None
        from rich.progress import Progress

        self.bar = Progress(transient=True, console=_stderr_console())
        self.bar.start()
        task = self.bar.add_task(os.path.basename(self.path), total=os.path.getsize(self.path))
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc) -> None:
        if self.path:
            self.bar.stop()


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)
