"""Smoke runs of the benchmarks (marker bench: make test-bench) and the peer report."""
