"""The asyncio ``Producer`` (``logbroker.aio.Producer``): the sync
``Producer``'s twin over the same ``ProducerCore`` (producer/core.py), on
the caller's event loop (no thread); it awaits where the sync one blocks.

    async with Producer("127.0.0.1:9555") as producer:
        meta = await producer.send_and_wait("logs", b"hello")
        handle = await producer.send("logs", b"more")   # queued
        await handle                                     # -> RecordMetadata
"""

from __future__ import annotations

import asyncio
from functools import partial

from ..waiting import AsyncShell
from .core import ProducerCore
from .handles import LoopSignal, RecordHandle, RecordMetadata


def _in_loop() -> bool:
    return True  # an asyncio client is only used on its loop


class Producer(AsyncShell):
    """asyncio twin of ``logbroker.Producer`` (same arguments)."""

    def __init__(self, bootstrap="127.0.0.1:9555", **kwargs) -> None:
        self._core = ProducerCore(bootstrap, **kwargs)
        self.settings, self.options = self._core.settings, self._core.options

    def _ensure(self) -> ProducerCore:
        """The core, bound to the running loop on first use."""
        core = self._core
        core.check_open()
        if core.acc is None:
            loop = asyncio.get_running_loop()
            core.start(loop, partial(LoopSignal, loop), in_loop=_in_loop, threadsafe=False)
        return core

    async def start(self) -> None:
        """Connect now (optional: ``send`` connects lazily); raises
        ``BrokerUnavailableError`` if the broker cannot be reached."""
        await self._ensure().router.control.connection()

    async def send(self, topic: str, value, key=None, headers=None,
                   partition: "int | None" = None,
                   timestamp_ms: "int | None" = None) -> RecordHandle:
        """Queue one record; returns its handle (``await handle`` ->
        ``RecordMetadata``). Waits only for a topic's metadata (first send)
        or for buffer space; raises as the sync ``send`` does."""
        core = self._core if self._core.acc is not None else self._ensure()
        handle = core.append(topic, value, key, headers, partition, timestamp_ms)
        if handle is None:
            handle = await core.send_slow(topic, value, key, headers, partition, timestamp_ms)
        return handle

    async def send_and_wait(self, topic: str, value, key=None, headers=None,
                            partition: "int | None" = None,
                            timestamp_ms: "int | None" = None) -> RecordMetadata:
        """``send`` and wait for the acknowledgement."""
        return await (await self.send(topic, value, key, headers, partition, timestamp_ms))

    async def partitions_for(self, topic: str) -> int:
        """The topic's partition count (one Metadata request on first use; cached)."""
        return await self._ensure().partitions_for(topic)

    def metrics(self) -> dict:
        """Counters of what this producer sent (plain, as the sync twin's)."""
        return self._core.metrics()

    # -- transactions: the sync twin's contracts (producer/sync.py) ------------------------------
    async def init_transactions(self, timeout: "float | None" = None) -> None:
        """Once, before the first transaction (see the sync ``init_transactions``)."""
        await self._ensure().transactions().init(timeout)

    def begin_transaction(self) -> None:
        """Open a transaction (local, not a coroutine)."""
        self._ensure().transactions().begin()

    async def send_offsets_to_transaction(self, offsets: dict, group_metadata,
                                          timeout: "float | None" = None) -> None:
        """The consumer group's offsets, committed with the transaction."""
        await self._ensure().transactions().send_offsets(offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: "float | None" = None) -> None:
        """Flush, then commit (see the sync ``commit_transaction``)."""
        await self._ensure().transactions().commit(timeout)

    async def abort_transaction(self, timeout: "float | None" = None) -> None:
        """Abort (see the sync ``abort_transaction``)."""
        await self._ensure().transactions().abort(timeout)

    async def flush(self, timeout: "float | None" = None) -> None:
        """Send everything queued and wait for every outcome; raises
        ``TimeoutError`` after ``timeout`` s (delivery continues)."""
        batches = self._core.flush_start(timeout)
        if batches:
            _, pending = await asyncio.wait([b.signal.future() for b in batches],
                                            timeout=timeout)
            if pending:
                raise self._core.flush_timed_out(timeout)

    async def close(self, timeout: "float | None" = None) -> None:
        """Flush (up to ``timeout`` s), then stop; undelivered records fail
        with ``ClientClosedError``. Idempotent."""
        if self._core.closed:
            return
        try:
            await self.flush(timeout)
        except TimeoutError:
            pass
        finally:
            await self._core.shutdown()

    async def __aenter__(self) -> "Producer":
        self._ensure()
        return self
