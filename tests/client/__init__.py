"""The clients: producer, consumer, admin, routing, assignors (src/logbroker/client)."""
