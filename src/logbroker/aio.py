"""asyncio twins of ``logbroker.Producer``, ``Consumer`` and ``Admin``.

Same constructor arguments, same semantics and errors (docs/client.md);
methods that talk to the broker are coroutines, and the clients run on the
caller's event loop (no thread). Create and use each client inside one
running loop; ``async with`` closes it.

    async with Producer("127.0.0.1:9555") as producer:
        meta = await producer.send_and_wait("logs", b"hello")
        handle = await producer.send("logs", b"more")   # queued
        await handle                                     # -> RecordMetadata

The logic is the client cores' (``client/producer/core.py``,
``client/consumer/core.py``, ``client/admin/core.py``), shared with the sync
clients; the asyncio shells (``client/*/aio.py``, exported here) only await
where those block.
"""

from __future__ import annotations

from .client.admin.aio import Admin
from .client.consumer.aio import Consumer
from .client.producer.aio import Producer

__all__ = ["Admin", "Consumer", "Producer"]
