"""Per topic and partition: records, bytes, first/last offset and timestamp,
records per minute. Writes CSV + Parquet and a PNG chart when --out is given.

    spark-submit tools/topic_stats.py --data-dir ./data [--out ./stats] [--topic orders]
"""

from __future__ import annotations

import os

from logbroker.spark.jobs import check, load, parser, print_table, session

COLUMNS = ["topic", "partition", "records", "bytes", "first_offset", "last_offset",
           "first_timestamp", "last_timestamp", "records_per_minute"]


def stats(df):
    from pyspark.sql import functions as F

    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    seconds = F.col("last_timestamp").cast("double") - F.col("first_timestamp").cast("double")
    minutes = seconds / 60
    return (df.groupBy("topic", "partition")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(size).alias("bytes"),
                 F.min("offset").alias("first_offset"), F.max("offset").alias("last_offset"),
                 F.min("timestamp").alias("first_timestamp"),
                 F.max("timestamp").alias("last_timestamp"))
            .withColumn("records_per_minute",
                        F.col("records") / F.greatest(minutes, F.lit(1.0)))
            .orderBy("topic", "partition").select(*COLUMNS))


def per_minute(df):
    from pyspark.sql import functions as F

    return (df.groupBy("topic", F.date_trunc("minute", "timestamp").alias("minute"))
            .count().orderBy("minute").collect())


def chart(rows, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4))
    for topic in sorted({r["topic"] for r in rows}):
        mine = [r for r in rows if r["topic"] == topic]
        ax.plot([r["minute"] for r in mine], [r["count"] for r in mine], marker=".", label=topic)
    ax.set_xlabel("minute (UTC)")
    ax.set_ylabel("records per minute")
    ax.set_title("logbroker: records per minute")
    ax.legend()
    fig.autofmt_xdate()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    topics = check(args)
    spark = session(args, "logbroker-topic-stats")
    try:
        df = load(spark, args, topics)
        result = stats(df)
        rows = [r.asDict() for r in result.collect()]
        print_table(rows, COLUMNS)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            result.coalesce(1).write.mode("overwrite").option("header", True) \
                .csv(os.path.join(args.out, "topic_stats_csv"))
            result.write.mode("overwrite").parquet(os.path.join(args.out, "topic_stats.parquet"))
            png = os.path.join(args.out, "records_per_minute.png")
            chart([r.asDict() for r in per_minute(df)], png)
            print(f"wrote {args.out}/topic_stats_csv, topic_stats.parquet, records_per_minute.png")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
