"""Spark integration: the ``logbroker`` PySpark data source (extra ``spark``).

Reading a data dir imports only the records and storage layers; reading
over the protocol (remote.py) and the sink (sink.py) import the client,
lazily, when a query uses them.
"""

from __future__ import annotations


def register(spark) -> None:
    """Register format ``logbroker`` (and ``logbroker_python``, the same
    Python source the JVM connector writes through) on ``spark``."""
    from .source import LogbrokerDataSource, LogbrokerPythonSource

    spark.dataSource.register(LogbrokerDataSource)
    spark.dataSource.register(LogbrokerPythonSource)


def __getattr__(name: str):
    if name in ("LogbrokerDataSource", "LogbrokerReader", "LogbrokerPartition", "spark_schema"):
        from . import source

        return getattr(source, name)
    raise AttributeError(name)


__all__ = ["register", "LogbrokerDataSource", "LogbrokerReader", "LogbrokerPartition",
           "spark_schema"]
