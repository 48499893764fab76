"""Log compaction throughput (issue 11): ``python -m bench.compaction``."""
