"""The clients' cluster-aware network layer: connections (plain and TLS),
links, routing and metadata, backoff, quota throttles, SASL."""
