"""An operator's transaction tools at a partition's leader (docs/protocol.md
60, 61): ``DescribeProducers`` lists each partition's open transactions
(``Log.open_transactions``: producer, epoch, first offset; the coordinator
epoch of the producer's last marker; the first batch's timestamp), for
``logbroker transactions hanging``; ``AbortTxnPartition`` writes an abort
marker for one producer's open transaction on a partition (Kafka's
kafka-transactions.sh ``abort``), through ``write_markers`` as a
coordinator's marker (acks=all; on the offsets topic the group coordinator
drops its pending offsets).

Abort: the producer must have an open transaction on the partition
(INVALID_TXN_STATE otherwise: no stray marker from a typo); its epoch and
coordinator epoch default (-1) to the open transaction's epoch and the
coordinator epoch of its last marker there (at least 0), as Kafka's tool
takes them from DescribeProducers; storage refuses an older epoch (47) or
coordinator epoch (52). Meant for a hanging transaction: aborting one its
coordinator still tracks aborts its records there, whatever it decides.
Bounds: ``MAX_PARTS`` partitions per request, ``MAX_OPEN`` open
transactions listed per partition.
"""

from __future__ import annotations

from .. import limits
from ..errors import InvalidRequestError, InvalidTxnStateError, LogbrokerError
from ..errors import code_and_message as _err
from ..protocol import messages as m
from ..protocol.parts import PartitionResult, TxnMarker
from ..protocol.txn_admin_messages import OpenTxn, PartitionProducers
from ..records import format as fmt
from .edge import check_partition_key
from .markers import write_markers

MAX_PARTS = 1_000
MAX_OPEN = 1_000
_TS = slice(27, 35)  # first_timestamp in a batch header (both magics)


def _first_timestamp(lg, offset: int) -> int:
    try:
        head = lg.read(offset, fmt.HEADER_SIZE)
    except LogbrokerError:
        return -1
    if len(head) < fmt.HEADER_SIZE:
        return -1
    return int.from_bytes(head[_TS], "big", signed=True)


async def describe_producers(svc, req: m.DescribeProducers,
                             session) -> m.DescribeProducersResponse:
    if len(req.parts) > MAX_PARTS:
        raise InvalidRequestError(f"{len(req.parts)} partitions (limit {MAX_PARTS})")
    out = []
    for topic, partition in req.parts:
        try:
            check_partition_key(topic, partition)
            lg, _ = svc.meta.epoch_of(topic, partition)  # this broker leads it
            rows = []
            for pid, epoch, first in lg.open_transactions()[:MAX_OPEN]:
                rows.append(OpenTxn(pid, epoch, lg.txn_producer(pid)[1], first,
                                    _first_timestamp(lg, first)))
            out.append(PartitionProducers(topic, partition, 0, "", tuple(rows)))
        except LogbrokerError as exc:
            out.append(PartitionProducers(str(topic)[:limits.MAX_NAME_CHARS],
                                          partition if isinstance(partition, int) else -1,
                                          *_err(exc), ()))
    return m.DescribeProducersResponse(parts=tuple(out))


async def abort_txn_partition(svc, req: m.AbortTxnPartition,
                              session) -> m.AbortTxnPartitionResponse:
    if len(req.parts) > MAX_PARTS:
        raise InvalidRequestError(f"{len(req.parts)} partitions (limit {MAX_PARTS})")
    results: dict = {}
    markers = []
    for spec in req.parts:
        try:
            check_partition_key(spec.topic, spec.partition)
            limits.check_int(spec.producer_id, "producer_id", 0, limits.MAX_OFFSET)
            limits.check_int(spec.producer_epoch, "producer_epoch", -1, 32767)
            limits.check_int(spec.coordinator_epoch, "coordinator_epoch", -1, limits.MAX_INT32)
            lg, _ = svc.meta.epoch_of(spec.topic, spec.partition)
            opened = lg.open_transaction_of(spec.producer_id)
            if opened is None:
                raise InvalidTxnStateError(f"{spec.topic}-{spec.partition}: producer "
                                           f"{spec.producer_id} has no open transaction here")
            epoch = opened[0] if spec.producer_epoch < 0 else spec.producer_epoch
            coord = max(0, lg.txn_producer(spec.producer_id)[1]) \
                if spec.coordinator_epoch < 0 else spec.coordinator_epoch
            markers.append(TxnMarker(spec.producer_id, epoch, False, coord, spec.topic,
                                     spec.partition))
        except LogbrokerError as exc:
            results[(spec.topic, spec.partition, spec.producer_id)] = _err(exc)
    for mk, r in zip(markers, await write_markers(svc, tuple(markers)) if markers else ()):
        results[(mk.topic, mk.partition, mk.producer_id)] = (r.error, r.message)
    return m.AbortTxnPartitionResponse(parts=tuple(
        PartitionResult(str(s.topic)[:limits.MAX_NAME_CHARS], s.partition,
                        *results[(s.topic, s.partition, s.producer_id)]) for s in req.parts))
