"""The state of one transactional id and its transitions (pure, no I/O).

Kafka's transaction coordinator states (KIP-98): ``Empty`` (an id with a
producer id and epoch, no open transaction), ``Ongoing`` (partitions added),
``PrepareCommit`` / ``PrepareAbort`` (the decision is durable, markers are
being written), ``CompleteCommit`` / ``CompleteAbort`` (the markers are all
written), ``PrepareEpochFence`` (shown only in Kafka while a fence is
pending; here a fence goes straight to ``PrepareAbort`` with the epoch
bumped, so it is never stored) and ``Dead`` (an expired id, a tombstone).

Every function takes the current ``TxnState`` (None: an id never seen, or
expired) and the request's fields and returns the next ``TxnState`` (the
record to write before answering), or None when nothing changes, or raises
the request's error (errors.py). The caller writes the returned state to the
transaction state topic and applies it only once acknowledged.

Epochs: a producer's epoch is bumped by every InitProducerId (fencing the
previous instance of the same transactional id) and by an abort the
coordinator decides (a timeout, a fence): markers carry the bumped epoch, so
the partitions refuse the old producer's later batches. An epoch at
``MAX_EPOCH`` is exhausted: the next InitProducerId takes a new producer id
(epoch 0) and keeps the old one as ``last_producer_id`` (KIP-360: a producer
that lost its answer may retry with its old id and epoch and get the same
result).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import (ConcurrentTransactionsError, InvalidProducerEpochError,
                      InvalidProducerIdMappingError, InvalidTxnStateError, ProducerFencedError)

EMPTY, ONGOING = "Empty", "Ongoing"
PREPARE_COMMIT, PREPARE_ABORT = "PrepareCommit", "PrepareAbort"
COMPLETE_COMMIT, COMPLETE_ABORT = "CompleteCommit", "CompleteAbort"
PREPARE_EPOCH_FENCE, DEAD = "PrepareEpochFence", "Dead"
STATES = (EMPTY, ONGOING, PREPARE_COMMIT, PREPARE_ABORT, COMPLETE_COMMIT, COMPLETE_ABORT,
          PREPARE_EPOCH_FENCE, DEAD)
PREPARING = frozenset({PREPARE_COMMIT, PREPARE_ABORT})
SETTLED = frozenset({EMPTY, COMPLETE_COMMIT, COMPLETE_ABORT})  # no open transaction
MAX_EPOCH = 32766  # Kafka's Short.MAX_VALUE - 1: at this epoch the producer id is rotated
NO_ID = -1


@dataclass(frozen=True)
class TxnState:
    """One transactional id as its coordinator holds it. ``parts``: the
    transaction's partitions, sorted (topic, partition) pairs; ``start_ms``
    when it became Ongoing (-1 otherwise); ``update_ms`` its last change
    (idle expiry counts from it)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: str = EMPTY
    parts: tuple = ()
    start_ms: int = -1
    update_ms: int = 0
    last_producer_id: int = NO_ID
    last_producer_epoch: int = -1

    @property
    def commit(self) -> bool:
        """For a Prepare*/Complete* state: whether the outcome is a commit."""
        return self.state in (PREPARE_COMMIT, COMPLETE_COMMIT)

    def overdue(self, now_ms: int) -> bool:
        return self.state == ONGOING and now_ms > self.start_ms + self.timeout_ms

    def expired(self, now_ms: int, expiration_ms: int) -> bool:
        return self.state in SETTLED and now_ms - self.update_ms > expiration_ms


def needs_new_id(cur: "TxnState | None", producer_id: int, producer_epoch: int) -> bool:
    """Whether ``init`` will take a new producer id (the caller allocates it first)."""
    if cur is None or cur.state == DEAD:
        return True
    return (cur.state in SETTLED and cur.producer_epoch >= MAX_EPOCH
            and (producer_id == NO_ID or producer_epoch == cur.producer_epoch))


def _check_known_producer(cur: TxnState, producer_id: int) -> None:
    """KIP-360: a producer naming its id must name this id's current or last one."""
    if producer_id != NO_ID and producer_id not in (cur.producer_id, cur.last_producer_id):
        raise ProducerFencedError(f"producer id {producer_id} is not the one of transactional "
                                  f"id {cur.transactional_id!r}: a newer producer took it")


