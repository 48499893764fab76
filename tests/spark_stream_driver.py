"""A Spark driver for tests/test_spark_stream.py: streams a topic of a data
dir into Parquet files (Spark's file sink: exactly-once through its
``_spark_metadata`` log) with a checkpoint, so a test can kill it and start
it again on the same checkpoint.

    python tests/spark_stream_driver.py DATA_DIR CHECKPOINT OUT (run|available-now)

``run``: a 200 ms processing-time trigger, 25 offsets per trigger, until
killed. ``available-now``: Trigger.AvailableNow, then exit 0.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main() -> int:
    data, checkpoint, out, mode = sys.argv[1:5]
    spark = (SparkSession.builder.master("local[2]").appName("logbroker-stream-test")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    stream = (spark.readStream.format("logbroker").option("path", data)
              .option("subscribe", "orders").option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", "25").load()
              .select("partition", "offset", "value"))
    writer = (stream.writeStream.format("parquet").option("path", out)
              .option("checkpointLocation", checkpoint))
    if mode == "available-now":
        writer.trigger(availableNow=True).start().awaitTermination()
    else:
        writer.trigger(processingTime="200 milliseconds").start().awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
