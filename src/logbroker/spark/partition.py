"""What Spark ships to a task: one planned offset range."""

from __future__ import annotations

from pyspark.sql.datasource import InputPartition

from .options import Split


class LogbrokerPartition(InputPartition):
    """One planned offset range (a ``Split``); plain data, so it pickles."""

    def __init__(self, split: Split) -> None:
        super().__init__(split)
        self.split = split

    def __repr__(self) -> str:
        s = self.split
        return f"LogbrokerPartition({s.topic}-{s.partition} [{s.start}, {s.end}))"
