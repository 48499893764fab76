"""The sync ``Producer``: ``send()`` appends in the caller's thread, one I/O
thread (an asyncio loop, shared code with ``logbroker.aio.Producer``) sends.

See docs/client.md for the threading model and why it is built this way.
"""

from __future__ import annotations

import threading
import time

from ..errors import ClientClosedError, RequestTimedOutError, UnknownTopicOrPartitionError
from .accumulator import Accumulator
from .link import BrokerLink, ClientOptions
from .handles import RecordHandle, ThreadSignal
from .loop_thread import LoopThread
from .metadata import partition_counts
from .partitioner import RoundRobin, partition_for_key
from .sender import Sender
from .settings import ProducerSettings


def as_bytes(data, what: str) -> "bytes | None":
    """``bytes``/``bytearray``/``memoryview`` -> bytes; ``str`` is refused
    (encode it yourself: the broker stores bytes)."""
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, bytearray, memoryview or None, "
                    f"not {type(data).__name__}")


def client_options(bootstrap, client_id: str, request_timeout_ms: int,
                   connect_timeout_ms: int) -> ClientOptions:
    return ClientOptions.make(bootstrap, client_id=client_id,
                              request_timeout=request_timeout_ms / 1000,
                              connect_timeout=connect_timeout_ms / 1000)


