"""The sync ``Producer``: ``send()`` appends in the caller's thread, one I/O
thread (an asyncio loop) sends. The logic is ``ProducerCore``'s, shared with
``logbroker.aio.Producer`` (producer/aio.py); this shell only blocks where
that one awaits.

See docs/client.md for the threading model and why it is built this way.
"""

from __future__ import annotations

import time

from ..loop_thread import LoopThread
from ..waiting import SyncShell
from .core import ProducerCore
from .handles import RecordHandle, ThreadSignal


class Producer(SyncShell):
    """Sends records in batches, each partition's to its leader broker (sync
    API, thread-safe).

    ``Producer(bootstrap="127.0.0.1:9555", acks="all", linger_ms=0,
    batch_size=1 MiB, idempotent=None, ...)``

    - ``acks``: ``"all"`` (default: acknowledged once fsynced), ``1``
      (written), ``0`` (no response; offsets are -1).
    - ``linger_ms``: how long a batch may wait for more records. 0 (default):
      send at once when nothing is in flight; records arriving while
      requests are in flight wait for the next response (natural batching).
    - ``batch_size``: bytes per partition batch; a full batch is sent at once.
    - ``idempotent``: default on with acks="all": retries never duplicate.
    - ``max_in_flight`` (5) requests per broker connection; ``buffer_memory``
      (8 MiB) of unacknowledged batches, beyond which ``send`` blocks up to
      ``max_block_ms`` (60 s) and then raises ``RequestTimedOutError``;
      ``max_request_size`` (16 MiB) bounds a request and a record;
      ``delivery_timeout_ms`` (120 s): a record not acknowledged by then
      fails; ``retry_backoff_ms`` (100) doubling per attempt up to
      ``retry_backoff_max_ms`` (1000); ``auto_create_topics`` (True).
      Leader changes and lost brokers are retried (after a metadata
      refresh) until ``delivery_timeout_ms``; see docs/client.md.
    - ``request_timeout_ms`` (30 s), ``connect_timeout_ms`` (5 s), ``client_id``.
    - ``transactional_id``: a transactional producer (idempotent, acks="all"):
      ``init_transactions()`` once, then ``begin_transaction()``, sends,
      ``commit_transaction()`` / ``abort_transaction()``; sends outside a
      transaction are refused. ``transaction_timeout_ms`` (60 s): the
      coordinator aborts a transaction open longer (docs/client.md).

    Use as a context manager, or call ``close()``.
    """

    def __init__(self, bootstrap="127.0.0.1:9555", **kwargs) -> None:
        self._core = core = ProducerCore(bootstrap, **kwargs)
        self.settings, self.options = core.settings, core.options
        self._io = LoopThread("logbroker-producer-io")
        core.start(self._io.loop, ThreadSignal, in_loop=self._io.is_loop_thread, threadsafe=True)

    def send(self, topic: str, value, key=None, headers=None, partition: "int | None" = None,
             timestamp_ms: "int | None" = None) -> RecordHandle:
        """Queue one record; returns its ``RecordHandle`` at once.

        ``value``/``key``: bytes (or bytearray/memoryview) or None;
        ``headers``: ``[(str, bytes | None), ...]`` or a dict;
        ``partition``: None = by key hash (keyed) or round-robin (unkeyed);
        ``timestamp_ms``: default now, else ms since 1970 up to year 9999.
        Blocks only to learn a topic's partition count (first send to it) or
        while ``buffer_memory`` is full, at most ``max_block_ms``. Raises at
        once, leaving the producer as it was: ``TypeError`` (a wrong type),
        ``InvalidTopicError``, ``InvalidRequestError`` (partition, timestamp
        or header out of range), ``RecordTooLargeError``,
        ``UnknownTopicOrPartitionError``; also ``BrokerUnavailableError``,
        ``RequestTimedOutError`` (blocked too long), ``ClientClosedError``.
        Delivery errors are raised by the handle's ``result()``.
        """
        handle = self._core.append(topic, value, key, headers, partition, timestamp_ms)
        if handle is None:
            handle = self._run(self._core.send_slow(topic, value, key, headers, partition,
                                                    timestamp_ms))
        return handle

    def partitions_for(self, topic: str) -> int:
        """The topic's partition count (blocks on first use; cached)."""
        return self._core.counts.get(topic) or self._run(self._core.partitions_for(topic))

    def metrics(self) -> dict:
        """Counters of what this producer sent (``ProducerCore.metrics``;
        docs/metrics.md): a plain dict, never blocks."""
        return self._core.metrics()

    # -- transactions (producer/transactions.py; docs/client.md "Transactions") ---------------
    def init_transactions(self, timeout: "float | None" = None) -> None:
        """Once, before the first transaction: find the transaction
        coordinator and take the transactional id's producer id with a new
        epoch (an older producer of the id is fenced, its open transaction
        aborted). Blocks up to ``timeout`` s (default ``max_block_ms``):
        ``TimeoutError`` (call again to resume); fatal errors as ``send``'s."""
        self._run_txn(self._core.transactions().init(timeout))

    def begin_transaction(self) -> None:
        """Open a transaction (local: nothing is sent until a record is).
        ``InvalidTxnStateError`` before ``init_transactions`` or while one is open."""
        self._core.transactions().begin()

    def send_offsets_to_transaction(self, offsets: dict, group_metadata,
                                    timeout: "float | None" = None) -> None:
        """Commit ``offsets`` ``{(topic, partition): offset or (offset,
        metadata)}`` (the next offsets to read) for the consumer group of
        ``group_metadata`` (``consumer.group_metadata()``, or a group name)
        as part of the transaction: the group sees them only if it commits."""
        self._run_txn(self._core.transactions().send_offsets(offsets, group_metadata, timeout))

    def commit_transaction(self, timeout: "float | None" = None) -> None:
        """Flush, then commit. A record that failed raises
        ``TransactionAbortableError`` (call ``abort_transaction``); a fenced
        producer raises ``ProducerFencedError`` and refuses everything after;
        ``TimeoutError`` after ``timeout`` s (call again to resume)."""
        self._run_txn(self._core.transactions().commit(timeout))

    def abort_transaction(self, timeout: "float | None" = None) -> None:
        """Abort: records not yet sent fail with ``TransactionAbortedError``,
        those in flight are waited for, then the coordinator aborts; read_committed
        consumers never see any of it. ``TimeoutError`` as ``commit_transaction``."""
        self._run_txn(self._core.transactions().abort(timeout))

    def _run_txn(self, coro) -> None:
        """Run a transaction call; its own ``TimeoutError`` is raised as it is
        (the I/O thread's ``run`` would rename it)."""
        exc = self._run(_timeout_returned(coro))
        if exc is not None:
            raise exc

    def flush(self, timeout: "float | None" = None) -> None:
        """Send every queued record now and wait until each is acknowledged or
        failed (failures are reported by the handles, not here). Raises
        ``TimeoutError`` if ``timeout`` s pass first."""
        batches = self._core.flush_start(timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        for b in batches:
            left = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not b.done and not b.signal.wait(left):
                raise self._core.flush_timed_out(timeout)

    def close(self, timeout: "float | None" = None) -> None:
        """Flush (up to ``timeout`` s), then stop: records still undelivered
        fail with ``ClientClosedError``. Idempotent."""
        if self._core.closed:
            return
        try:
            self.flush(timeout)
        except TimeoutError:
            pass
        finally:
            self._core.mark_closed()
            self._stop(self._core.shutdown())


async def _timeout_returned(coro) -> "TimeoutError | None":
    try:
        await coro
    except TimeoutError as exc:
        return exc
    return None
