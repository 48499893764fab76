"""The sync ``Consumer``: a fetch loop on a background I/O thread prefetches;
``poll()`` decodes (CRC check included) in the caller's thread."""

from __future__ import annotations

import threading
import time
from typing import Iterable, Iterator

from ..errors import ClientClosedError, LogbrokerError
from ..protocol import messages as m
from .link import BrokerLink
from .fetch_buffer import FetchBuffer
from .fetcher import Fetcher
from .loop_thread import LoopThread
from .metadata import part_error
from .producer import client_options
from .records import ConsumerRecord
from .settings import ConsumerSettings

TopicPartition = tuple  # (topic: str, partition: int)


class ConsumerBase:
    """What both consumers share: settings, the buffer, offsets arguments."""

    def __init__(self, bootstrap, group, client_id, request_timeout_ms, connect_timeout_ms,
                 **settings) -> None:
        self.settings = ConsumerSettings(group=group, **settings)
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms)
        self._buffer = FetchBuffer(self.settings.prefetch_bytes)
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    def _targets(self, partitions) -> list:
        tps = list(self._buffer.states) if partitions is None else [tuple(tp) for tp in partitions]
        for tp in tps:
            self._buffer.state(*tp)  # raises ValueError if not assigned
        return tps

    def _commit_message(self, offsets) -> m.CommitOffsets:
        if self.settings.group is None:
            raise ValueError("commit needs a consumer group (Consumer(group=...))")
        if offsets is None:
            with self._buffer.lock:
                offsets = {tp: st.position for tp, st in self._buffer.states.items()
                           if st.position is not None}
        entries = []
        for (topic, partition), value in offsets.items():
            off, meta = value if isinstance(value, tuple) else (value, "")
            entries.append((topic, partition, off, meta))
        return m.CommitOffsets(group=self.settings.group, offsets=tuple(entries))

    async def _seek_to_async(self, fetcher: Fetcher, specs: dict) -> None:
        found = await fetcher.list_offsets(specs)
        ends = [tp for tp, (offset, _) in found.items() if offset < 0]
        if ends:  # no record that late: the end
            found.update(await fetcher.list_offsets({tp: m.LATEST for tp in ends}))
        for (topic, partition), (offset, _) in found.items():
            self._buffer.seek(topic, partition, offset)

    async def _commit_async(self, fetcher: Fetcher, offsets) -> None:
        msg = self._commit_message(offsets)
        if msg.offsets:
            resp = await fetcher.control.call(msg)
            for topic, partition, err, message in resp.parts:
                if err:
                    raise part_error(err, message, topic, partition)

    async def _committed_async(self, fetcher: Fetcher, topic, partition):
        if self.settings.group is None:
            raise ValueError("committed() needs a consumer group (Consumer(group=...))")
        tps = [(topic, partition)] if topic is not None else list(self._buffer.states)
        found = await fetcher.committed(tps) if tps else {}
        out = {tp: (v[0] if v[0] >= 0 else None) for tp, v in found.items()}
        return out.get((topic, partition)) if topic is not None else out

    async def _position_async(self, fetcher: Fetcher, topic: str, partition: int) -> int:
        st = self._buffer.state(topic, partition)
        if st.position is None:
            await fetcher.resolve_positions([st])
            if st.error is not None:
                raise st.error
        return st.position

    def _poll_step(self, limit: int, deadline: float, fetcher: Fetcher) -> "list | None":
        """One non-blocking poll attempt: records, ``[]`` when the deadline
        passed, None to wait; raises what ``poll`` raises."""
        err = self._buffer.errors() or fetcher.fatal
        if err is not None:
            fetcher.fatal = None
            raise err
        records = self._buffer.take(limit, self.settings.check_crcs)
        if records:
            return records
        if deadline - time.monotonic() <= 0:
            error = fetcher.error
            if error is not None:
                raise type(error)(error.message)
            return []
        return None

    def assignment(self) -> set:
        """The partitions this consumer reads, as ``{(topic, partition)}``."""
        return set(self._buffer.states)

    def highwater(self, topic: str, partition: int) -> "int | None":
        """The high watermark the last fetch reported (None before one)."""
        hw = self._buffer.state(topic, partition).high_watermark
        return None if hw < 0 else hw


