"""Where a durable round trip's time goes (issue 12): ``python -m bench.latency``."""
