"""The transaction coordinator's requests (docs/protocol.md "Transactions"):
InitProducerId with a transactional id, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions, over
``svc.txns`` (coordinator/txn_manager.py).

Checked here, at the edge, before the coordinator sees them: a
transactional id is 1-249 printable characters (a group name's rule); a
timeout is 1..``transaction_max_timeout_ms`` (INVALID_TRANSACTION_TIMEOUT);
an AddPartitionsToTxn names at most ``MAX_PARTS`` partitions, each of a
topic that exists (UNKNOWN_TOPIC_OR_PARTITION for that part; the request's
other parts then get OPERATION_NOT_ATTEMPTED, "not added", and nothing is
added: all or none, as Kafka); an
internal topic is refused (the offsets topic joins by AddOffsetsToTxn);
DescribeTransactions names at most ``MAX_IDS`` ids (only the first waits
for its partition to load; the others answer COORDINATOR_LOAD_IN_PROGRESS).
"""

from __future__ import annotations

from .. import limits
from ..coordinator.records import partition_for
from ..coordinator.txn_state import STATES
from ..errors import (CoordinatorNotAvailableError, InvalidRequestError,
                      InvalidTransactionTimeoutError, LogbrokerError, OperationNotAttemptedError,
                      TransactionalIdNotFoundError)
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import PartitionResult, TxnDescription, TxnListing
from ..coordinator.txn_manager import TxnCoordinator, TxnSettings
from ..coordinator.txn_markers import MarkerSender
from . import cluster_info
from .markers import write_markers

MAX_PARTS = 1_000  # partitions of one AddPartitionsToTxn
MAX_IDS = 1_000  # ids of one DescribeTransactions
MARKER_TIMEOUT_S = 35.0  # a peer's WriteTxnMarkers answer (its leader waits 30 s for acks)


def build_txn_coordinator(svc) -> TxnCoordinator:
    """The broker's transaction coordinator over ``svc.meta``'s transaction
    state host; markers to its own partitions through ``write_markers``, to
    its peers over the cluster's peer link."""
    meta = svc.meta
    sender = MarkerSender(meta, meta.me, lambda mks: write_markers(svc, mks),
                          meta.peer_dialler(), MARKER_TIMEOUT_S)
    return TxnCoordinator(meta.txn_host(), TxnSettings.of(svc.config), sender,
                          meta.new_producer_id)


def _check_id(tid: str) -> str:
    return limits.check_group_name(tid)


def _check_producer(producer_id, producer_epoch) -> None:
    limits.check_int(producer_id, "producer_id", -1, (1 << 63) - 1)
    limits.check_int(producer_epoch, "producer_epoch", -1, (1 << 15) - 1)


async def init_producer_id(svc, req: m.InitProducerId, session) -> m.InitProducerIdResponse:
    """Without a transactional id: an idempotent producer's id (api/cluster_info.py).
    With one: its producer id and a new epoch (the previous producer of the
    id fenced; its open transaction aborted: CONCURRENT_TRANSACTIONS until done)."""
    if not req.transactional_id:
        return await cluster_info.init_producer_id(svc, req, session)
    tid = _check_id(req.transactional_id)
    _check_producer(req.producer_id, req.producer_epoch)
    top = svc.config.transaction_max_timeout_ms
    if not isinstance(req.transaction_timeout_ms, int) or \
            not 1 <= req.transaction_timeout_ms <= top:
        raise InvalidTransactionTimeoutError(f"transaction_timeout_ms must be 1..{top} "
                                             f"(transaction_max_timeout_ms), got "
                                             f"{req.transaction_timeout_ms!r}")
    pid, epoch = await svc.txns.init_producer(tid, req.producer_id, req.producer_epoch,
                                              req.transaction_timeout_ms)
    return m.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)