class ProducerBase:
    """Settings, partition choice and bookkeeping common to both producers."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, acks="all", linger_ms: float = 0,
                 batch_size: int = 1 << 20, idempotent: "bool | None" = None,
                 client_id: str = "logbroker-producer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, **settings) -> None:
        self.settings = ProducerSettings.make(acks=acks, idempotent=idempotent,
                                              linger_ms=linger_ms, batch_size=batch_size,
                                              **settings)
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms)
        self._counts: dict[str, int] = {}
        self._rr = RoundRobin()
        self._closed = False

    def _check_partition(self, topic: str, partition: int, count: int) -> None:
        if type(partition) is not int or not 0 <= partition < count:
            raise UnknownTopicOrPartitionError(
                f"{topic}[{partition}]: the topic has {count} partition(s)")


class Producer(ProducerBase):
    """Sends records to the broker in batches (sync API, thread-safe).

    ``Producer(bootstrap="127.0.0.1:9555", acks="all", linger_ms=0,
    batch_size=1 MiB, idempotent=None, ...)``

    - ``acks``: ``"all"`` (default: acknowledged once fsynced), ``1``
      (written), ``0`` (no response; offsets are -1).
    - ``linger_ms``: how long a batch may wait for more records. 0 (default):
      send at once when nothing is in flight; records arriving while
      requests are in flight wait for the next response (natural batching).
    - ``batch_size``: bytes per partition batch; a full batch is sent at once.
    - ``idempotent``: default on with acks="all": retries never duplicate.
    - ``max_in_flight`` (5) requests per connection; ``buffer_memory``
      (8 MiB) of unacknowledged batches, beyond which ``send`` blocks up to
      ``max_block_ms`` (60 s) and then raises ``RequestTimedOutError``;
      ``max_request_size`` (16 MiB) bounds a request and a record;
      ``delivery_timeout_ms`` (120 s): a record not acknowledged by then
      fails; ``retry_backoff_ms`` (100); ``auto_create_topics`` (True).
    - ``request_timeout_ms`` (30 s), ``connect_timeout_ms`` (5 s), ``client_id``.

    Use as a context manager, or call ``close()``.
    """

    def __init__(self, bootstrap="127.0.0.1:9555", **kwargs) -> None:
        super().__init__(bootstrap, **kwargs)
        self._io = LoopThread("logbroker-producer-io")
        self._link = BrokerLink(self.options)
        self._acc = Accumulator(self.settings, ThreadSignal)
        self._sender = Sender(self._acc, self._link, self.settings, self._io.loop,
                              in_loop=self._io.is_loop_thread, threadsafe=True)
        self._space = threading.Condition()
        self._space_waiters = 0
        self._space_gen = 0
        self._sender.on_space = self._space_freed

    def send(self, topic: str, value, key=None, headers=None, partition: "int | None" = None,
             timestamp_ms: "int | None" = None) -> RecordHandle:
        """Queue one record; returns its ``RecordHandle`` at once.

        ``value``/``key``: bytes (or bytearray/memoryview) or None;
        ``headers``: ``[(str, bytes | None), ...]`` or a dict;
        ``partition``: None = by key hash (keyed) or round-robin (unkeyed);
        ``timestamp_ms``: default now. Blocks only to learn a topic's
        partition count (first send to it) or while ``buffer_memory`` is full,
        at most ``max_block_ms``. Raises ``TypeError``, ``RecordTooLargeError``,
        ``UnknownTopicOrPartitionError``, ``BrokerUnavailableError``,
        ``RequestTimedOutError`` (blocked too long), ``ClientClosedError``.
        Delivery errors are raised by the handle's ``result()``.
        """
        if self._closed:
            raise ClientClosedError("the producer is closed")
        if value is not None and value.__class__ is not bytes:
            value = as_bytes(value, "value")
        if key is not None and key.__class__ is not bytes:
            key = as_bytes(key, "key")
        count = self._counts.get(topic)
        if count is None:
            count = self._load_topic(topic)
        if partition is None:
            if count == 1:
                partition = 0
            else:
                partition = self._rr(count) if key is None else partition_for_key(key, count)
        elif partition.__class__ is not int or not 0 <= partition < count:
            self._check_partition(topic, partition, count)
        handle = self._acc.append(topic, partition, value, key, headers, timestamp_ms)
        if handle is None:
            handle = self._append_blocking(topic, partition, value, key, headers, timestamp_ms)
        return handle

    def _load_topic(self, topic: str) -> int:
        if not isinstance(topic, str):
            raise TypeError(f"topic must be str, not {type(topic).__name__}")
        timeout = self.settings.max_block_ms / 1000
        counts = self._io.run(partition_counts(self._link, [topic], timeout=timeout,
                                               auto_create=self.settings.auto_create_topics))
        self._counts[topic] = counts[topic]
        return counts[topic]

    def _append_blocking(self, *args) -> RecordHandle:
        """Wait for ``buffer_memory`` space. The condition is never held while
        appending (append may drain, and a drain frees space under the
        sender's mutex): a generation counter catches frees in between."""
        deadline = time.monotonic() + self.settings.max_block_ms / 1000
        while True:
            seen = self._space_gen
            handle = self._acc.append(*args)
            if handle is not None:
                return handle
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOutError("buffer_memory stayed full for max_block_ms")
            if self._closed:
                raise ClientClosedError("the producer is closed")
            with self._space:
                self._space_waiters += 1
                try:
                    if seen == self._space_gen:
                        self._space.wait(min(left, 0.5))
                finally:
                    self._space_waiters -= 1

    def _space_freed(self) -> None:
        self._space_gen += 1
        if self._space_waiters:
            with self._space:
                self._space.notify_all()

    def partitions_for(self, topic: str) -> int:
        """The topic's partition count (blocks on first use; cached)."""
        return self._counts.get(topic) or self._load_topic(topic)

    def flush(self, timeout: "float | None" = None) -> None:
        """Send every queued record now and wait until each is acknowledged or
        failed (failures are reported by the handles, not here). Raises
        ``TimeoutError`` if ``timeout`` s pass first."""
        if self._closed:
            return
        batches = self._acc.seal_all()
        self._sender.drain()
        deadline = None if timeout is None else time.monotonic() + timeout
        for b in batches:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not b.done and not b.signal.wait(left):
                raise TimeoutError(f"flush: records still unacknowledged after {timeout} s")

    def close(self, timeout: "float | None" = None) -> None:
        """Flush (up to ``timeout`` s), then stop: records still undelivered
        fail with ``ClientClosedError``. Idempotent."""
        if self._closed:
            return
        try:
            self.flush(timeout)
        except TimeoutError:
            pass
        finally:
            self._closed = True
            try:
                self._io.run(self._shutdown(), 10)
            except (TimeoutError, ClientClosedError):
                pass
            self._io.stop()
            self._space_freed()

    async def _shutdown(self) -> None:
        await self._sender.aclose()
        await self._link.aclose()

    def __enter__(self) -> "Producer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