def init(cur: "TxnState | None", tid: str, producer_id: int, producer_epoch: int,
         timeout_ms: int, now_ms: int, new_id: int = NO_ID) -> TxnState:
    """InitProducerId. From nothing: ``new_id`` at epoch 0. Settled: the epoch
    bumped (the previous producer of ``tid`` is fenced), or a retry of the
    last bump answered alike (KIP-360), or a new id when the epoch is
    exhausted. Ongoing: the transaction is aborted with the epoch bumped
    (``fence``) and the caller answers CONCURRENT_TRANSACTIONS (the
    producer retries once the abort completed). Prepare*:
    CONCURRENT_TRANSACTIONS."""
    if cur is None or cur.state == DEAD:
        return TxnState(tid, new_id, 0, timeout_ms, EMPTY, update_ms=now_ms)
    _check_known_producer(cur, producer_id)
    if cur.state in PREPARING or cur.state == PREPARE_EPOCH_FENCE:
        raise ConcurrentTransactionsError(f"transactional id {tid!r}: the previous transaction "
                                          "is completing, retry")
    if cur.state == ONGOING:
        raise InvalidTxnStateError("an open transaction is aborted by fence(), not init()")
    if needs_new_id(cur, producer_id, producer_epoch):  # exhausted: rotate the id
        return TxnState(tid, new_id, 0, timeout_ms, EMPTY, update_ms=now_ms,
                        last_producer_id=cur.producer_id, last_producer_epoch=cur.producer_epoch)
    if producer_id == NO_ID:
        epoch, last = cur.producer_epoch + 1, -1
    elif producer_id == cur.producer_id and producer_epoch in (cur.producer_epoch, -1):
        epoch, last = cur.producer_epoch + 1, cur.producer_epoch
    elif producer_epoch == cur.last_producer_epoch and producer_id in (cur.producer_id,
                                                                       cur.last_producer_id):
        return cur  # the retry of the bump this producer asked for: the same answer
    else:
        raise ProducerFencedError(f"transactional id {tid!r}: epoch {producer_epoch} is not "
                                  f"the current one ({cur.producer_epoch})")
    return replace(cur, producer_epoch=epoch, last_producer_epoch=last, timeout_ms=timeout_ms,
                   state=EMPTY, parts=(), start_ms=-1, update_ms=now_ms,
                   last_producer_id=cur.producer_id if last >= 0 else cur.last_producer_id)


def fence(cur: TxnState, now_ms: int) -> TxnState:
    """Abort ``cur``'s open transaction as the coordinator decides it (a
    timeout, a new InitProducerId): PrepareAbort with the epoch bumped
    (unless exhausted: the markers then carry the current one)."""
    if cur.state != ONGOING:
        raise InvalidTxnStateError(f"no open transaction to abort (state {cur.state})")
    bumped = cur.producer_epoch + 1 if cur.producer_epoch < MAX_EPOCH else cur.producer_epoch
    return replace(cur, producer_epoch=bumped, last_producer_epoch=cur.producer_epoch,
                   state=PREPARE_ABORT, update_ms=now_ms)


def _check_producer(cur: "TxnState | None", tid: str, producer_id: int,
                    producer_epoch: int) -> TxnState:
    if cur is None or cur.state == DEAD:
        raise InvalidProducerIdMappingError(f"transactional id {tid!r} has no producer id: "
                                            "InitProducerId first")
    if producer_id != cur.producer_id:
        raise InvalidProducerIdMappingError(f"producer id {producer_id} does not belong to "
                                            f"transactional id {tid!r}")
    if producer_epoch != cur.producer_epoch:
        raise ProducerFencedError(f"transactional id {tid!r}: epoch {producer_epoch} is fenced "
                                  f"by epoch {cur.producer_epoch}")
    return cur


