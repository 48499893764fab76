"""The sync ``Consumer``: a fetch loop on a background I/O thread prefetches;
``poll()`` decodes (CRC check included) in the caller's thread. The logic
is ``ConsumerCore``'s, shared with ``logbroker.aio.Consumer``; this shell
only blocks where that one awaits."""

from __future__ import annotations

from typing import Iterator

from .consumer_core import COROUTINES, DIRECT, ConsumerCore
from .loop_thread import LoopThread
from .records import ConsumerRecord
from .waiting import IdleTimer, SyncShell, ThreadWakeup, blocking, direct, forward

class Consumer(SyncShell):
    """Reads records by offset (sync API; use from one thread at a time).

    ``Consumer(bootstrap="127.0.0.1:9555", group=None, auto_offset_reset="latest",
    fetch_max_wait_ms=500, fetch_max_bytes=16 MiB, max_partition_fetch_bytes=8 MiB,
    max_poll_records=10000, prefetch_bytes=32 MiB, check_crcs=True,
    consumer_timeout_ms=None, request_timeout_ms=30000, connect_timeout_ms=5000)``

    ``group`` names where ``commit()`` stores offsets; there is no group
    membership (every consumer reads all partitions it is assigned or
    subscribed to). A partition without a position starts at the group's
    committed offset, else at ``auto_offset_reset`` ("latest", "earliest" or
    "none" = raise ``OffsetOutOfRangeError``); the same policy applies when a
    fetch position falls out of the log (retention). Calls that talk to the
    broker block for at most ``request_timeout_ms`` and raise
    ``BrokerUnavailableError`` / ``RequestTimedOutError`` / the broker's
    error; the consumer reconnects by itself. A bad argument raises at once
    (``TypeError``, or ``InvalidTopicError`` / ``InvalidRequestError`` /
    ``InvalidGroupError``), changing nothing.
    """

    def __init__(self, bootstrap="127.0.0.1:9555", *, group: "str | None" = None,
                 client_id: str = "logbroker-consumer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, **settings) -> None:
        self._wakeup = ThreadWakeup()
        self._core = core = ConsumerCore(bootstrap, group, client_id, request_timeout_ms,
                                         connect_timeout_ms, settings, wakeup=self._wakeup,
                                         schedule=self._call_soon)
        self.settings, self.options = core.settings, core.options
        self._timeout = core.options.request_timeout + core.options.connect_timeout
        self._io = LoopThread("logbroker-consumer-io")

    def _call_soon(self, fn, *args) -> None:
        self._io.call_soon(fn, *args)

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll`` returns; resolves it first
        (committed offset / reset policy) if unknown, which may block."""
        known = self._core.known_position(topic, partition)
        return known if known is not None else self._run(self._core.position(topic, partition))

    def poll(self, timeout: float = 1.0, max_records: "int | None" = None) -> list[ConsumerRecord]:
        """Records in offset order per partition, waiting up to ``timeout`` s
        for some; ``[]`` if none came. Raises ``CorruptRecordError`` (bad CRC
        or batch; names topic, partition, offset), a partition's error (e.g.
        ``PartitionOfflineError``), or ``BrokerUnavailableError`` when the
        broker stayed unreachable for the whole call."""
        call = self._core.poll_start(timeout, max_records)
        while (records := self._core.poll_step(call)) is None:
            self._wakeup.wait(call.seen, call.deadline)
        return records

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever (or until ``consumer_timeout_ms`` passes without
        one, or the consumer is closed); raises as ``poll`` does."""
        idle = IdleTimer(self.settings.consumer_timeout_ms)
        while not self._core.closed:
            records = self.poll(idle.poll_timeout)
            if idle.expired(records):
                return
            yield from records

    def close(self) -> None:
        """Stop fetching and close connections (no commit). Idempotent."""
        if self._core.closed:
            return
        self._core.closed = True
        self._stop(self._core.aclose())
        self._core.buffer.clear()


forward(Consumer, ConsumerCore, DIRECT, direct)
forward(Consumer, ConsumerCore, COROUTINES, blocking)