async def add_partitions(svc, req: m.AddPartitionsToTxn, session) -> m.AddPartitionsToTxnResponse:
    tid = _check_id(req.transactional_id)
    _check_producer(req.producer_id, req.producer_epoch)
    if len(req.parts) > MAX_PARTS:
        raise InvalidRequestError(f"{len(req.parts)} partitions (limit {MAX_PARTS})")
    errors: dict = {}
    for t, p in req.parts:
        try:
            limits.check_topic_name(t)
            limits.check_partition(p)
            limits.check_not_internal((t,))  # the offsets topic joins by AddOffsetsToTxn
            svc.meta.leader_of(t, p)
        except LogbrokerError as exc:
            errors[(t, p)] = _err(exc)
    if errors:
        skipped = (OperationNotAttemptedError.code,
                   "not added: another partition of the request failed")
        return m.AddPartitionsToTxnResponse(parts=tuple(
            PartitionResult(t, p, *errors.get((t, p), skipped)) for t, p in req.parts))
    try:
        await svc.txns.add_partitions(tid, req.producer_id, req.producer_epoch, req.parts)
    except LogbrokerError as exc:
        return m.AddPartitionsToTxnResponse(parts=tuple(
            PartitionResult(t, p, *_err(exc)) for t, p in req.parts), error=exc.code,
            message=exc.message)
    return m.AddPartitionsToTxnResponse(parts=tuple(PartitionResult(t, p, 0, "")
                                                    for t, p in req.parts))


async def add_offsets(svc, req: m.AddOffsetsToTxn, session) -> m.AddOffsetsToTxnResponse:
    """``group``'s partition of the offsets topic joins the transaction (its
    marker tells the group coordinator the outcome), whether or not that
    partition has a leader yet (Kafka's rule: COORDINATOR_NOT_AVAILABLE here
    reaches the application through librdkafka)."""
    tid = _check_id(req.transactional_id)
    limits.check_group_name(req.group)
    _check_producer(req.producer_id, req.producer_epoch)
    try:  # the offsets topic is created if it is not yet (shielded: metadata/internal_topics.py)
        await svc.meta.coordinator_for(req.group, 0)
    except CoordinatorNotAvailableError:
        pass  # as Kafka: the partition joins without waiting for its leader (its marker waits)
    host = svc.meta.group_host()
    part = (host.topic, partition_for(req.group, host.partitions))
    await svc.txns.add_partitions(tid, req.producer_id, req.producer_epoch, (part,))
    return m.AddOffsetsToTxnResponse()


async def end_txn(svc, req: m.EndTxn, session) -> m.EndTxnResponse:
    tid = _check_id(req.transactional_id)
    _check_producer(req.producer_id, req.producer_epoch)
    await svc.txns.end(tid, req.producer_id, req.producer_epoch, bool(req.commit))
    return m.EndTxnResponse()


async def describe(svc, req: m.DescribeTransactions, session) -> m.DescribeTransactionsResponse:
    if len(req.transactional_ids) > MAX_IDS:
        raise InvalidRequestError(f"{len(req.transactional_ids)} ids (limit {MAX_IDS})")
    out = []
    for i, tid in enumerate(dict.fromkeys(req.transactional_ids)):
        try:
            _check_id(tid)
            p, view = await svc.txns.view(tid, wait=i == 0)  # one wait per request at most
            st = view.txns.get(tid)
            if st is None:
                raise TransactionalIdNotFoundError(f"unknown transactional id {tid!r}")
            out.append(TxnDescription(tid, 0, "", st.state, st.producer_id, st.producer_epoch,
                                      st.timeout_ms, st.start_ms, st.parts))
        except LogbrokerError as exc:
            out.append(TxnDescription(str(tid)[:limits.MAX_NAME_CHARS], *_err(exc), "", -1, -1,
                                      0, -1, ()))
    return m.DescribeTransactionsResponse(transactions=tuple(out))


async def list_transactions(svc, req: m.ListTransactions,
                            session) -> m.ListTransactionsResponse:
    """The ids this broker coordinates (loaded), in the named states (none named: all)."""
    wanted = set(req.states)
    unknown = wanted - set(STATES)
    if unknown:
        raise InvalidRequestError(f"unknown state(s) {sorted(unknown)[:5]}: one of "
                                  f"{', '.join(STATES)}")
    return m.ListTransactionsResponse(transactions=tuple(
        TxnListing(st.transactional_id, st.producer_id, st.state)
        for st in sorted(svc.txns.all(), key=lambda s: s.transactional_id)
        if not wanted or st.state in wanted))
