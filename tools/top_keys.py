"""The most frequent keys per topic: records and bytes per key.

    spark-submit tools/top_keys.py --data-dir ./data [--topic orders] [-n 10] [--out DIR]
"""

from __future__ import annotations

import os

from logbroker.spark.jobs import check, load, parser, print_table, session

COLUMNS = ["topic", "key", "records", "bytes", "rank"]


def top_keys(df, n: int):
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    counts = df.groupBy("topic", "key").agg(F.count(F.lit(1)).alias("records"),
                                            F.sum(size).alias("bytes"))
    w = Window.partitionBy("topic").orderBy(F.desc("records"), F.asc("key"))
    return (counts.withColumn("rank", F.row_number().over(w)).where(F.col("rank") <= n)
            .orderBy("topic", "rank").select(*COLUMNS))


def main(argv=None) -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("-n", type=int, default=10, help="keys per topic (default 10)")
    args = p.parse_args(argv)
    topics = check(args)
    spark = session(args, "logbroker-top-keys")
    try:
        result = top_keys(load(spark, args, topics), args.n)
        print_table([r.asDict() for r in result.collect()], COLUMNS, limit=50)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            out = result.withColumn("key", result["key"].cast("string"))
            out.coalesce(1).write.mode("overwrite").option("header", True) \
                .csv(os.path.join(args.out, "top_keys_csv"))
            print(f"wrote {args.out}/top_keys_csv")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
