"""Prometheus metrics of a broker and of a cluster."""
