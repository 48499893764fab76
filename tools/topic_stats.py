"""Per topic and partition: records, bytes, offsets, timestamps, span, records per second.

With --out: CSV + Parquet, and PNG charts of records and bytes per time
bucket, the bucket fitted to the data's span (1 s ... 1 day).

    spark-submit tools/topic_stats.py --data-dir ./data [--out ./stats] [--topic orders]
"""

from __future__ import annotations

import os
from datetime import UTC, datetime

from logbroker.spark.buckets import choose_bucket, format_span
from logbroker.spark.charts import save, timeline_figure
from logbroker.spark.jobs import load, parser, print_table, record_bytes, run_job

COLUMNS = ["topic", "partition", "records", "bytes", "first_offset", "last_offset",
           "first_timestamp", "last_timestamp", "span_seconds", "records_per_second"]
PRINTED = ["topic", "partition", "records", "bytes", "first_offset", "last_offset", "span",
           "records/s"]
TOPIC_COLUMNS = ["topic", "partitions", "records", "bytes", "first (UTC)", "last (UTC)",
                 "span", "records/s"]


def stats(df):
    """One row per topic and partition (COLUMNS). ``span_seconds``: last minus
    first timestamp; ``records_per_second``: records / span, null when the
    span is 0 (every record at one timestamp)."""
    from pyspark.sql import functions as F

    span = (F.unix_micros("last_timestamp") - F.unix_micros("first_timestamp")) / 1e6
    return (df.groupBy("topic", "partition")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(record_bytes()).alias("bytes"),
                 F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.min("timestamp").alias("first_timestamp"),
                 F.max("timestamp").alias("last_timestamp"))
            .withColumn("span_seconds", span)
            .withColumn("records_per_second",
                        F.when(F.col("span_seconds") > 0, F.col("records") / F.col("span_seconds")))
            .orderBy("topic", "partition").select(*COLUMNS))


def collect(result) -> list[dict]:
    """The rows of ``stats`` as dicts, with ``first_us``/``last_us`` added (the
    timestamps as epoch microseconds, free of the driver's time zone)."""
    from pyspark.sql import functions as F

    return [r.asDict() for r in result.withColumn("first_us", F.unix_micros("first_timestamp"))
            .withColumn("last_us", F.unix_micros("last_timestamp")).collect()]


def per_topic(rows: list[dict]) -> list[dict]:
    """``rows`` of ``collect`` summed per topic (TOPIC_COLUMNS): the span from
    its first to its last timestamp and the mean records per second over it
    ("-" for a span of 0)."""
    out = []
    for topic in sorted({r["topic"] for r in rows}):
        mine = [r for r in rows if r["topic"] == topic]
        first, last = min(r["first_us"] for r in mine), max(r["last_us"] for r in mine)
        records, span = sum(r["records"] for r in mine), (last - first) / 1e6
        out.append({"topic": topic, "partitions": len(mine), "records": records,
                    "bytes": sum(r["bytes"] for r in mine), "first (UTC)": _utc(first),
                    "last (UTC)": _utc(last), "span": format_span(span),
                    "records/s": _rate(records, span)})
    return out


def _rate(records: int, span: float) -> str:
    """records / span to 2 decimals, or 3 significant digits below 1 ("0.00386");
    "-" for a span of 0."""
    if span <= 0:
        return "-"
    rate = records / span
    return f"{rate:,.2f}" if rate >= 1 else f"{rate:.3g}"


def per_bucket(df, bucket) -> list[dict]:
    """Records and bytes per topic and ``bucket``: rows of "topic", "start"
    (epoch seconds, a multiple of ``bucket.seconds``), "records", "bytes";
    only buckets with records. Aggregated by Spark: one row per topic and bucket
    reaches the driver."""
    from pyspark.sql import functions as F

    start = F.floor(F.unix_micros("timestamp") / F.lit(bucket.seconds * 1_000_000)) * bucket.seconds
    return [r.asDict() for r in df.groupBy("topic", start.cast("long").alias("start"))
            .agg(F.count(F.lit(1)).alias("records"), F.sum(record_bytes()).alias("bytes"))
            .collect()]


def charts(df, rows: list[dict]) -> dict:
    """The figures of records and bytes per bucket over the span of ``rows``
    (from ``collect``; not empty), by file name."""
    first = min(r["first_us"] for r in rows) / 1e6
    last = max(r["last_us"] for r in rows) / 1e6
    bucket = choose_bucket(first, last)
    buckets = per_bucket(df, bucket)
    n = bucket.count(first, last)
    print(f"charts: per {bucket.name}, {n} bucket{'s' if n > 1 else ''} over {format_span(last - first)}")
    return {f"{value}_per_bucket.png": timeline_figure(buckets, bucket, first, last, value)
            for value in ("records", "bytes")}


def run(spark, args, topics: list[str]) -> tuple[list[dict], dict]:
    """Print the tables; with ``args.out`` write CSV, Parquet and the charts.
    Returns the rows of ``collect`` and the figures written, by file name."""
    df = load(spark, args, topics)
    result = stats(df).cache()
    try:
        rows = collect(result)
        print_table(per_topic(rows), TOPIC_COLUMNS)
        print()
        print_table([{**r, "span": format_span(r["span_seconds"]),
                      "records/s": _rate(r["records"], r["span_seconds"])} for r in rows], PRINTED)
        figures = {}
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            result.coalesce(1).write.mode("overwrite").option("header", True) \
                .csv(os.path.join(args.out, "topic_stats_csv"))
            result.write.mode("overwrite").parquet(os.path.join(args.out, "topic_stats.parquet"))
            figures = charts(df, rows) if rows else {}
            save(figures, args.out)
            print(f"wrote {args.out}: {', '.join(['topic_stats_csv', 'topic_stats.parquet', *figures])}")
    finally:
        result.unpersist()
    return rows, figures


def _utc(us: int) -> str:
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def main(argv=None) -> int:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    return run_job(args, "logbroker-topic-stats", run)


if __name__ == "__main__":
    raise SystemExit(main())
