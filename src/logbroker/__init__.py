"""logbroker: a durable, log-structured message broker."""

__version__ = "0.1.0"

# Client classes are exported lazily (PEP 562): ``import logbroker.records``
# in a Spark executor must not import the clients (and asyncio) with it.
_CLIENT_EXPORTS = ("Admin", "Consumer", "ConsumerRecord", "NewTopic", "Producer",
                   "RecordHandle", "RecordMetadata")

__all__ = ["__version__", *_CLIENT_EXPORTS]


def __getattr__(name: str):
    if name in _CLIENT_EXPORTS:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module 'logbroker' has no attribute {name!r}")
