"""A Spark driver for tests/spark/test_stream.py: streams a topic of a data
dir into Parquet files (Spark's file sink: exactly-once through its
``_spark_metadata`` log) with a checkpoint, so a test can kill it and resume
on the same checkpoint.

    python tests/support/spark_stream_driver.py DATA_DIR CHECKPOINT OUT

A 200 ms processing-time trigger, 25 offsets per trigger, until killed. The
test resumes the same query (``writer``) in its own session with
Trigger.AvailableNow.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def writer(spark, data: str, checkpoint: str, out: str, per_trigger: int = 25):
    """The streaming query of the driver and of its resumption (``per_trigger``
    offsets at most per micro-batch): a DataStreamWriter to start with a trigger."""
    stream = (spark.readStream.format("logbroker").option("path", data)
              .option("subscribe", "orders").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", str(per_trigger)).load()
              .select("partition", "offset", "value"))
    return (stream.writeStream.format("parquet").option("path", out)
            .option("checkpointLocation", checkpoint))


def main() -> int:
    data, checkpoint, out = sys.argv[1:4]
    spark = (SparkSession.builder.master("local[2]").appName("logbroker-stream-test")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    writer(spark, data, checkpoint, out).trigger(processingTime="200 milliseconds").start().awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
