"""A transactional producer's requests to its transaction coordinator
(Kafka's KIP-98 design; the states are txn_state.py's).

- ``init``: FindCoordinator (key type 1) for the transactional id, then
  InitProducerId with it: the id's producer id with its epoch bumped (any
  older producer of the id is fenced; its open transaction is aborted).
- ``add_partitions``: AddPartitionsToTxn for the partitions a transaction
  is about to write, before their first batch; the sender asks for all the
  new partitions it has batches for in one request.
- ``send_offsets``: AddOffsetsToTxn (the group joins the transaction), then
  TxnOffsetCommit to the group's coordinator.
- ``end``: EndTxn, commit or abort.

Every request goes to the coordinator found for the id (cached; found again
on NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS
or a lost connection) and is retried after a backoff (20 ms doubling to
``retry_backoff_max_ms``) while its error is retriable
(CONCURRENT_TRANSACTIONS: the previous transaction's markers are still
being written), until the caller's deadline: then ``RequestTimedOutError``.
"""

from __future__ import annotations

import asyncio
import time

from ...errors import LogbrokerError, OperationNotAttemptedError, RequestTimedOutError
from ...protocol import messages as m
from ..group.coordinator import Coordinators, refinds
from ..net.backoff import Backoff
from ..net.metadata import part_error
from ..net.routing import Router
from .txn_state import classify

TXN_KEY = 1  # FindCoordinator's key type of a transactional id
FIRST_RETRY_S = 0.02  # CONCURRENT_TRANSACTIONS clears within a few marker writes


class TxnRequests:
    """The coordinator requests of one transactional id (loop-bound)."""

    def __init__(self, transactional_id: str, timeout_ms: int, router: Router,
                 retry_backoff_max_s: float) -> None:
        self.transactional_id, self.timeout_ms = transactional_id, timeout_ms
        self.coordinators = Coordinators(router, TXN_KEY)
        self.groups = Coordinators(router)  # the group coordinators (TxnOffsetCommit)
        self._backoff_max = max(retry_backoff_max_s, FIRST_RETRY_S)
        self.producer_id, self.producer_epoch = -1, -1

    async def _call(self, message: m.Message, deadline: float, *, group: "str | None" = None,
                    check_parts: bool = False) -> m.Response:
        """``message`` to the transaction coordinator (or ``group``'s), retried
        while retriable until ``deadline``; per-partition errors (with
        ``check_parts``) raise the first one, retriable ones retried too."""
        backoff = Backoff(FIRST_RETRY_S, self._backoff_max)
        coords, name = (self.coordinators, self.transactional_id) if group is None \
            else (self.groups, group)
        last: "LogbrokerError | None" = None
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RequestTimedOutError(
                    f"{type(message).__name__} for transactional id {self.transactional_id!r} "
                    f"not answered in time" + (f" (last error: {last})" if last else ""))
            try:
                resp = await coords.call(name, message, timeout=left)
                if check_parts:
                    _raise_parts(resp.parts)
                return resp
            except LogbrokerError as exc:
                if classify(exc) != "retriable":
                    raise
                if refinds(exc):  # a partition's NOT_COORDINATOR: the call itself went through
                    coords.forget(name)
                last = exc
            await asyncio.sleep(min(backoff.next(), max(deadline - time.monotonic(), 0)))

    async def init(self, deadline: float, bump: bool = False) -> tuple[int, int]:
        """The producer id and epoch for the transactional id (InitProducerId);
        ``bump``: this producer's own epoch is bumped (it names its pair,
        KIP-360), after an abort that left a sequence gap."""
        msg = m.InitProducerId(transactional_id=self.transactional_id,
                               transaction_timeout_ms=self.timeout_ms,
                               producer_id=self.producer_id if bump else -1,
                               producer_epoch=self.producer_epoch if bump else -1)
        resp = await self._call(msg, deadline)
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        return resp.producer_id, resp.producer_epoch

    def _ids(self) -> dict:
        return {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch}

    async def add_partitions(self, tps: list, deadline: float) -> None:
        """AddPartitionsToTxn for ``tps`` (raises the first partition's error)."""
        await self._call(m.AddPartitionsToTxn(**self._ids(), parts=tuple(tps)), deadline,
                         check_parts=True)

    async def send_offsets(self, entries: tuple, group_metadata, deadline: float) -> None:
        """AddOffsetsToTxn for the group, then TxnOffsetCommit of ``entries``
        ``(topic, partition, offset, metadata)`` to its coordinator."""
        group = group_metadata.group_id
        await self._call(m.AddOffsetsToTxn(**self._ids(), group=group), deadline)
        await self._call(m.TxnOffsetCommit(
            **self._ids(), group=group, generation=group_metadata.generation_id,
            member_id=group_metadata.member_id,
            group_instance_id=group_metadata.group_instance_id, offsets=entries),
            deadline, group=group, check_parts=True)

    async def end(self, commit: bool, deadline: float) -> None:
        """EndTxn (answered once the outcome is durable at the coordinator)."""
        await self._call(m.EndTxn(**self._ids(), commit=commit), deadline)

    async def aclose(self) -> None:
        await self.coordinators.aclose()
        await self.groups.aclose()


def _raise_parts(parts) -> None:
    """Raise the partition error that explains the answer: a retriable one
    first (retried), else the first other than OPERATION_NOT_ATTEMPTED (which
    the coordinator gives the parts it did not try because another failed)."""
    errors = [part_error(err, msg, topic, partition) for topic, partition, err, msg in parts
              if err]
    if errors:
        retriable = [e for e in errors if e.retriable]
        causes = [e for e in errors if e.code != OperationNotAttemptedError.code]
        raise (retriable or causes or errors)[0]
