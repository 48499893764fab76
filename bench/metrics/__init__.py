"""Metrics on vs off (issue 14): ``python -m bench.metrics``."""
