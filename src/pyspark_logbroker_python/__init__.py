"""PySpark's auto-registration hook for format ``logbroker_python``: the
Python source under a second name, so the JVM connector (which owns
``logbroker`` when its jar is on the classpath) can hand it batch writes
(docs/spark.md, "The JVM connector")."""

from logbroker.spark.source import LogbrokerPythonSource as DefaultSource

__all__ = ["DefaultSource"]
