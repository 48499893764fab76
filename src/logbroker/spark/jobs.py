"""Shared plumbing of the ``tools/*.py`` spark-submit jobs.

Arguments are checked (data dir, topics) before a SparkSession starts, so a
wrong path or an unknown topic fails in a second with one clear line.
"""

from __future__ import annotations

import argparse
import os
import sys

from .plan import SparkSourceError, list_partitions, parse_options


class JobError(SystemExit):
    pass


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--data-dir", required=True, help="logbroker data dir (read only)")
    p.add_argument("--out", default=None, help="output dir (default: print only)")
    p.add_argument("--topic", action="append", default=None,
                   help="topic to read (repeatable; default: every topic)")
    p.add_argument("--master", default=None, help="Spark master when not set by spark-submit")
    return p


def fail(message: str) -> "JobError":
    print(f"error: {message}", file=sys.stderr)
    return JobError(2)


def check(args) -> list[str]:
    """The topics to read; exits with a clear message on a wrong path or topic."""
    topics = args.topic
    try:
        opts = {"path": args.data_dir, "subscribePattern": ".*"}
        parse_options(opts)
        available = list_partitions(os.path.abspath(args.data_dir))
    except SparkSourceError as exc:
        raise fail(exc.message) from None
    if not available:
        raise fail(f"no topics in {args.data_dir}")
    if topics:
        unknown = [t for t in topics if t not in available]
        if unknown:
            raise fail(f"unknown topic(s) {', '.join(unknown)} in {args.data_dir} "
                       f"(topics: {', '.join(available)})")
        return topics
    return list(available)


def session(args, app: str):
    """A SparkSession (the one spark-submit configured, or local[*]) with
    the JVM connector's jar when it is built (under spark-submit the driver
    has started already: pass ``--jars`` there, docs/spark.md)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from .connector import with_connector

    builder = SparkSession.builder.appName(app).config("spark.ui.showConsoleProgress", "false")
    if args.master:
        builder = builder.master(args.master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        builder = with_connector(builder.master("local[*]"))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def run_job(args, app: str, body) -> int:
    """Check ``args`` (exits on a wrong path or topic), start a session named
    ``app``, call ``body(spark, args, topics)`` and stop the session; 0."""
    topics = check(args)
    spark = session(args, app)
    try:
        body(spark, args, topics)
    finally:
        spark.stop()
    return 0


def record_bytes():
    """A record's size as the jobs count it: key + value bytes, a null one 0."""
    from pyspark.sql import functions as F

    return F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))


def load(spark, args, topics: list[str], **options):
    from . import register

    register(spark)
    reader = spark.read.format("logbroker").option("path", os.path.abspath(args.data_dir))
    reader = reader.option("subscribe", ",".join(topics))
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def print_table(rows: list[dict], columns: list[str], limit: int = 20) -> None:
    """A short fixed-width table of ``rows`` on stdout."""
    shown = [[_cell(r.get(c)) for c in columns] for r in rows[:limit]]
    widths = [max([len(c)] + [len(r[i]) for r in shown]) for i, c in enumerate(columns)]
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in shown:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)))
    if len(rows) > limit:
        print(f"... {len(rows) - limit} more rows")


def _cell(v) -> str:
    if isinstance(v, float):
        return f"{v:.2f}"
    if isinstance(v, (bytes, bytearray)):
        text = bytes(v).decode("utf-8", "backslashreplace")
        return text if len(text) <= 40 else text[:37] + "..."
    return "" if v is None else str(v)
