"""The most frequent keys per topic: records, bytes and share of the topic per key.

With --out: CSV, and a PNG chart of the top keys per topic (horizontal bars).

    spark-submit tools/top_keys.py --data-dir ./data [--topic orders] [-n 10] [--out DIR]
"""

from __future__ import annotations

import os

from logbroker.spark.charts import save, top_keys_figure
from logbroker.spark.jobs import load, parser, print_table, record_bytes, run_job

COLUMNS = ["topic", "key", "records", "bytes", "share", "rank", "topic_records"]


def top_keys(df, n: int):
    """The ``n`` keys with most records per topic (ties by key), COLUMNS:
    ``share`` is the key's records / ``topic_records`` (all of the topic's)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    counts = df.groupBy("topic", "key").agg(F.count(F.lit(1)).alias("records"),
                                            F.sum(record_bytes()).alias("bytes"))
    ranked = Window.partitionBy("topic").orderBy(F.desc("records"), F.asc("key"))
    topic = Window.partitionBy("topic")
    return (counts.withColumn("topic_records", F.sum("records").over(topic))
            .withColumn("share", F.col("records") / F.col("topic_records"))
            .withColumn("rank", F.row_number().over(ranked)).where(F.col("rank") <= n)
            .orderBy("topic", "rank").select(*COLUMNS))


def run(spark, args, topics: list[str]) -> tuple[list[dict], dict]:
    """Print the table; with ``args.out`` write the CSV and the chart.
    Returns the rows and the figures written, by file name."""
    result = top_keys(load(spark, args, topics), args.n).cache()
    try:
        rows = [r.asDict() for r in result.collect()]
        print_table([{**r, "share": f"{r['share']:.1%}"} for r in rows], COLUMNS[:-1], limit=50)
        figures = write(result, rows, args.out) if args.out else {}
    finally:
        result.unpersist()
    return rows, figures


def write(result, rows: list[dict], out: str) -> dict:
    """``result`` as CSV (keys as strings) and the chart of ``rows`` into
    ``out``; the figures written, by file name."""
    os.makedirs(out, exist_ok=True)
    result.withColumn("key", result["key"].cast("string")).coalesce(1).write.mode("overwrite") \
        .option("header", True).csv(os.path.join(out, "top_keys_csv"))
    figures = {"top_keys.png": top_keys_figure(rows)} if rows else {}
    save(figures, out)
    print(f"wrote {out}: {', '.join(['top_keys_csv', *figures])}")
    return figures


def arguments():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=10, help="keys per topic (default 10)")
    return p


def main(argv=None) -> int:
    return run_job(arguments().parse_args(argv), "logbroker-top-keys", run)


if __name__ == "__main__":
    raise SystemExit(main())
