"""logbroker: a durable, log-structured message broker."""

__version__ = "0.1.0"
