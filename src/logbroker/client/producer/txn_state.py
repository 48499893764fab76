"""A transactional producer's state machine (Kafka's KIP-98 client side):
pure, no I/O; ``txn_manager.py`` drives it.

States and the calls that move between them::

    UNINITIALIZED --init_transactions()--> INITIALIZING --(producer id)--> READY
    READY --begin_transaction()--> IN_TRANSACTION
    IN_TRANSACTION --commit_transaction()--> COMMITTING --(EndTxn)--> READY
    IN_TRANSACTION / ABORTABLE_ERROR --abort_transaction()--> ABORTING --(EndTxn)--> READY
    IN_TRANSACTION / COMMITTING --(an abortable error)--> ABORTABLE_ERROR
    any --(a fatal error)--> FATAL_ERROR   (final: the producer can only be closed)

A call that times out leaves the state as it is: ``init_transactions``,
``commit_transaction`` and ``abort_transaction`` may be called again and
resume where they stopped (Kafka's rule).

Errors are sorted three ways (``classify``): *retriable* ones the manager
retries itself (a coordinator moving or loading, CONCURRENT_TRANSACTIONS,
a lost connection); *fatal* ones (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
INVALID_PRODUCER_ID_MAPPING, INVALID_TXN_STATE, transactional id or
cluster authorization, an unsupported version, an invalid transaction
timeout) after which the producer refuses every transactional call and
send; every other error is *abortable*: the transaction must be aborted
(``abort_transaction()``), then the producer goes on.
"""

from __future__ import annotations

import enum

from ...errors import (ClusterAuthorizationFailedError, InvalidProducerEpochError,
                       InvalidProducerIdMappingError, InvalidTransactionTimeoutError,
                       InvalidTxnStateError, LogbrokerError, ProducerFencedError,
                       TransactionalIdAuthorizationFailedError, UnsupportedVersionError)

FATAL = (ProducerFencedError, InvalidProducerEpochError, InvalidProducerIdMappingError,
         InvalidTxnStateError, TransactionalIdAuthorizationFailedError,
         ClusterAuthorizationFailedError, UnsupportedVersionError, InvalidTransactionTimeoutError)


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    COMMITTING = "committing"
    ABORTING = "aborting"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


S = TxnState


class TransactionAbortedError(LogbrokerError):
    """A record of a transaction that was aborted before it was sent (client
    side; no wire code)."""

    name = "TRANSACTION_ABORTED"


class TransactionAbortableError(LogbrokerError):
    """The open transaction failed (``__cause__``: why); nothing of it will
    commit: call ``abort_transaction()``, then begin a new one (client side;
    no wire code)."""

    name = "TRANSACTION_ABORTABLE"


def classify(exc: BaseException) -> str:
    """``"fatal"``, ``"retriable"`` or ``"abortable"`` (module docstring)."""
    if isinstance(exc, FATAL):
        return "fatal"
    if isinstance(exc, LogbrokerError) and exc.retriable:
        return "retriable"
    return "abortable"


