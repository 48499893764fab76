"""asyncio twins of ``logbroker.Producer``, ``Consumer`` and ``Admin``.

Same constructor arguments, same semantics and errors (docs/client.md);
methods that talk to the broker are coroutines, and the clients run on the
caller's event loop (no thread). Create and use each client inside one
running loop; ``async with`` closes it.

    async with Producer("127.0.0.1:9555") as producer:
        meta = await producer.send_and_wait("logs", b"hello")
        handle = await producer.send("logs", b"more")   # queued
        await handle                                     # -> RecordMetadata
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import AsyncIterator, Iterable

from .client.accumulator import Accumulator
from .client.admin_core import AdminCore
from .client.link import BrokerLink
from .client.consumer import ConsumerBase
from .client.fetcher import Fetcher
from .client.handles import LoopSignal, RecordHandle, RecordMetadata
from .client.metadata import partition_counts
from .client.partitioner import partition_for_key
from .client.producer import ProducerBase, as_bytes, client_options
from .client.records import ConsumerRecord
from .client.sender import Sender
from .errors import ClientClosedError, RequestTimedOutError
from .protocol import messages as m

__all__ = ["Admin", "Consumer", "Producer"]


class Producer(ProducerBase):
    """asyncio twin of ``logbroker.Producer`` (same arguments)."""

    def __init__(self, bootstrap="127.0.0.1:9555", **kwargs) -> None:
        super().__init__(bootstrap, **kwargs)
        self._acc: "Accumulator | None" = None

    def _ensure(self) -> Accumulator:
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if self._acc is None:
            loop = asyncio.get_running_loop()
            self._link = BrokerLink(self.options)
            self._acc = Accumulator(self.settings, partial(LoopSignal, loop))
            self._sender = Sender(self._acc, self._link, self.settings, loop,
                                  in_loop=lambda: True, threadsafe=False)
            self._space = asyncio.Event()
            self._sender.on_space = self._space.set
        return self._acc

    async def start(self) -> None:
        """Connect now (optional: ``send`` connects lazily); raises
        ``BrokerUnavailableError`` if the broker cannot be reached."""
        self._ensure()
        await self._link.connection()

    async def send(self, topic: str, value, key=None, headers=None,
                   partition: "int | None" = None,
                   timestamp_ms: "int | None" = None) -> RecordHandle:
        """Queue one record; returns its handle (``await handle`` ->
        ``RecordMetadata``). Waits only for a topic's metadata (first send)
        or for buffer space; raises as the sync ``send`` does."""
        acc = self._acc or self._ensure()
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if value is not None and value.__class__ is not bytes:
            value = as_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = as_bytes(key, "key")
        count = self._counts.get(topic)
        if count is None:
            count = await self._load_topic(topic)
        if partition is None:
            if count == 1:
                partition = 0
            else:
                partition = self._rr(count) if key is None else partition_for_key(key, count)
        elif partition.__class__ is not int or not 0 <= partition < count:
            self._check_partition(topic, partition, count)
        handle = acc.append(topic, partition, value, key, headers, timestamp_ms)
        if handle is None:
            handle = await self._append_waiting(topic, partition, value, key, headers,
                                                timestamp_ms)
        return handle

    async def send_and_wait(self, topic: str, value, key=None, headers=None,
                            partition: "int | None" = None,
                            timestamp_ms: "int | None" = None) -> RecordMetadata:
        """``send`` and wait for the acknowledgement."""
        return await (await self.send(topic, value, key, headers, partition, timestamp_ms))

    async def _load_topic(self, topic: str) -> int:
        if not isinstance(topic, str):
            raise TypeError(f"topic must be str, not {type(topic).__name__}")
        counts = await partition_counts(self._link, [topic], auto_create=self.settings.auto_create_topics,
                                        timeout=self.settings.max_block_ms / 1000)
        self._counts[topic] = counts[topic]
        return counts[topic]

    async def _append_waiting(self, *args) -> RecordHandle:
        deadline = time.monotonic() + self.settings.max_block_ms / 1000
        while True:
            self._space.clear()
            handle = self._acc.append(*args)
            if handle is not None:
                return handle
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOutError("buffer_memory stayed full for max_block_ms")
            try:
                async with asyncio.timeout(min(left, 0.5)):
                    await self._space.wait()
            except TimeoutError:
                pass
            if self._closed:
                raise ClientClosedError("the producer is closed")

    async def partitions_for(self, topic: str) -> int:
        self._ensure()
        return self._counts.get(topic) or await self._load_topic(topic)

    async def flush(self, timeout: "float | None" = None) -> None:
        """Send everything queued and wait for every outcome; raises
        ``TimeoutError`` after ``timeout`` s (delivery continues)."""
        if self._acc is None or self._closed:
            return
        batches = self._acc.seal_all()
        self._sender.drain()
        waits = [b.signal.future() for b in batches if not b.done]
        if waits:
            done, pending = await asyncio.wait(waits, timeout=timeout)
            if pending:
                raise TimeoutError(f"flush: records still unacknowledged after {timeout} s")

    async def close(self, timeout: "float | None" = None) -> None:
        """Flush (up to ``timeout`` s), then stop; undelivered records fail
        with ``ClientClosedError``. Idempotent."""
        if self._closed:
            return
        try:
            await self.flush(timeout)
        except TimeoutError:
            pass
        finally:
            self._closed = True
            if self._acc is not None:
                await self._sender.aclose()
                await self._link.aclose()
                self._space.set()

    async def __aenter__(self) -> "Producer":
        self._ensure()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class Consumer(ConsumerBase):
    """asyncio twin of ``logbroker.Consumer`` (same arguments). ``seek`` and
    ``assign`` are plain methods; everything that may talk to the broker is
    a coroutine; ``async for record in consumer`` iterates."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, group: "str | None" = None,
                 client_id: str = "logbroker-consumer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, **settings) -> None:
        super().__init__(bootstrap, group, client_id, request_timeout_ms, connect_timeout_ms,
                         **settings)
        self._data = asyncio.Event()
        self._fetcher = Fetcher(self.settings, self._buffer, BrokerLink(self.options),
                                BrokerLink(self.options), self._data.set)

    def _poke(self) -> None:
        self._check_open()
        self._fetcher.poke(restart=True)

    def assign(self, partitions: Iterable) -> None:
        self._check_open()
        self._fetcher.subscription = ()
        self._buffer.assign([(t, int(p)) for t, p in partitions])
        self._poke()

    async def subscribe(self, topics: Iterable[str]) -> None:
        self._check_open()
        await self._fetcher.subscribe([topics] if isinstance(topics, str) else list(topics))
        self._poke()

    def subscription(self) -> tuple:
        return self._fetcher.subscription

    def seek(self, topic: str, partition: int, offset: int) -> None:
        self._check_open()
        self._buffer.seek(topic, partition, offset)
        self._poke()

    async def seek_to_beginning(self, partitions=None) -> None:
        await self._seek_to_async(self._fetcher, {tp: m.EARLIEST for tp in self._targets(partitions)})
        self._poke()

    async def seek_to_end(self, partitions=None) -> None:
        await self._seek_to_async(self._fetcher, {tp: m.LATEST for tp in self._targets(partitions)})
        self._poke()

    async def seek_to_timestamp(self, timestamp_ms: int, partitions=None) -> None:
        if type(timestamp_ms) is not int or timestamp_ms < 0:
            raise ValueError("timestamp_ms must be an int >= 0")
        await self._seek_to_async(self._fetcher, {tp: timestamp_ms
                                                  for tp in self._targets(partitions)})
        self._poke()

    async def position(self, topic: str, partition: int) -> int:
        self._check_open()
        return await self._position_async(self._fetcher, topic, partition)

    async def commit(self, offsets: "dict | None" = None) -> None:
        self._check_open()
        await self._commit_async(self._fetcher, offsets)

    async def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        self._check_open()
        return await self._committed_async(self._fetcher, topic, partition)

    async def poll(self, timeout: float = 1.0,
                   max_records: "int | None" = None) -> list[ConsumerRecord]:
        self._check_open()
        limit = max_records or self.settings.max_poll_records
        deadline = time.monotonic() + max(timeout, 0.0)
        if self._fetcher.waiting:
            self._fetcher.poke()
        while True:
            self._data.clear()
            records = self._poll_step(limit, deadline, self._fetcher)
            if records is not None:
                if self._fetcher.waiting and self._buffer.buffered < self.settings.prefetch_bytes:
                    self._fetcher.poke()
                return records
            try:
                async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                    await self._data.wait()
            except TimeoutError:
                pass

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        idle = self.settings.consumer_timeout_ms
        last = time.monotonic()
        while not self._closed:
            records = await self.poll(0.5 if idle is None else min(0.5, idle / 1000))
            if records:
                last = time.monotonic()
                for record in records:
                    yield record
            elif idle is not None and time.monotonic() - last >= idle / 1000:
                return

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._fetcher.aclose()
        self._buffer.clear()

    async def __aenter__(self) -> "Consumer":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()


class Admin:
    """asyncio twin of ``logbroker.Admin``: the same methods, as coroutines."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, client_id: str = "logbroker-admin",
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000) -> None:
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms)
        self._core = AdminCore(BrokerLink(self.options))
        for name in ("create_topics", "delete_topics", "list_topics", "describe_topics",
                     "describe_cluster", "list_groups", "describe_groups", "delete_groups",
                     "commit_offsets", "fetch_offsets", "list_offsets"):
            setattr(self, name, getattr(self._core, name))

    async def create_topic(self, name: str, partitions: int = 1, configs: "dict | None" = None,
                           *, exist_ok: bool = False) -> bool:
        from .errors import TopicAlreadyExistsError

        try:
            await self._core.create_topics([(name, partitions, configs or {})])
        except TopicAlreadyExistsError:
            if not exist_ok:
                raise
            return False
        return True

    async def close(self) -> None:
        await self._core.link.aclose()

    async def __aenter__(self) -> "Admin":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
