"""The sender's side of a transaction: no batch goes to a partition before
the coordinator has it in the transaction (AddPartitionsToTxn, started at
the first record for it: ``note``).

The sender (sender.py) asks ``may_send(tp)`` for each partition with
batches ready; a partition not yet in the transaction is *wanted*, and
with no AddPartitionsToTxn in flight the sender starts one for every
wanted partition at once (``start_adding``): a transaction writing 100
partitions adds them in one or two requests, not 100. When it is answered
the partitions are in the transaction and the sender drains again; when it
fails, their queued batches fail with its error and the transaction is
abortable (or the producer fenced: txn_state.py).

Also here, run under the sender's mutex: ``set_producer`` (a new id or
epoch: sequences from 0), ``drop_unsent`` (an abort) and ``fail_parts``.
"""

from __future__ import annotations

import time

from ...errors import LogbrokerError
from .txn_manager import TxnRequests
from .txn_state import (TransactionAbortableError, TransactionAbortedError, TxnState,
                        TxnStateMachine)


class TxnSending:
    def __init__(self, state: TxnStateMachine, requests: TxnRequests,
                 delivery_timeout_s: float) -> None:
        self.state, self.requests = state, requests
        self.transactional_id = state.transactional_id
        self.wanted: dict = {}  # (topic, partition) -> None: batches wait for it to be added
        self.adding = None  # the AddPartitionsToTxn task in flight
        self._in_request: frozenset = frozenset()
        self._timeout = delivery_timeout_s

    def attach(self, sender) -> None:
        """Make ``sender`` a transactional producer's (before any send): the
        producer id comes from ``init_transactions``, batches carry the
        transactional bit and wait for their partition's AddPartitionsToTxn,
        and every failed batch reaches the state machine."""
        sender.txn, sender._need_pid = self, False
        sender.delivery.on_failed = self.state.failed

    def settle(self, sender) -> bool:
        """While the transaction aborts, failed or the producer is fenced,
        fail every batch not yet sent (open or queued, retries included), as
        Kafka's sender does: nothing more of it may reach a partition, and
        nobody waits for records that cannot leave. True if so (sender's
        mutex held)."""
        st = self.state.state
        if st not in (TxnState.ABORTING, TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR):
            return False
        drop_unsent(sender, aborted(self.transactional_id) if st is TxnState.ABORTING
                    else self._failure())
        return True

    def may_send(self, tp: tuple) -> bool:
        """Whether ``tp``'s batches may go now (sender's mutex held); if not,
        it is wanted in the next AddPartitionsToTxn."""
        if tp in self.state.partitions:
            return True
        if tp not in self._in_request:
            self.wanted[tp] = None
        return False

    def note(self, sender, tp: tuple) -> None:
        """A record was appended for ``tp`` (any thread): if the transaction
        does not have it yet, its AddPartitionsToTxn starts now, as Kafka's
        producer does at ``send()``, while the transaction's records are
        still being appended, rather than when its first batch is ready."""
        if tp in self.state.partitions or tp in self.wanted:
            return
        with sender._mutex:
            if tp in self._in_request or self.state.state is not TxnState.IN_TRANSACTION:
                return
            self.wanted[tp] = None
        sender._drain_on_loop()

    def start_adding(self, sender, in_loop: bool) -> bool:
        """Start one AddPartitionsToTxn for every wanted partition (sender's
        mutex held); fails their batches at once if the transaction already
        failed. False if that must happen on the loop (not ``in_loop``)."""
        if not in_loop:
            return False
        tps, self.wanted = list(self.wanted), {}
        if self.state.state not in (TxnState.IN_TRANSACTION, TxnState.COMMITTING):
            fail_parts(sender, tps, self._failure())
            return True
        self._in_request = frozenset(tps)
        self.adding = sender._start(self._add(sender, tps), self._added)
        return True

    def _failure(self) -> BaseException:
        err = self.state.error
        if err is not None and self.state.state is TxnState.FATAL_ERROR:
            return err
        exc = TransactionAbortableError(
            f"transactional id {self.transactional_id!r}: the transaction failed "
            f"({err or self.state.state.value}); abort_transaction() is due")
        exc.__cause__ = err
        return exc

    async def _add(self, sender, tps: list) -> None:
        try:
            await self.requests.add_partitions(tps, time.monotonic() + self._timeout)
        except LogbrokerError as exc:
            self.state.failed(exc)
            fail_parts(sender, tps, exc)
        else:
            self.state.partitions.update(tps)

    def _added(self) -> None:
        self.adding, self._in_request = None, frozenset()

    def clear(self) -> None:
        self.wanted.clear()


def aborted(transactional_id: str) -> TransactionAbortedError:
    return TransactionAbortedError(f"transactional id {transactional_id!r}: the transaction was "
                                   "aborted before this record was sent")


def set_producer(sender, producer_id: int, producer_epoch: int) -> None:
    """A transactional producer's id and epoch (``init_transactions``, an
    epoch bump): sequences start again at 0 (nothing may be in flight)."""
    with sender._mutex:
        sender.producer_id, sender.producer_epoch = producer_id, producer_epoch
        for part in sender.acc.parts.values():
            part.next_seq, part.blocked, part.confirmed = 0, False, False
            for b in part.queue:
                b.data = None
        sender.delivery.renewed()


def drop_unsent(sender, exc: BaseException) -> None:
    """Fail every batch not in flight (open, queued, retries waiting) with
    ``exc`` (an abort); a dropped batch that had a sequence leaves a gap
    (``delivery.reset_pending``: the epoch is bumped before the next
    transaction)."""
    with sender._mutex:
        acc = sender.acc
        with acc.lock:
            batches = list(acc.open.values())
            acc.open.clear()
        for b in batches:  # never sealed: not counted as buffered
            b.complete(-1, exc)
        for part in acc.parts.values():
            while part.queue:
                b = part.queue.popleft()
                if b.base_sequence >= 0:
                    sender.delivery.reset_pending = True
                sender.delivery.resolve(b, -1, exc)
        if sender.txn is not None:
            sender.txn.clear()


def fail_parts(sender, tps, exc: BaseException) -> None:
    """Fail the queued batches of ``tps`` (their AddPartitionsToTxn failed;
    never encoded, so no sequence gap)."""
    with sender._mutex:
        for tp in tps:
            part = sender.acc.parts.get(tp)
            while part is not None and part.queue:
                sender.delivery.resolve(part.queue.popleft(), -1, exc)
