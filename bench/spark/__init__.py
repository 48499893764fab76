"""Spark data source benchmark (issue 4): ``python -m bench.spark``."""
