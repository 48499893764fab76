"""Spark data source benchmark (issue 4): ``python -m bench.spark``; the streaming
source ``python -m bench.spark.stream`` and the sink ``python -m bench.spark.sink``."""
