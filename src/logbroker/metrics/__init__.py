"""Prometheus metrics: request and traffic counters, collectors of broker
state, the exporter (docs/metrics.md)."""
