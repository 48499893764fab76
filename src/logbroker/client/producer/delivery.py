"""What becomes of a producer batch once sent: acknowledged, sent again, or
failed for good. The sender (sender.py) calls these with its mutex held.

Retries: a retriable error fails nothing. A routing error
(NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
FENCED/UNKNOWN_LEADER_EPOCH, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
CLUSTER_UNAVAILABLE, a lost connection) also marks the partition's metadata
stale, so it is refreshed before the resend. The batch goes back to its
partition's queue in sequence order and is resent after an exponential
backoff (``retry_backoff_ms`` doubling per attempt up to
``retry_backoff_max_ms``, jittered), to whichever broker leads then, until
``delivery_timeout_ms``. After a failure the partition sends nothing more
until everything it had in flight has come back (failed the same way, or
with OUT_OF_ORDER_SEQUENCE as a consequence), then resends in order.

Idempotence: a batch keeps its bytes until acknowledged, so every retry, to
the same or to a new leader, carries the same producer id and sequence, and
the broker (a new leader has the replicated producer state) answers a
duplicate with its original offset. A batch that fails for good (or
expires) leaves a sequence gap: ``reset_pending`` tells the sender to take a
new producer id and re-encode every unacknowledged batch from sequence 0.
"""

from __future__ import annotations

import logging
import time

from ...errors import (BrokerUnavailableError, LogbrokerError, OutOfOrderSequenceError,
                       RequestTimedOutError, for_code)
from ..net.backoff import Backoff
from ..net.cluster_meta import reroutes
from ..net.routing import Router
from ..settings import ProducerSettings
from .accumulator import Accumulator, PartitionQueue
from .batch import ProducerBatch

log = logging.getLogger("logbroker.client")


class Delivery:
    def __init__(self, acc: Accumulator, router: Router, settings: ProducerSettings,
                 on_space=None) -> None:
        """``on_space()`` is called when buffered bytes drop (the producer's
        waiters for ``buffer_memory``)."""
        self.acc, self.router, self.settings = acc, router, settings
        self.retry = Backoff(settings.retry_backoff_ms / 1000, settings.retry_backoff_max_ms / 1000)
        self.reset_pending = False  # a sequence gap: a new producer id is due
        self.closed = False  # the producer is closing: nothing is retried
        self.on_space = on_space or (lambda: None)
        self.on_failed = None  # on_failed(exc): a batch failed (a transactional producer's hook)

    def close(self) -> None:
        """The producer is closing: nothing is retried from now on."""
        self.closed = True

    def renewed(self) -> None:
        """A new producer id was taken: the sequence gap is closed."""
        self.reset_pending = False

    def response(self, batches: list, resp, exc) -> None:
        """A Produce request's answer (or the error that took it)."""
        if resp is not None:
            if resp.error:
                exc, resp = for_code(resp.error)(resp.message), None
            elif len(resp.parts) != len(batches):
                exc = BrokerUnavailableError("produce response does not match its request")
                resp = None
        if resp is None:
            for b in batches:
                self.failed(b, exc)
        else:
            for b, (topic, partition, err, msg, base, _) in zip(batches, resp.parts):
                if err:
                    self.failed(b, for_code(err)(f"{topic}[{partition}]: {msg}"))
                else:
                    self.acked(b, base)

    def _part(self, b: ProducerBatch) -> PartitionQueue:
        part = self.acc.parts[(b.topic, b.partition)]
        part.inflight -= 1
        if part.inflight == 0:
            part.blocked = False
        return part

    def acked(self, b: ProducerBatch, base_offset: int) -> None:
        self._part(b).confirmed = True  # the leader checks this producer's sequences here now
        self.resolve(b, base_offset, None)

    def failed(self, b: ProducerBatch, exc: LogbrokerError) -> None:
        """``b`` came back with ``exc``: retried (module docstring) or given up."""
        part = self._part(b)
        # A gap error right after an earlier failure of this partition is a
        # consequence of it: resend in order (after a reset if one is due).
        follows = isinstance(exc, OutOfOrderSequenceError) and (
            self.reset_pending or (part.queue and part.queue[0].order < b.order))
        now = time.monotonic()
        if (exc.retriable or follows) and now < b.deadline and not self.closed:
            if reroutes(exc):
                self.router.invalidate([(b.topic, b.partition)])
            b.last_error = exc
            self.acc.requeue(b, part)
            part.blocked = part.inflight > 0
            part.retry_at = now + self.retry.delay(b.attempts)
            return
        if not exc.retriable and not follows:
            log.warning("produce to %s[%d] failed: %s", b.topic, b.partition, exc)
        self.give_up(b, part, exc if not follows else b.last_error or exc)

    def give_up(self, b: ProducerBatch, part: PartitionQueue, exc: BaseException) -> None:
        if time.monotonic() >= b.deadline and exc.__class__ is not RequestTimedOutError:
            exc = RequestTimedOutError(f"{b.topic}[{b.partition}]: not delivered within "
                                       f"delivery_timeout_ms ({exc})")
        if self.settings.idempotent and b.base_sequence >= 0:
            self.reset_pending = True  # its sequence range is now a gap
            part.blocked = part.inflight > 0
        self.resolve(b, -1, exc)

    def resolve(self, b: ProducerBatch, base_offset: int, exc) -> None:
        if exc is not None and self.on_failed is not None:
            self.on_failed(exc)
        b.complete(base_offset, exc)
        self.acc.resolved(b)
        self.on_space()

    def expire(self, exc: LogbrokerError) -> None:
        """Fail queued batches past their delivery deadline (they could not
        be sent: broker unreachable, no leader); ``exc`` unless the batch
        failed for a reason of its own before."""
        now = time.monotonic()
        for part in list(self.acc.parts.values()):
            for b in [b for b in part.queue if b.deadline <= now]:
                part.queue.remove(b)
                self.give_up(b, part, b.last_error or exc)

    def fail_everything(self, exc: BaseException) -> None:
        if self.on_failed is not None:
            self.on_failed(exc)
        for b in self.acc.drop_all():
            b.complete(-1, exc)
            self.acc.resolved(b)
        self.on_space()
