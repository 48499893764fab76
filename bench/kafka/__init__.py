"""The Kafka listener bench (issue 15): ``python -m bench.kafka``."""
