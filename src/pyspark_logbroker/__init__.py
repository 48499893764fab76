"""PySpark's auto-registration hook for format ``logbroker``.

Spark (>= 4.0) imports every top-level module named ``pyspark_*`` that has a
``DefaultSource`` and registers it under ``DefaultSource.name()``, so after
``pip install logbroker[spark]`` ``spark.read.format("logbroker")`` and
``CREATE TEMPORARY VIEW v USING logbroker OPTIONS (...)`` work unregistered.
"""

from logbroker.spark.source import LogbrokerDataSource as DefaultSource

__all__ = ["DefaultSource"]
