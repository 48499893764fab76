"""The Kafka codec and the Kafka listener, single node and cluster (src/logbroker/kafka)."""
