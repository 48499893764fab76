"""The sync ``Consumer``: a fetch loop on a background I/O thread prefetches;
``poll()`` decodes (CRC check included) in the caller's thread. The logic
is ``ConsumerCore``'s, shared with ``logbroker.aio.Consumer``
(consumer/aio.py); this shell only blocks where that one awaits. What it
does on a rebalance and on close is the core's sequences of steps
(``applying``, ``leaving``), performed here with ``_drive``: the same in
both shells (docs/client.md, "Closing and failures")."""

from __future__ import annotations

from typing import Iterable, Iterator

from ..loop_thread import LoopThread
from ..waiting import IdleTimer, SyncShell, ThreadWakeup
from .core import REBALANCE, ConsumerCore
from .records import ConsumerRecord
from .shell import ConsumerShell


class Consumer(ConsumerShell, SyncShell):
    """Reads records by offset (sync API; use from one thread at a time).

    ``Consumer(bootstrap="127.0.0.1:9555", group=None, auto_offset_reset="latest",
    fetch_max_wait_ms=500, fetch_max_bytes=1 MiB, max_partition_fetch_bytes=8 MiB,
    max_poll_records=10000, prefetch_bytes=32 MiB, check_crcs=True,
    consumer_timeout_ms=None, request_timeout_ms=30000, connect_timeout_ms=5000)``

    With a ``group``, ``subscribe()`` joins the group: its members share the
    subscribed partitions (``session_timeout_ms``, ``heartbeat_interval_ms``,
    ``max_poll_interval_ms``, ``group_instance_id``,
    ``partition_assignment_strategy``, ``enable_auto_commit``,
    ``auto_commit_interval_ms``, ``metadata_max_age_ms``: docs/client.md,
    Consumer groups); ``assign()`` reads what it names and uses the group
    only to store offsets. A partition without a position starts at the group's
    committed offset, else at ``auto_offset_reset`` ("latest", "earliest" or
    "none" = raise ``OffsetOutOfRangeError``); the same policy applies when a
    fetch position falls out of the log (retention). Calls that talk to the
    broker block for at most ``request_timeout_ms`` and raise
    ``BrokerUnavailableError`` / ``RequestTimedOutError`` / the broker's
    error; the consumer reconnects by itself. A bad argument raises at once
    (``TypeError``, or ``InvalidTopicError`` / ``InvalidRequestError`` /
    ``InvalidGroupError``), changing nothing.

    ``isolation_level``: "read_uncommitted" (default, as Kafka's) returns
    every record up to the high watermark, those of open and aborted
    transactions too; "read_committed" stops at the last stable offset and
    drops aborted transactions' records. Transaction markers (control
    batches) are never returned, in either level (docs/client.md).
    """

    def __init__(self, bootstrap="127.0.0.1:9555", **settings) -> None:
        self._wakeup = ThreadWakeup()
        super().__init__(ConsumerCore(bootstrap, wakeup=self._wakeup, schedule=self._call_soon,
                                      **settings))
        self._timeout = self.options.request_timeout + self.options.connect_timeout
        self._io = LoopThread("logbroker-consumer-io")

    def _call_soon(self, fn, *args) -> None:
        self._io.call_soon(fn, *args)

    # -- what to read (assign, subscription, assignment, highwater, metrics: shell.py) ---------
    def subscribe(self, topics=None, *, pattern=None, on_assign=None, on_revoke=None,
                  on_lost=None) -> None:
        """Follow ``topics`` (a name or a list of names) or ``pattern`` (a
        ``re`` pattern or its text, matching whole topic names; topics
        created later join at the next metadata refresh). With a ``group``
        the consumer joins it and reads the partitions the group assigns it
        (docs/client.md, Consumer groups): this returns at once, the join
        proceeds in the background, and ``on_assign`` / ``on_revoke`` /
        ``on_lost`` are called from ``poll`` with the partitions that change
        hands (plain functions here; the asyncio consumer also awaits
        coroutine functions). Without a group it reads every partition of
        the topics (blocks for one Metadata request). An empty list
        unsubscribes (and leaves the group)."""
        self._run(self._core.subscribe(topics, pattern=pattern, on_assign=on_assign,
                                       on_revoke=on_revoke, on_lost=on_lost))

    # -- positions (seek: shell.py) -----------------------------------------------------------
    def seek_to_beginning(self, partitions: "Iterable | None" = None) -> None:
        """Seek (all assigned, or the given) partitions to their log start,
        lazily (Kafka's rule): no request here; the next ``poll`` or
        ``position()`` asks the leaders (one ListOffsets per leader for
        every partition to resolve)."""
        self._run(self._core.seek_to_beginning(partitions))

    def seek_to_end(self, partitions: "Iterable | None" = None) -> None:
        """Seek to the high watermark as of the next ``poll`` or
        ``position()`` (lazily, as ``seek_to_beginning``): records produced
        after that are read."""
        self._run(self._core.seek_to_end(partitions))

    def seek_to_timestamp(self, timestamp_ms: int, partitions: "Iterable | None" = None) -> None:
        """Seek to the earliest record with timestamp >= ``timestamp_ms``, or
        to the end where there is none. Blocks for one ListOffsets request
        per leader (two where some partition has no record that late)."""
        self._run(self._core.seek_to_timestamp(timestamp_ms, partitions))

    def position(self, topic: str, partition: int) -> int:
        """The offset of the next record ``poll`` returns; resolves it first
        (committed offset / reset policy) if unknown, which may block."""
        known = self._core.known_position(topic, partition)
        return known if known is not None else self._run(self._core.position(topic, partition))

    # -- offsets of the group ---------------------------------------------------------------------
    def commit(self, offsets: "dict | None" = None) -> None:
        """Store offsets for the group: by default the position of every
        assigned partition (the next record to read), else ``{(topic,
        partition): offset or (offset, metadata)}``. Blocks until durable
        (at most ``request_timeout_ms``); raises the first partition's
        error. A member's commit carries its generation: when the group
        rebalanced without it, ``IllegalGenerationError`` /
        ``UnknownMemberIdError`` (nothing committed; the member rejoins);
        while the group waits for its leader's assignment,
        ``RebalanceInProgressError`` (poll, then commit again)."""
        self._run(self._core.commit(offsets))

    def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        """The group's committed offset of one partition (None if none), or
        with no arguments ``{(topic, partition): offset}`` for the assigned ones."""
        return self._run(self._core.committed(topic, partition))

    # -- polling ----------------------------------------------------------------------------------
    def poll(self, timeout: float = 1.0, max_records: "int | None" = None) -> list[ConsumerRecord]:
        """Records in offset order per partition, waiting up to ``timeout`` s
        for some; ``[]`` if none came. Raises ``CorruptRecordError`` (bad CRC
        or batch; names topic, partition, offset), a partition's error (e.g.
        ``PartitionOfflineError``), or ``BrokerUnavailableError`` when the
        broker stayed unreachable for the whole call. A group's partition
        changes are applied first (callbacks called here, in order); a
        callback's exception is raised once they all are."""
        call = self._core.poll_start(timeout, max_records)
        while True:
            records = self._core.poll_step(call)
            if records is REBALANCE:
                self._drive(self._core.applying())
            elif records is None:
                self._wakeup.wait(call.seen, call.deadline)
            else:
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
        """Stop fetching and close connections. A group member first commits
        its positions (``enable_auto_commit``), calls ``on_revoke`` with its
        partitions and leaves the group (a static member only commits: its
        partitions wait for it until its session times out); a failure of
        any of these is logged and closing goes on: ``close`` does not raise
        for them. Idempotent."""
        if self._core.closed:
            return
        try:
            self._drive(self._core.leaving())
        finally:
            self._core.mark_closed()
            self._stop(self._core.aclose())
