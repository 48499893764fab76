"""A transactional producer's calls (``Producer(transactional_id=...)``),
shared by the sync and asyncio shells: the coroutines run on the
producer's loop (the sync shell's I/O thread, or the caller's).

    producer.init_transactions()          # once: fences older producers of the id
    producer.begin_transaction()
    producer.send("out", b"...")          # AddPartitionsToTxn before a partition's first batch
    producer.send_offsets_to_transaction({("in", 0): 42}, consumer.group_metadata())
    producer.commit_transaction()         # or abort_transaction()

``commit_transaction`` flushes (every record of the transaction
acknowledged), then sends EndTxn(commit); a record that failed makes the
transaction abortable instead (``TransactionAbortableError``: call
``abort_transaction``). ``abort_transaction`` fails the records not yet
sent (``TransactionAbortedError``), waits for those in flight, then sends
EndTxn(abort); when a dropped batch had used sequence numbers, the epoch
is bumped (InitProducerId naming this producer) before the next
transaction. Each blocking call is bounded by its ``timeout`` (default
``max_block_ms``): then ``TimeoutError`` and the same call may be made
again to resume. States and errors: txn_state.py.
"""

from __future__ import annotations

import asyncio
import time
from ...errors import LogbrokerError
from .. import validate
from ..group.offsets import GroupMetadata
from .txn_manager import TxnRequests
from .txn_sending import TxnSending, aborted, drop_unsent, set_producer
from .txn_state import TxnState, TxnStateMachine, classify

MAX_ID_CHARS = 249


def check_transactional(transactional_id, timeout_ms, acks, idempotent) -> None:
    """Raise ``ValueError`` / ``TypeError`` for settings a transactional producer cannot have."""
    if not isinstance(transactional_id, str):
        raise TypeError(f"transactional_id must be a str, not {type(transactional_id).__name__}")
    if not 1 <= len(transactional_id) <= MAX_ID_CHARS or not transactional_id.isprintable():
        raise ValueError(f"transactional_id {transactional_id[:60]!r}: use 1-{MAX_ID_CHARS} "
                         "printable characters")
    if acks not in ("all", -1) or idempotent is False:
        raise ValueError("a transactional producer is idempotent: acks='all' and idempotent "
                         "left on")
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or \
            not 1 <= timeout_ms <= 0x7FFFFFFF:
        raise ValueError(f"transaction_timeout_ms must be an int in 1..2147483647, "
                         f"got {timeout_ms!r}")


def group_metadata_of(value) -> GroupMetadata:
    """A ``GroupMetadata``, or a group name (membership not checked)."""
    if isinstance(value, str):
        return GroupMetadata(validate.group(value))
    if isinstance(value, GroupMetadata):
        validate.group(value.group_id)
        return value
    raise TypeError("group_metadata must be consumer.group_metadata() or a group name, not "
                    f"{type(value).__name__}")


class Transactions:
    def __init__(self, core, transactional_id: str, timeout_ms: int, acks, idempotent) -> None:
        check_transactional(transactional_id, timeout_ms, acks, idempotent)
        self.core = core
        self.state = TxnStateMachine(transactional_id)
        self.timeout_ms = timeout_ms
        self.requests: "TxnRequests | None" = None

    def start(self) -> None:
        """Bind to the core's router and sender (``ProducerCore.start``)."""
        core = self.core
        self.requests = TxnRequests(self.state.transactional_id, self.timeout_ms, core.router,
                                    core.settings.retry_backoff_max_ms / 1000)
        self.sending = TxnSending(self.state, self.requests,
                                  core.settings.delivery_timeout_ms / 1000)
        self.sending.attach(core.sender)

    def _deadline(self, timeout) -> float:
        wait = validate.seconds(timeout, "timeout")
        if wait is None:
            wait = self.core.settings.max_block_ms / 1000
        return time.monotonic() + wait

    def _fail(self, exc: LogbrokerError):
        """Record a request's failure in the state and raise what the caller
        sees: a timeout (retries exhausted) leaves the state as it was (the
        same call resumes), a fatal error refuses, others are abortable."""
        if classify(exc) == "retriable":
            raise TimeoutError(f"transactional id {self.state.transactional_id!r}: {exc}; "
                               "call again to resume") from exc
        self.state.failed(exc)
        if self.state.state is TxnState.FATAL_ERROR:
            self.state.raise_failure()
        raise exc

    async def init(self, timeout) -> None:
        deadline = self._deadline(timeout)
        self.state.begin_init()
        try:
            pid, epoch = await self.requests.init(deadline)
        except LogbrokerError as exc:
            self._fail(exc)
        set_producer(self.core.sender, pid, epoch)
        self.state.initialized(pid, epoch)

    def begin(self) -> None:
        self.core.check_open()
        self.state.begin()

    async def send_offsets(self, offsets, group_metadata, timeout) -> None:
        entries = validate.commit_entries(offsets)
        meta = group_metadata_of(group_metadata)
        deadline = self._deadline(timeout)
        self.state.check_in_transaction("send_offsets_to_transaction()")
        self.state.groups.add(meta.group_id)  # EndTxn is due even if this fails
        try:
            await self.requests.send_offsets(entries, meta, deadline)
        except LogbrokerError as exc:
            self._fail(exc)

    async def commit(self, timeout) -> None:
        deadline = self._deadline(timeout)
        self.state.begin_commit()
        self.core.flush_start(None)
        # a failed record ends the wait: the rest may never be sent (a sequence gap)
        await self.core.wait_delivered(deadline, self._failed_already)
        if not self._failed_already():
            await self._adding_done(deadline)
        self.state.raise_failure()  # a record failed: abortable (or fatal)
        if self.state.started:
            try:
                await self.requests.end(True, deadline)
            except LogbrokerError as exc:
                self._fail(exc)
        self.state.completed()

    async def abort(self, timeout) -> None:
        deadline = self._deadline(timeout)
        self.state.begin_abort()
        sender = self.core.sender
        drop_unsent(sender, aborted(self.state.transactional_id))  # retries too, as they come
        await self._adding_done(deadline)
        await self.core.wait_delivered(deadline)
        if self.state.started:
            try:
                await self.requests.end(False, deadline)
            except LogbrokerError as exc:
                self._fail(exc)
        if sender.delivery.reset_pending:  # a sequence gap: a new epoch before going on
            try:
                pid, epoch = await self.requests.init(deadline, bump=True)
            except LogbrokerError as exc:
                self._fail(exc)
            set_producer(sender, pid, epoch)
        self.state.completed()

    def _failed_already(self) -> bool:
        return self.state.state in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR)

    async def _adding_done(self, deadline: float) -> None:
        """Wait for an AddPartitionsToTxn in flight (its outcome is part of the transaction)."""
        task = self.sending.adding
        if task is not None and not task.done():
            await asyncio.wait([task], timeout=max(deadline - time.monotonic(), 0))
            if not task.done():
                raise TimeoutError("AddPartitionsToTxn still unanswered")
