"""The one SparkSession recipe of the Spark benches: ``local[2]``, no UI, the
driver bound to 127.0.0.1, executors running this interpreter, the
``logbroker`` format registered, the JVM connector's jar on the classpath
(built first when a JDK is present)."""

from __future__ import annotations

import os
import sys


def local_session(app: str):
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from logbroker.spark import connector

    builder = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.ui.showConsoleProgress", "false").config("spark.driver.memory", "2g")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1"))
    spark = connector.with_connector(builder, build_first=True).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    import logbroker.spark

    logbroker.spark.register(spark)
    return spark
