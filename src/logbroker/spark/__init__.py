"""Spark integration: the ``logbroker`` PySpark data source (extra ``spark``).

Imports only the records and storage layers (never the client or asyncio).
"""

from __future__ import annotations


def register(spark) -> None:
    """Register format ``logbroker`` on ``spark`` (a SparkSession)."""
    from .source import LogbrokerDataSource

    spark.dataSource.register(LogbrokerDataSource)


def __getattr__(name: str):
    if name in ("LogbrokerDataSource", "LogbrokerReader", "LogbrokerPartition", "spark_schema"):
        from . import source

        return getattr(source, name)
    raise AttributeError(name)


__all__ = ["register", "LogbrokerDataSource", "LogbrokerReader", "LogbrokerPartition",
           "spark_schema"]
