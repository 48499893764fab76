"""A streaming pipeline: per-minute records and bytes per key of a topic,
written to a result topic (through the logbroker sink) and to Parquet.

    spark-submit tools/pipeline.py --bootstrap 127.0.0.1:9555 --topic orders \\
        --out-topic orders-per-minute --parquet ./pipeline/parquet \\
        --checkpoint ./pipeline/checkpoint [--watermark "1 minute"] \\
        [--trigger "5 seconds" | --available-now] [--data-dir DIR]

Reads ``--topic`` as a stream (from the brokers at ``--bootstrap``, or from a
broker's ``--data-dir``), groups records by one-minute event-time windows
(the record timestamp) and key, and emits each window once the watermark
(the newest timestamp seen minus ``--watermark``) has passed its end. Each
micro-batch's rows go to ``--out-topic`` (key = the record key, value = JSON
``{"minute", "key", "records", "bytes"}``) and to ``--parquet/batch=<id>``
(rewritten whole if Spark runs the batch again after a crash, so the
Parquet output holds each window once; the topic, like Spark's Kafka sink,
is at-least-once). ``--checkpoint`` makes a restarted job resume where it
stopped. ``--available-now`` processes what is there and exits.
"""

from __future__ import annotations

import argparse
import os

RESULT_COLUMNS = ["minute", "key", "records", "bytes"]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bootstrap", required=True,
                   help="brokers to write the result topic to (and to read from, without --data-dir)")
    p.add_argument("--topic", required=True, help="topic to read")
    p.add_argument("--out-topic", required=True, help="topic for the per-minute rows")
    p.add_argument("--parquet", required=True, help="dir for the per-minute rows as Parquet")
    p.add_argument("--checkpoint", required=True, help="Spark checkpoint dir (resume point)")
    p.add_argument("--data-dir", default=None, help="read a broker's data dir instead of --bootstrap")
    p.add_argument("--watermark", default="1 minute",
                   help='how late a record may be and still count (default "1 minute")')
    when = p.add_mutually_exclusive_group()
    when.add_argument("--trigger", default="5 seconds", help='micro-batch interval (default "5 seconds")')
    when.add_argument("--available-now", action="store_true",
                      help="process what the topic holds now, then exit")
    p.add_argument("--starting-offsets", default="earliest",
                   help="where a new job starts: earliest (default), latest or JSON")
    p.add_argument("--state-partitions", type=int, default=4,
                   help="partitions of the windowed counts (Spark's shuffle partitions; default 4: "
                        "Spark's own 200 make a small stream slow). Fixed by a job's first run")
    p.add_argument("--master", default=None, help="Spark master when not set by spark-submit")
    args = p.parse_args(argv)
    if not 1 <= args.state_partitions <= 10_000:
        p.error("--state-partitions must be in 1..10000")
    if args.data_dir is not None and not os.path.isdir(args.data_dir):
        p.error(f"--data-dir {args.data_dir!r} is not a directory")
    return args


def per_minute(df, watermark: str):
    """Windows of one minute per key: records and bytes (key + value)."""
    from pyspark.sql import functions as F

    size = F.coalesce(F.length("key"), F.lit(0)) + F.coalesce(F.length("value"), F.lit(0))
    return (df.withWatermark("timestamp", watermark)
            .groupBy(F.window("timestamp", "1 minute").alias("w"), "key")
            .agg(F.count(F.lit(1)).alias("records"), F.sum(size).alias("bytes"))
            .select(F.col("w.start").alias("minute"), "key", "records", "bytes"))


def write_batch(args):
    """The ``foreachBatch`` function: one micro-batch to Parquet and to the topic."""
    from pyspark.sql import functions as F

    def run(batch_df, batch_id: int) -> None:
        rows = batch_df.cache()
        try:
            if rows.isEmpty():
                return
            rows.write.mode("overwrite").parquet(os.path.join(args.parquet, f"batch={batch_id}"))
            minute = F.date_format("minute", "yyyy-MM-dd'T'HH:mm:ss'Z'")
            value = F.to_json(F.struct(minute.alias("minute"),
                                       F.col("key").cast("string").alias("key"),
                                       "records", "bytes"))
            (rows.select("key", value.alias("value")).write.format("logbroker").mode("append")
             .option("bootstrap", args.bootstrap).option("topic", args.out_topic).save())
        finally:
            rows.unpersist()

    return run


def main(argv=None) -> int:
    args = parse_args(argv)
    from logbroker.spark import register
    from logbroker.spark.jobs import session

    spark = session(args, "logbroker-pipeline")
    spark.conf.set("spark.sql.session.timeZone", "UTC")  # minutes as UTC in the JSON rows
    spark.conf.set("spark.sql.shuffle.partitions", str(args.state_partitions))
    register(spark)
    try:
        reader = spark.readStream.format("logbroker").option("subscribe", args.topic) \
            .option("startingOffsets", args.starting_offsets)
        reader = reader.option("path", os.path.abspath(args.data_dir)) if args.data_dir \
            else reader.option("bootstrap", args.bootstrap)
        writer = (per_minute(reader.load(), args.watermark).writeStream.outputMode("append")
                  .foreachBatch(write_batch(args)).option("checkpointLocation", args.checkpoint))
        writer = writer.trigger(availableNow=True) if args.available_now \
            else writer.trigger(processingTime=args.trigger)
        query = writer.start()
        print(f"pipeline: {args.topic} -> {args.out_topic} and {args.parquet} "
              f"({'available now' if args.available_now else 'every ' + args.trigger})", flush=True)
        query.awaitTermination()
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
