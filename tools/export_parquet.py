"""Export topics to Parquet, partitioned by topic and partition, with the
Kafka-source columns (key/value binary, or UTF-8 strings with --strings).

    spark-submit tools/export_parquet.py --data-dir ./data --out ./export [--topic orders]
"""

from __future__ import annotations

from logbroker.spark.jobs import check, fail, load, parser, print_table, session


def main(argv=None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--strings", action="store_true", help="decode key and value as UTF-8")
    p.add_argument("--headers", action="store_true", help="include the headers column")
    args = p.parse_args(argv)
    if not args.out:
        raise fail("--out is required for export_parquet.py")
    topics = check(args)
    spark = session(args, "logbroker-export-parquet")
    try:
        df = load(spark, args, topics, includeHeaders=str(args.headers).lower())
        if args.strings:
            df = df.withColumn("key", df["key"].cast("string")).withColumn(
                "value", df["value"].cast("string"))
        df.write.mode("overwrite").partitionBy("topic", "partition").parquet(args.out)
        written = spark.read.parquet(args.out).groupBy("topic", "partition").count() \
            .orderBy("topic", "partition").collect()
        print_table([r.asDict() for r in written], ["topic", "partition", "count"])
        print(f"wrote {args.out}")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
