"""The sync ``Consumer``: a fetch loop on a background I/O thread prefetches;
``poll()`` decodes (CRC check included) in the caller's thread. The logic
is ``ConsumerCore``'s, shared with ``logbroker.aio.Consumer``; this shell
only blocks where that one awaits."""

from __future__ import annotations

import logging
from typing import Iterator

from ...errors import LogbrokerError
from .core import COROUTINES, DIRECT, REBALANCE, ConsumerCore
from ..loop_thread import LoopThread
from .records import ConsumerRecord
from ..waiting import IdleTimer, SyncShell, ThreadWakeup, blocking, direct, forward

log = logging.getLogger("logbroker.client.group")

class Consumer(SyncShell):
    """Reads records by offset (sync API; use from one thread at a time).

    ``Consumer(bootstrap="127.0.0.1:9555", group=None, auto_offset_reset="latest",
    fetch_max_wait_ms=500, fetch_max_bytes=16 MiB, max_partition_fetch_bytes=8 MiB,
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
        while True:
            records = self._core.poll_step(call)
            if records is REBALANCE:
                self._apply_changes()
            elif records is None:
                self._wakeup.wait(call.seen, call.deadline)
            else:
                return records

    def _apply_changes(self) -> None:
        """Apply the group's partition changes in this thread (rebalance.py):
        commit, callback, then drop; or add, then callback. Raises the first
        callback's exception once every change is applied."""
        group, error = self._core.group, None
        while (item := group.changes.take()) is not None:
            change, done = item
            try:
                entries = group.before(change)
                if entries:
                    self._run(group.committing(entries, "commit before revoking"))
                fn = group.listener.callback(change.kind)
                if fn is not None:
                    try:
                        fn(sorted(change.partitions))
                    except Exception as exc:  # noqa: BLE001 - the application's, raised below
                        error = error or exc
                group.after(change)
            finally:
                group.changes.done(done)
        if error is not None:
            raise error

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
        partitions wait for it until its session times out). Idempotent."""
        if self._core.closed:
            return
        try:
            self._leave_group()
        finally:
            self._core.closed = True
            self._stop(self._core.aclose())
            self._core.buffer.clear()

    def _leave_group(self) -> None:
        group = self._core.group
        if not group.managed:
            return
        try:
            if self.settings.enable_auto_commit:
                self._run(group.committing(group.positions(), "commit on close"))
            owned = sorted(self._core.buffer.states)
            fn = group.listener.on_revoke
            if owned and fn is not None:  # static members too (Kafka's onLeavePrepare)
                try:
                    fn(owned)
                except Exception:  # noqa: BLE001 - closing goes on
                    log.exception("group %r: on_revoke while closing", self.settings.group)
            self._run(group.stop(leave=True))
        except (LogbrokerError, TimeoutError) as exc:
            log.warning("group %r: leaving on close: %s", self.settings.group, exc)


forward(Consumer, ConsumerCore, DIRECT, direct)
forward(Consumer, ConsumerCore, COROUTINES, blocking)
