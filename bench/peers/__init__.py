"""Peer benchmark (issue 5, first cut): logbroker next to Redis Streams and
NATS JetStream on 127.0.0.1, same workloads, one run. Run with
``python -m bench.peers [--quick] [--no-install]`` from the checkout root."""