def add_partitions(cur: "TxnState | None", tid: str, producer_id: int, producer_epoch: int,
                   parts, now_ms: int, max_parts: int) -> "TxnState | None":
    """AddPartitionsToTxn / AddOffsetsToTxn: ``parts`` join the open
    transaction (opened now if none is). None: all of them are in it already."""
    cur = _check_producer(cur, tid, producer_id, producer_epoch)
    if cur.state in PREPARING or cur.state == PREPARE_EPOCH_FENCE:
        raise ConcurrentTransactionsError(f"transactional id {tid!r}: the previous transaction "
                                          "is completing, retry")
    have = set(cur.parts) if cur.state == ONGOING else set()
    new = have | {(str(t), int(p)) for t, p in parts}
    if cur.state == ONGOING and new == have:
        return None
    if len(new) > max_parts:
        raise InvalidTxnStateError(f"a transaction may hold at most {max_parts} partitions")
    start = cur.start_ms if cur.state == ONGOING else now_ms
    return replace(cur, state=ONGOING, parts=tuple(sorted(new)), start_ms=start, update_ms=now_ms)


def verify(cur: "TxnState | None", tid: str, producer_id: int, producer_epoch: int,
           part: tuple) -> None:
    """A partition leader's question before a producer's first transactional
    batch there (KIP-890 part 1): raise unless ``producer_id`` at
    ``producer_epoch`` holds ``tid``'s open transaction and ``part`` is in
    it: INVALID_PRODUCER_EPOCH for an older epoch of the id's producer,
    INVALID_TXN_STATE otherwise (another producer, no open transaction, the
    partition not added, a transaction already being ended)."""
    if cur is not None and producer_id == cur.producer_id \
            and producer_epoch < cur.producer_epoch:
        raise InvalidProducerEpochError(f"transactional id {tid!r}: epoch {producer_epoch} is "
                                        f"older than {cur.producer_epoch}")
    if cur is None or producer_id != cur.producer_id or producer_epoch != cur.producer_epoch:
        raise InvalidTxnStateError(f"producer {producer_id} epoch {producer_epoch} does not hold "
                                   f"transactional id {tid!r}")
    if cur.state != ONGOING or tuple(part) not in cur.parts:
        raise InvalidTxnStateError(f"{part[0]}-{part[1]} is not in an open transaction of "
                                   f"{tid!r} (state {cur.state}): AddPartitionsToTxn first")


def end(cur: "TxnState | None", tid: str, producer_id: int, producer_epoch: int, commit: bool,
        now_ms: int) -> "TxnState | None":
    """EndTxn: Ongoing -> PrepareCommit / PrepareAbort. None: a retry of an
    EndTxn whose outcome is already decided the same way (answered as done).
    CONCURRENT_TRANSACTIONS while it completes; INVALID_TXN_STATE for the
    opposite outcome or no open transaction."""
    cur = _check_producer(cur, tid, producer_id, producer_epoch)
    want = "commit" if commit else "abort"
    if cur.state == ONGOING:
        return replace(cur, state=PREPARE_COMMIT if commit else PREPARE_ABORT, update_ms=now_ms)
    if cur.state in (COMPLETE_COMMIT, COMPLETE_ABORT) and cur.commit == commit:
        return None
    if cur.state in PREPARING and cur.commit == commit:
        raise ConcurrentTransactionsError(f"transactional id {tid!r}: the {want} is completing")
    raise InvalidTxnStateError(f"transactional id {tid!r} cannot {want} in state {cur.state}")


def complete(cur: TxnState, now_ms: int) -> TxnState:
    """Every marker written: Prepare* -> Complete*, the partitions forgotten."""
    if cur.state not in PREPARING:
        raise InvalidTxnStateError(f"nothing to complete in state {cur.state}")
    return replace(cur, state=COMPLETE_COMMIT if cur.commit else COMPLETE_ABORT, parts=(),
                   start_ms=-1, update_ms=now_ms)


def expire(cur: TxnState) -> TxnState:
    """An idle settled id forgotten (its record becomes a tombstone)."""
    if cur.state not in SETTLED:
        raise InvalidTxnStateError(f"an id in state {cur.state} does not expire")
    return replace(cur, state=DEAD, parts=())