class Consumer(ConsumerBase):
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
    error; the consumer reconnects by itself.
    """

    def __init__(self, bootstrap="127.0.0.1:9555", *, group: "str | None" = None,
                 client_id: str = "logbroker-consumer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, **settings) -> None:
        super().__init__(bootstrap, group, client_id, request_timeout_ms, connect_timeout_ms,
                         **settings)
        self._io = LoopThread("logbroker-consumer-io")
        self._data = threading.Condition()
        self._data_gen = 0
        self._fetcher = Fetcher(self.settings, self._buffer, BrokerLink(self.options),
                                BrokerLink(self.options), self._notify)
        self._timeout = self.options.request_timeout + self.options.connect_timeout

    def _notify(self) -> None:
        with self._data:
            self._data_gen += 1
            self._data.notify_all()

    def _run(self, coro):
        self._check_open()
        return self._io.run(coro, self._timeout)

    def _poke(self, restart: bool = True) -> None:
        """Wake the fetch loop; ``restart`` abandons a long poll in flight
        (after assign/seek, so the new positions are fetched at once)."""
        self._io.call_soon(self._fetcher.poke, restart)

    # -- assignment ---------------------------------------------------------------------------------
    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Read exactly these ``(topic, partition)`` pairs (replaces any
        subscription); positions of partitions kept are kept."""
        self._check_open()
        self._fetcher.subscription = ()
        self._buffer.assign([(t, int(p)) for t, p in partitions])
        self._poke()

    def subscribe(self, topics: Iterable[str]) -> None:
        """Read every partition of ``topics``; partitions (and topics created
        later) are picked up by a metadata refresh. Blocks for one metadata
        request."""
        if isinstance(topics, str):
            topics = [topics]
        self._run(self._fetcher.subscribe(list(topics)))
        self._poke()

    def subscription(self) -> tuple:
        return self._fetcher.subscription

    # -- positions ----------------------------------------------------------------------------------
    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Next ``poll`` returns records from ``offset`` (never blocks). An
        offset past the log end or below its start is handled by
        ``auto_offset_reset`` at the next fetch."""
        self._check_open()
        self._buffer.seek(topic, partition, offset)
        self._poke()

    def _seek_to(self, specs: dict) -> None:
        self._run(self._seek_to_async(self._fetcher, specs))
        self._poke()

    def seek_to_beginning(self, partitions: "Iterable[TopicPartition] | None" = None) -> None:
        """Seek (all assigned, or the given) partitions to their log start.
        Blocks for one ListOffsets request."""
        self._seek_to({tp: m.EARLIEST for tp in self._targets(partitions)})

    def seek_to_end(self, partitions: "Iterable[TopicPartition] | None" = None) -> None:
        """Seek to the high watermark: only records produced later are read."""
        self._seek_to({tp: m.LATEST for tp in self._targets(partitions)})

    def seek_to_timestamp(self, timestamp_ms: int,
                          partitions: "Iterable[TopicPartition] | None" = None) -> None:
        """Seek to the earliest record with timestamp >= ``timestamp_ms``, or
        to the end where there is none."""
        if type(timestamp_ms) is not int or timestamp_ms < 0:
            raise ValueError("timestamp_ms must be an int >= 0")
        self._seek_to({tp: timestamp_ms for tp in self._targets(partitions)})

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll`` returns; resolves it first
        (committed offset / reset policy) if unknown, which may block."""
        st = self._buffer.state(topic, partition)
        if st.position is not None:
            return st.position
        return self._run(self._position_async(self._fetcher, topic, partition))

    # -- offsets of the group -------------------------------------------------------------------
    def commit(self, offsets: "dict | None" = None) -> None:
        """Store offsets for the group: by default the position of every
        assigned partition (the next record to read), else ``{(topic,
        partition): offset or (offset, metadata)}``. Blocks until durable;
        raises the first partition's error."""
        self._run(self._commit_async(self._fetcher, offsets))

    def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        """The group's committed offset of one partition (None if none), or
        with no arguments ``{(topic, partition): offset}`` for the assigned ones."""
        return self._run(self._committed_async(self._fetcher, topic, partition))

    # -- reading ------------------------------------------------------------------------------------
    def poll(self, timeout: float = 1.0, max_records: "int | None" = None) -> list[ConsumerRecord]:
        """Records in offset order per partition, waiting up to ``timeout`` s
        for some; ``[]`` if none came. Raises ``CorruptRecordError`` (bad CRC
        or batch; names topic, partition, offset), a partition's error (e.g.
        ``PartitionOfflineError``), or ``BrokerUnavailableError`` when the
        broker stayed unreachable for the whole call."""
        self._check_open()
        limit = max_records or self.settings.max_poll_records
        deadline = time.monotonic() + max(timeout, 0.0)
        if self._fetcher.waiting:
            self._poke(False)
        while True:
            seen = self._data_gen
            records = self._poll_step(limit, deadline, self._fetcher)
            if records is not None:
                if self._fetcher.waiting and self._buffer.buffered < self.settings.prefetch_bytes:
                    self._poke(False)
                return records
            with self._data:
                if seen == self._data_gen:
                    self._data.wait(max(deadline - time.monotonic(), 0))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        """Records forever (or until ``consumer_timeout_ms`` passes without
        one, or the consumer is closed); raises as ``poll`` does."""
        idle = self.settings.consumer_timeout_ms
        last = time.monotonic()
        while not self._closed:
            records = self.poll(0.5 if idle is None else min(0.5, idle / 1000))
            if records:
                last = time.monotonic()
                yield from records
            elif idle is not None and time.monotonic() - last >= idle / 1000:
                return

    def close(self) -> None:
        """Stop fetching and close connections (no commit). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._io.run(self._fetcher.aclose(), 10)
        except (TimeoutError, LogbrokerError):
            pass
        self._io.stop()
        self._buffer.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
