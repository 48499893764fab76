"""Consumer groups: the coordinator's state machine and groups against real brokers (src/logbroker/coordinator)."""