class TxnStateMachine:
    """The state, the partitions and groups of the open transaction, and the
    error that ended it. Every method raises ``InvalidTxnStateError`` (a
    call out of order: nothing changes) or the fatal error (once fatal)."""

    def __init__(self, transactional_id: str) -> None:
        self.transactional_id = transactional_id
        self.state = S.UNINITIALIZED
        self.error: "BaseException | None" = None  # the abortable or fatal error
        self.partitions: set = set()  # (topic, partition) in the open transaction (added)
        self.groups: set = set()  # groups whose offsets are in it
        self.producer_id, self.producer_epoch = -1, -1

    # -- checks ---------------------------------------------------------------------------------
    def _refuse(self, what: str) -> None:
        if self.state is S.FATAL_ERROR:
            raise type(self.error)(
                f"transactional id {self.transactional_id!r}: the producer failed for good "
                f"({self.error}); {what} refused: close it (a newer producer of this id may "
                "have taken over)")
        raise InvalidTxnStateError(f"transactional id {self.transactional_id!r}: cannot {what} "
                                   f"while {self.state.value}")

    def check_fatal(self, what: str) -> None:
        if self.state is S.FATAL_ERROR:
            self._refuse(what)

    def check_send(self) -> None:
        """A record may be sent only inside a transaction."""
        if self.state is not S.IN_TRANSACTION:
            if self.state is S.ABORTABLE_ERROR:
                raise TransactionAbortableError(
                    f"transactional id {self.transactional_id!r}: the transaction failed "
                    f"({self.error}); call abort_transaction()") from self.error
            if self.state in (S.READY, S.UNINITIALIZED, S.INITIALIZING):
                raise InvalidTxnStateError(
                    f"transactional id {self.transactional_id!r}: send() needs an open "
                    "transaction: call init_transactions() once, then begin_transaction()")
            self._refuse("send")

    @property
    def started(self) -> bool:
        """Anything was added to the coordinator's view of the transaction
        (EndTxn is due; else ending it is local)."""
        return bool(self.partitions or self.groups)

    # -- transitions ----------------------------------------------------------------------------
    def begin_init(self) -> None:
        if self.state not in (S.UNINITIALIZED, S.INITIALIZING):
            self._refuse("init_transactions()")
        self.state = S.INITIALIZING

    def initialized(self, producer_id: int, producer_epoch: int) -> None:
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.state = S.READY

    def begin(self) -> None:
        if self.state is not S.READY:
            if self.state in (S.UNINITIALIZED, S.INITIALIZING):
                raise InvalidTxnStateError(f"transactional id {self.transactional_id!r}: call "
                                           "init_transactions() before begin_transaction()")
            self._refuse("begin_transaction()")
        self.partitions, self.groups, self.error = set(), set(), None
        self.state = S.IN_TRANSACTION

    def check_in_transaction(self, what: str) -> None:
        """``send_offsets_to_transaction`` and the like: an open, healthy transaction."""
        if self.state is not S.IN_TRANSACTION:
            if self.state is S.ABORTABLE_ERROR:
                self.check_send()
            self._refuse(what)

    def begin_commit(self) -> None:
        """IN_TRANSACTION -> COMMITTING (COMMITTING again: a retry after a timeout)."""
        if self.state is S.ABORTABLE_ERROR:
            self.check_send()
        if self.state not in (S.IN_TRANSACTION, S.COMMITTING):
            self._refuse("commit_transaction()")
        self.state = S.COMMITTING

    def begin_abort(self) -> None:
        """IN_TRANSACTION / ABORTABLE_ERROR -> ABORTING (ABORTING again: a retry)."""
        if self.state not in (S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING):
            self._refuse("abort_transaction()")
        self.state = S.ABORTING

    def completed(self) -> None:
        """The transaction ended (committed or aborted): READY for the next."""
        self.partitions, self.groups, self.error = set(), set(), None
        self.state = S.READY

    def failed(self, exc: BaseException) -> None:
        """An error of the transaction's work (a request, a batch): fatal ones
        end the producer; abortable ones the transaction (while it is open or
        committing; an aborting transaction ends anyway). Retriable ones
        that reach here (retries exhausted) are abortable."""
        if self.state is S.FATAL_ERROR:
            return
        if classify(exc) == "fatal":
            self.error, self.state = exc, S.FATAL_ERROR
        elif self.state in (S.IN_TRANSACTION, S.COMMITTING):
            self.error, self.state = exc, S.ABORTABLE_ERROR

    def raise_failure(self) -> None:
        """Raise what ended the transaction: the fatal error (refusing), or a
        ``TransactionAbortableError`` caused by the abortable one."""
        if self.state is S.FATAL_ERROR:
            self._refuse("the transaction")
        if self.state is S.ABORTABLE_ERROR:
            self.check_send()
