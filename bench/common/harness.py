"""What every bench entry point does around its measurements: its command
line (``python -m bench.<name>``, the options all benches share), a temporary
work dir on the checkout's disk (or ``--dir``) that is always removed, also
on SIGTERM; the console for progress (stderr); and the output: rich tables
for people, the same tables as markdown with ``--markdown``, JSON on stdout
with ``--json``, and ``--render`` to print a saved JSON run's tables.

A bench's ``__main__`` builds its parser with ``parser()``, adds its own
options, and hands a ``run(args, workdir, err) -> results`` and a
``tables(results) -> [Table]`` to ``main()``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bench import ROOT


# -- command line --------------------------------------------------------------------------
def parser(name: str, doc: str, quick: str, *, sections: tuple = (), workdir: bool = True,
           report: bool = True) -> argparse.ArgumentParser:
    """The parser of ``python -m bench.<name>``: ``doc``'s first paragraph as
    description, ``--quick`` (``quick`` says what it does), and where they
    apply ``--json``, ``--markdown`` and ``--render`` (``report``), ``--dir``
    (``workdir``) and ``--only`` (``sections``; ``parse`` checks it)."""
    ap = argparse.ArgumentParser(prog=f"python -m bench.{name}", description=doc.strip().split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.set_defaults(sections=sections, render=None)
    ap.add_argument("--quick", action="store_true", help=quick)
    if report:
        ap.add_argument("--json", action="store_true", help="JSON on stdout (tables go to stderr)")
        ap.add_argument("--markdown", metavar="FILE", help="also write the tables as markdown to FILE")
        ap.add_argument("--render", metavar="JSON", help="print markdown tables of a saved --json run; "
                                                         "runs nothing")
    if workdir:
        ap.add_argument("--dir", help="parent of the temporary work dir (default: the checkout, so its disk)")
    if sections:
        ap.add_argument("--only", help=f"comma-separated sections among {','.join(sections)}")
    return ap


def parse(ap: argparse.ArgumentParser, argv: "list[str] | None") -> argparse.Namespace:
    """``ap.parse_args(argv)`` with ``args.sections`` set from ``--only`` (all
    when not given; an unknown one is an argparse error)."""
    args = ap.parse_args(argv)
    every = ap.get_default("sections")
    if getattr(args, "only", None):
        args.sections = tuple(s.strip() for s in args.only.split(","))
        if set(args.sections) - set(every):
            ap.error(f"--only takes {','.join(every)}")
    return args


def main(args: argparse.Namespace, name: str, run: Callable[[argparse.Namespace, str, Console], dict],
         tables: Callable[[dict], list], title: "Callable[[dict], str] | None" = None) -> int:
    """Run a bench: ``--render`` prints a saved run's tables; otherwise
    ``run(args, workdir, err)`` in a fresh ``.bench-<name>-*`` work dir, then
    ``emit`` with ``title(results)`` (default: ``headline``) above the tables."""
    if args.render:
        print(tables_markdown(tables(json.loads(Path(args.render).read_text()))))
        return 0
    err = stderr_console()
    results = run_in_workdir(args, f".bench-{name}-", run, err)
    emit(args, results, err, (title or (lambda r: headline(name, r)))(results), tables(results))
    return 0


# -- console -------------------------------------------------------------------------------
def stderr_console() -> Console:
    err = Console(stderr=True)
    if not err.is_terminal:
        err.width = max(err.width, 200)
    return err


def progress_bar(err: Console, label_width: int) -> Progress:
    """A transient progress bar on stderr: label, bar, done/total, elapsed."""
    return Progress(TextColumn(f"{{task.description:<{label_width}}}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=True)


def progress_log(stream=None) -> Callable[[str], None]:
    """A ``log(msg)`` printing ``[  12.3s] msg`` (time since now) to stderr."""
    t0 = time.perf_counter()

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - t0:6.1f}s] {msg}", file=stream or sys.stderr, flush=True)

    return log


def headline(name: str, results: dict) -> str:
    """The first line of a bench report: what ran, where, how long."""
    env = results["environment"]
    return (f"[bold]logbroker {name} bench[/] {env['date']}  {env['nproc']} cpu, {env['ram_gib']} GiB RAM, "
            f"disk: {env['disk']}  python {env['python']}  elapsed {results['elapsed_s']} s")


# -- work dir ------------------------------------------------------------------------------
def run_in_workdir(args, prefix: str, run: Callable, err: Console) -> dict:
    """``run(args, workdir, err)`` in a fresh work dir; adds ``elapsed_s``."""
    parent = os.path.abspath(args.dir or ROOT)
    os.makedirs(parent, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix=prefix, dir=parent)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the finally below cleans up
    started = time.perf_counter()
    try:
        results = run(args, workdir, err)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    return results


# -- tables and output ---------------------------------------------------------------------
def fmt_s(s: dict, digits: int = 1) -> str:
    """A summary (``stats.summary``) as ``median (min–max)``."""
    return f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f}–{s['max']:,.{digits}f})"


def table(title: str, columns: tuple, rows: list[tuple], justify: str = "right") -> Table:
    t = Table(title=title)
    for c in columns:
        t.add_column(c, justify=justify)
    for row in rows:
        t.add_row(*row)
    return t


def targets_table(targets: list[dict], title: str = "Targets", measured: str = "measured",
                  ratio: bool = False) -> Table:
    """The targets check: one row per ``{"target", "measured", "met"[, "ratio"]}``."""
    columns = ("target", measured) + (("ratio",) if ratio else ()) + ("met",)
    return table(title, columns, [(t["target"], t["measured"]) + ((f"{t['ratio']:.2f}",) if ratio else ())
                                  + ("yes" if t["met"] else "NO",) for t in targets], justify="left")


def tables_markdown(made: list[Table]) -> str:
    """Rich tables as GitHub markdown (for docs/benchmarks.md)."""
    parts = []
    for made_table in made:
        cols = made_table.columns
        parts.append(f"**{made_table.title}**\n")
        parts.append("| " + " | ".join(str(c.header) for c in cols) + " |")
        parts.append("|" + "|".join("---:" if c.justify == "right" else "---" for c in cols) + "|")
        for i in range(made_table.row_count):
            parts.append("| " + " | ".join(str(c._cells[i]) for c in cols) + " |")
        parts.append("")
    return "\n".join(parts)


def emit(args, results: dict, err: Console, headline: "str | None", tables: list) -> None:
    """Tables on stdout (stderr with ``--json``), markdown file, JSON."""
    out = err if args.json else Console()
    if not out.is_terminal:
        out.width = max(out.width, 200)
    if headline:
        out.print(headline)
    for made in tables:
        out.print(made)
    if args.markdown:
        Path(args.markdown).write_text(tables_markdown(tables))
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        sys.stdout.write("\n")
