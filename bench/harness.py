"""What every bench entry point does around its measurements: a temporary
work dir on the checkout's disk (or ``--dir``) that is always removed, also
on SIGTERM; the console for progress (stderr); and the output: tables for
people, markdown with ``--markdown``, JSON on stdout with ``--json``."""

from __future__ import annotations

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
from storage_common import ROOT


def pick_sections(ap, only: "str | None", sections: tuple) -> tuple:
    """The ``--only a,b`` sections of a bench (all when not given); an
    unknown one is an argparse error."""
    picked = sections if not only else tuple(s.strip() for s in only.split(","))
    if set(picked) - set(sections):
        ap.error(f"--only takes {','.join(sections)}")
    return picked


def stderr_console() -> Console:
    err = Console(stderr=True)
    if not err.is_terminal:
        err.width = max(err.width, 200)
    return err


def headline(name: str, results: dict) -> str:
    """The first line of a bench report: what ran, where, how long."""
    env = results["environment"]
    return (f"[bold]logbroker {name} bench[/] {env['date']}  {env['nproc']} cpu, {env['ram_gib']} GiB RAM, "
            f"disk: {env['disk']}  python {env['python']}  elapsed {results['elapsed_s']} s")


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


def emit(args, results: dict, err: Console, headline: "str | None", tables: list,
         markdown: Callable[[], str]) -> None:
    """Tables on stdout (stderr with ``--json``), markdown file, JSON."""
    out = err if args.json else Console()
    if not out.is_terminal:
        out.width = max(out.width, 200)
    if headline:
        out.print(headline)
    for made in tables:
        out.print(made)
    if args.markdown:
        Path(args.markdown).write_text(markdown())
    if args.json:
        json.dump(results, sys.stdout, indent=1)
        sys.stdout.write("\n")
