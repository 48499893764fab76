"""``logbroker inspect PATH...``: dump and verify segments (like kafka-dump-log).

A thin shell over dump/report.py. Output contract:

- text (default): one line per batch on stdout (a transactional batch ends
  `` transactional``, a marker `` control=commit|abort coordinator_epoch=N``),
  ``  record ...`` lines under it with ``--records``, a ``PROBLEM <file> byte
  <pos> offset <offset>: <reason>`` line where damage is found, and a rich
  summary table at the end (then a transactions table for partitions that
  hold transactional or control batches);
- ``--json``: one JSON object per line on stdout, ``type`` one of batch,
  record, problem, summary, transactions (per partition holding
  transactional or control batches: LSO, HW, open transactions, aborted
  count); a batch says ``transactional`` and its ``control`` marker (type
  commit / abort, coordinator epoch; null for other batches); bytes are UTF-8 text, or base64 with
  ``<field>_base64: true`` when not valid UTF-8; no table;
- notes (something left unchecked) go to stderr as ``note: ...``; the
  progress bar (``--progress``, or by default when stderr is a terminal,
  stdout is not, and the input exceeds 64 MiB) goes to stderr only.

Exit status: 0 when no problem was found, 1 when any was (this includes a
bad CRC or an unreadable or torn batch even without ``--verify``; the flag
adds the offset-contiguity and offset-index checks and the records-section
layout check). Bad PATHs: one ``error:`` line on stderr, exit 1.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from dataclasses import asdict

import click

from ..records.compression import NAMES as COMPRESSION_NAMES
from ..records.format import COMPRESSION_MASK, KAFKA_MAGIC, TXN_BITS, txn_flags
from ..dump.report import BatchInfo, FileSummary, Notice, Problem, RecordInfo, inspect as run, plan
from ..dump.txn_view import Transactions

PROGRESS_THRESHOLD = 64 << 20
PREVIEW_CHARS = 60


@click.command()
@click.argument("paths", metavar="PATH...", nargs=-1, required=True, type=click.Path())
@click.option("--records", is_flag=True, help="Also print every record.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line on stdout.")
@click.option("--verify", is_flag=True,
              help="Also check offset contiguity, the offset index and the records layout.")
@click.option("--max-value-bytes", type=click.IntRange(min=0), default=None,
              help="Show at most this many bytes of keys, values and header values "
                   "(text: default a repr of ~60 chars; JSON: default everything).")
@click.option("--progress/--no-progress", default=None,
              help="Progress bar on stderr (default: only for large input on a terminal).")
def inspect(paths: tuple[str, ...], records: bool, as_json: bool, verify: bool,
            max_value_bytes: "int | None", progress: "bool | None") -> None:
    """Dump the record batches of segment files, partition dirs or data dirs.

    PATH is a segment file (<base offset>.log), a partition dir
    (<topic>-<partition>) or a data dir. Exit status 1 when any problem is
    found (see --verify), 0 otherwise.
    """
    p = plan(paths)
    if progress is None:
        progress = (p.total_bytes > PROGRESS_THRESHOLD and sys.stderr.isatty()
                    and not sys.stdout.isatty())
    out = _Json(max_value_bytes) if as_json else _Text(max_value_bytes)
    try:
        problems = _drive(run(p, records=records, verify=verify), out, p.total_bytes, progress)
    except BrokenPipeError:  # stdout closed early (| head): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(1)
    sys.exit(1 if problems else 0)


def _drive(events, out, total: int, progress: bool) -> int:
    """Feed every event to ``out``; returns the number of problems."""
    problems, bar, task, done = 0, None, None, 0
    if progress:
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn,
                                   TimeRemainingColumn)

        bar = Progress(TextColumn("inspect"), BarColumn(), DownloadColumn(), TimeRemainingColumn(),
                       console=Console(stderr=True), transient=True, redirect_stdout=False,
                       redirect_stderr=False)
        task = bar.add_task("inspect", total=total)
        bar.start()
    try:
        for ev in events:
            if isinstance(ev, Notice):
                click.echo(f"note: {ev.file}: {ev.message}", err=True)
                continue
            problems += isinstance(ev, Problem)
            out.event(ev)
            if bar is not None and isinstance(ev, BatchInfo):
                bar.advance(task, ev.header.size)
            elif bar is not None and isinstance(ev, FileSummary):
                done += ev.size
                bar.update(task, completed=done)
    finally:
        if bar is not None:
            bar.stop()
    out.finish()
    return problems


class _Text:
    def __init__(self, max_value_bytes: "int | None") -> None:
        self.max_value_bytes = max_value_bytes
        self.summaries: list[FileSummary] = []
        self.txns: list[Transactions] = []

    def event(self, ev) -> None:
        if isinstance(ev, BatchInfo):
            h = ev.header
            click.echo(f"{ev.file} position={ev.position} base_offset={h.base_offset} "
                       f"last_offset={h.last_offset} count={h.record_count} "
                       f"first_ts={h.first_timestamp} max_ts={h.max_timestamp} size={h.size} "
                       f"leader_epoch={h.leader_epoch} producer_id={h.producer_id} "
                       f"producer_epoch={h.producer_epoch} "
                       f"crc={'ok' if ev.crc_ok else 'BAD'}{_kafka_note(h)}{_txn_note(ev)}")
        elif isinstance(ev, RecordInfo):
            r = ev.record
            headers = ", ".join(f"({k!r}, {self._preview(v)})" for k, v in r.headers)
            click.echo(f"  record offset={r.offset} timestamp={r.timestamp} "
                       f"key={self._preview(r.key)} value={self._preview(r.value)} "
                       f"headers=[{headers}]")
        elif isinstance(ev, Problem):
            click.echo(str(ev))
        elif isinstance(ev, FileSummary):
            self.summaries.append(ev)
        elif isinstance(ev, Transactions):
            self.txns.append(ev)

    def _preview(self, raw: "bytes | None") -> str:
        if raw is None:
            return "null"
        if self.max_value_bytes is not None:
            more = len(raw) - self.max_value_bytes
            return repr(raw[:self.max_value_bytes]) + (f"...(+{more} bytes)" if more > 0 else "")
        text = repr(raw)
        return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS - 3] + "..."

    def finish(self) -> None:
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table(title="summary", title_justify="left")
        for name in ("file", "batches", "records", "bytes", "first offset", "last offset",
                     "problems"):
            table.add_column(name, justify="left" if name == "file" else "right")
        for s in self.summaries:
            table.add_row(Text(s.file), *(_cell(v) for v in (
                s.batches, s.records, s.size, s.first_offset, s.last_offset, s.problems)))
        if len(self.summaries) > 1:
            ss = self.summaries
            firsts = [s.first_offset for s in ss if s.first_offset is not None]
            lasts = [s.last_offset for s in ss if s.last_offset is not None]
            table.add_row(Text(f"total ({len(ss)} files)"), *(_cell(v) for v in (
                sum(s.batches for s in ss), sum(s.records for s in ss), sum(s.size for s in ss),
                min(firsts, default=None), max(lasts, default=None),
                sum(s.problems for s in ss))))
        tty = sys.stdout.isatty()
        console = Console(width=None if tty else 200, highlight=False)
        console.print(table)
        if self.txns:
            console.print(_txn_table(self.txns))


def _cell(value) -> str:
    return "-" if value is None else str(value)


class _Json:
    def __init__(self, max_value_bytes: "int | None") -> None:
        self.max_value_bytes = max_value_bytes

    def event(self, ev) -> None:
        if isinstance(ev, BatchInfo):
            obj = {"type": "batch", "file": ev.file, "position": ev.position,
                   **ev.header._asdict(), "last_offset": ev.header.last_offset,
                   "size": ev.header.size, "crc_ok": ev.crc_ok,
                   "transactional": ev.transactional, "control": _control(ev)}
        elif isinstance(ev, RecordInfo):
            r = ev.record
            obj = {"type": "record", "file": ev.file, "position": ev.position,
                   "offset": r.offset, "timestamp": r.timestamp,
                   **self._bytes("key", r.key), **self._bytes("value", r.value),
                   "headers": [{"key": k, **self._bytes("value", v)} for k, v in r.headers]}
        elif isinstance(ev, Problem):
            obj = {"type": "problem", **asdict(ev)}
        elif isinstance(ev, Transactions):
            obj = {"type": "transactions", "partition": ev.partition,
                   "last_stable_offset": ev.last_stable_offset,
                   "high_watermark": ev.high_watermark,
                   "open": [{"producer_id": p, "producer_epoch": e, "first_offset": f}
                            for p, e, f in ev.open],
                   "aborted": ev.aborted, "markers": ev.markers}
        else:
            obj = {"type": "summary", **asdict(ev)}
        click.echo(json.dumps(obj, separators=(",", ":")))

    def _bytes(self, name: str, raw: "bytes | None") -> dict:
        """``name``: text or base64 (``name_base64``), ``name_size``, cut to max_value_bytes."""
        if raw is None:
            return {name: None, f"{name}_base64": False, f"{name}_size": None}
        size, cut = len(raw), raw if self.max_value_bytes is None else raw[:self.max_value_bytes]
        try:
            text, b64 = cut.decode("utf-8"), False
        except UnicodeDecodeError:
            text, b64 = base64.b64encode(cut).decode("ascii"), True
        return {name: text, f"{name}_base64": b64, f"{name}_size": size}

    def finish(self) -> None:
        pass


def _control(ev: BatchInfo) -> "dict | None":
    """A control batch's marker for --json: type commit / abort (unknown when
    it could not be read) and coordinator epoch; None for other batches."""
    if not ev.header.attributes & TXN_BITS or not txn_flags(ev.header.magic,
                                                            ev.header.attributes)[1]:
        return None
    if ev.marker is None:
        return {"type": "unknown", "coordinator_epoch": None}
    return {"type": "commit" if ev.marker[0] else "abort", "coordinator_epoch": ev.marker[1]}


def _txn_note(ev: BatchInfo) -> str:
    """What a transactional or control batch adds to its line."""
    control = _control(ev)
    if control is not None:
        return f" control={control['type']} coordinator_epoch={_cell(control['coordinator_epoch'])}"
    return " transactional" if ev.transactional else ""


def _txn_table(txns: list):
    """Per partition with transactions: LSO, HW, open ones, aborted count."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title="transactions", title_justify="left")
    for name in ("partition", "last stable offset", "high watermark", "open (producer:epoch@first)",
                 "aborted", "markers"):
        table.add_column(name, justify="left" if name.startswith(("partition", "open")) else "right")
    for t in txns:
        opened = " ".join(f"{p}:{e}@{f}" for p, e, f in t.open) or "-"
        table.add_row(Text(t.partition), _cell(t.last_stable_offset), _cell(t.high_watermark),
                      Text(opened), str(t.aborted), str(t.markers))
    return table


def _kafka_note(h) -> str:
    """What a Kafka batch (magic 2, stored as sent) adds to its line; nothing for ours."""
    if h.magic != KAFKA_MAGIC:
        return ""
    return f" magic=2 compression={COMPRESSION_NAMES[h.attributes & COMPRESSION_MASK]}"
