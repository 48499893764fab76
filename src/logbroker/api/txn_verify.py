"""Transactional batches verified with their coordinator (Kafka's KIP-890
part 1): no producer opens a transaction on a partition its transaction
coordinator does not know of, so no transaction hangs there (its LSO held,
read_committed readers stalled, retention stopped).

``PartitionVerifier.needed(topic, partition, data, tid)`` is asked by the
Produce handler (api/produce.py) for every part, in the reading turn:
None when the part may be appended now (no transactional batch; its
producer's transaction is already open on the partition in that epoch; a
verification of that producer, epoch and partition is cached), else the
``(producer id, epoch)`` to verify. Such a part is ``defer``red: the
coordinator of the Produce's ``transactional_id`` is asked (this broker's
own ``TxnCoordinator.verify`` when it coordinates the id, else one
``VerifyTxnPartitions`` to it over the brokers' peer link: one round trip
for the request's parts of one producer) in a task, off the handler's
path; the part is appended in a later turn once verified, or answered
INVALID_TXN_STATE / INVALID_PRODUCER_EPOCH. A coordinator that cannot
answer (not found, loading, unreachable, 5 s) gives NOT_ENOUGH_REPLICAS,
retriable, as Kafka converts it.

Ordering: a producer's later transactional batches on a partition whose
verification is pending wait behind it (one chain per partition and
producer), so they are appended in the order read and its sequence
numbers stay in order; other producers and partitions are not held. A
part whose answer already went out (the produce's timeout) is not
appended. A transactional batch without the request's ``transactional_id``
is refused (INVALID_TXN_STATE): our Producer and Kafka's clients send it.

The cache holds (partition, producer) -> (epoch, leader epoch) for
``CACHE_S``; a marker this broker writes for the producer on the partition
drops it (the next transaction there is verified again), and a leadership
change makes it stale (the leader epoch is part of the match).

``verify_txn_partitions`` is the coordinator's handler of the peer request:
brokers only (the peer proof, as WriteTxnMarkers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict

from .. import limits
from ..errors import (InvalidProducerEpochError, InvalidRequestError, InvalidTxnStateError,
                      LogbrokerError,
                      NotEnoughReplicasError, UnknownError, for_code)
from ..protocol import messages as m
from ..protocol.parts import PartitionResult, ProducedPart
from ..records import format as fmt
from ..records.walker import header_positions
from ..storage.incoming import part_buffers
from ..cluster.peer_calls import PeerCalls
from .markers import check_broker

log = logging.getLogger("logbroker.transactions")
CACHE_S = 60.0  # a verified (partition, producer, epoch) is trusted this long
MAX_CACHED = 100_000  # entries (the oldest dropped beyond)
VERIFY_TIMEOUT_S = 5.0  # the coordinator's answer, else NOT_ENOUGH_REPLICAS (retriable)
MAX_PARTS = 1_000  # partitions of one VerifyTxnPartitions
# the coordinator's verdicts (any other error of its: NOT_ENOUGH_REPLICAS, retriable)
_STATE_ERRORS = frozenset({InvalidTxnStateError.code, InvalidProducerEpochError.code})


def producer_of(part) -> "tuple[int, int] | None":
    """``(producer id, epoch)`` of the transactional (not control) batches of
    a part (in any form the handler gets it: ``incoming.part_buffers``),
    None when it has none; INVALID_TXN_STATE when they belong to more than
    one producer or epoch (a walk of the headers: what is not a whole batch
    is storage's to refuse)."""
    found = None
    for data in part_buffers(part):
        found = _producer_in(data, found)
    return found


def _producer_in(data, found: "tuple[int, int] | None") -> "tuple[int, int] | None":
    for pos in header_positions(data):
        attrs = data[pos + fmt.CRC_START] << 8 | data[pos + fmt.CRC_START + 1]
        if not attrs & fmt.TXN_BITS:
            continue  # no transactional or control bit of either magic: the common batch
        magic = data[pos + fmt.STAMP_SIZE]
        if magic in (fmt.MAGIC, fmt.KAFKA_MAGIC):
            transactional, control = fmt.txn_flags(magic, attrs)
            if transactional and not control:
                got = (int.from_bytes(data[pos + 43:pos + 51], "big", signed=True),
                       int.from_bytes(data[pos + 51:pos + 53], "big", signed=True))
                if found is not None and got != found:
                    raise InvalidTxnStateError("transactional batches of two producers (or "
                                               "epochs) in one part")
                found = got
    return found


class _Part:
    __slots__ = ("index", "topic", "partition", "data", "pid", "epoch", "prev", "fut", "done",
                 "finished")

    def __init__(self, index, topic, partition, data, pid, epoch, prev, fut, done) -> None:
        self.index, self.topic, self.partition, self.data = index, topic, partition, data
        self.pid, self.epoch, self.prev, self.fut, self.done = pid, epoch, prev, fut, done
        self.finished = False

    def finish(self, exc) -> None:
        if not self.finished:
            self.finished = True
            self.done(exc)


class PartitionVerifier:
    def __init__(self, svc) -> None:
        self.svc, self.meta = svc, svc.meta
        self._peers = PeerCalls(svc.meta.peer_dialler(), NotEnoughReplicasError)
        self._cache: "OrderedDict[tuple, tuple]" = OrderedDict()
        self._chains: dict[tuple, asyncio.Future] = {}
        self._tasks: set = set()
        self.asked = 0  # verifications sent to a coordinator (round trips, local ones included)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._peers.close()

    # -- the reading turn ---------------------------------------------------------------
    def needed(self, topic: str, partition: int, data, tid) -> "tuple[int, int] | None":
        """None: append now; else the (producer id, epoch) to verify first."""
        found = producer_of(data)
        if found is None:
            return None
        if not tid:
            raise InvalidTxnStateError(f"{topic}-{partition}: a transactional batch needs the "
                                       "request's transactional_id")
        limits.check_group_name(tid)  # INVALID_REQUEST for a malformed one
        if (topic, partition, found[0]) in self._chains:
            return found  # behind its producer's pending batch on this partition
        return None if self._known(topic, partition, *found) else found

    def _known(self, topic: str, partition: int, pid: int, epoch: int) -> bool:
        """The producer's transaction is open on the partition (an older
        epoch too: storage fences it), or was verified (cached)."""
        lg, leader_epoch = self.meta.epoch_of(topic, partition)
        opened = lg.open_transaction_of(pid)
        if opened is not None and epoch <= opened[0]:
            return True
        hit = self._cache.get((topic, partition, pid))
        return hit is not None and hit[0] == epoch and hit[1] == leader_epoch \
            and hit[2] > time.monotonic()

    def defer(self, answer, acks: int, tid: str, parts: list) -> None:
        """``parts``: ``(index, topic, partition, data, (pid, epoch))`` of
        ``answer``'s results, appended once verified (module docstring)."""
        loop = asyncio.get_running_loop()
        items = []
        for index, topic, partition, data, (pid, epoch) in parts:
            key = (topic, partition, pid)
            fut = loop.create_future()
            prev = self._chains.get(key)
            self._chains[key] = fut
            items.append(_Part(index, topic, partition, data, pid, epoch, prev, fut,
                               answer.callback(index)))
        task = loop.create_task(self._run(answer, acks, tid, items))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def forget(self, producer_id: int, topic: str, partition: int) -> None:
        """A marker of the producer was written on the partition: its next
        transaction there is verified again."""
        self._cache.pop((topic, partition, producer_id), None)

    # -- later turns --------------------------------------------------------------------
    async def _run(self, answer, acks: int, tid: str, items: list) -> None:
        try:
            own = {id(it.fut) for it in items}  # a request's parts of one partition: in order
            prevs = [it.prev for it in items
                     if it.prev is not None and id(it.prev) not in own and not it.prev.done()]
            if prevs:
                await asyncio.wait(prevs)
            ask: dict[tuple, list] = {}
            for it in items:
                try:
                    if not self._known(it.topic, it.partition, it.pid, it.epoch):
                        ask.setdefault((it.pid, it.epoch), []).append(it)
                except LogbrokerError as exc:
                    it.finish(exc)
            verdicts: dict = {}
            for (pid, epoch), its in ask.items():
                verdicts.update(await self._verify(tid, pid, epoch, its))
            for it in items:  # appended in one turn, in the order read
                if not it.finished:
                    self._append(answer, acks, it, verdicts)
        except asyncio.CancelledError:
            for it in items:
                it.finish(NotEnoughReplicasError("the broker is stopping"))
            raise
        except Exception:  # noqa: BLE001 - a bug: this produce's parts answered, others unaffected
            log.exception("verifying transactional batches failed")
            for it in items:
                it.finish(UnknownError("internal error verifying the transaction (see broker log)"))
        finally:
            for it in items:
                if not it.fut.done():
                    it.fut.set_result(None)
                key = (it.topic, it.partition, it.pid)
                if self._chains.get(key) is it.fut:
                    del self._chains[key]

    def _append(self, answer, acks: int, it: _Part, verdicts: dict) -> None:
        if answer.done():
            return  # answered (timed out): not appended, the producer retries
        exc = verdicts.get((it.topic, it.partition))
        if exc is not None:
            it.finish(exc)
            return
        meta = self.meta
        try:
            appended = meta.append(it.topic, it.partition, it.data, acks)
        except LogbrokerError as err:
            it.finish(err)
            return
        if (it.topic, it.partition) in verdicts:  # verified now (None): remembered
            self._remember(it)
        info = appended.info
        traffic = self.svc.traffic
        if traffic is not None and info.batches:
            traffic.produced(it.topic, it.partition, info.size,
                             info.last_offset - info.first_offset + 1)
        answer.results[it.index] = ProducedPart(it.topic, it.partition, answer.results[it.index]
                                                .error, "", info.first_offset,
                                                appended.log.log_start_offset)
        if acks == -1:
            if not meta.when_acked(appended, acks, it.finish):
                it.finish(None)
        else:
            meta.when_acked(appended, acks, None)
            it.finish(None)

    def _remember(self, it: _Part) -> None:
        try:
            _, leader_epoch = self.meta.epoch_of(it.topic, it.partition)
        except LogbrokerError:
            return
        key = (it.topic, it.partition, it.pid)
        self._cache.pop(key, None)
        self._cache[key] = (it.epoch, leader_epoch, time.monotonic() + CACHE_S)
        while len(self._cache) > MAX_CACHED:
            self._cache.popitem(last=False)

    async def _verify(self, tid: str, pid: int, epoch: int, its: list) -> dict:
        """(topic, partition) -> None (verified) or the part's error."""
        parts = tuple(dict.fromkeys((it.topic, it.partition) for it in its))
        self.asked += 1
        try:
            answers = await asyncio.wait_for(self._ask(tid, pid, epoch, parts), VERIFY_TIMEOUT_S)
        except (LogbrokerError, OSError, TimeoutError) as exc:
            why = exc.message if isinstance(exc, LogbrokerError) else (str(exc) or "timed out")
            err = NotEnoughReplicasError(f"the transaction coordinator of {tid!r} could not "
                                         f"verify the transaction: {why}")
            return dict.fromkeys(parts, err)
        out = dict.fromkeys(parts, InvalidTxnStateError(f"not verified by the coordinator of "
                                                        f"{tid!r}"))
        for t, p, code, message in answers:
            if (t, p) in out:
                if code == 0:
                    out[(t, p)] = None
                elif code in _STATE_ERRORS:
                    out[(t, p)] = for_code(code)(message)
                else:
                    out[(t, p)] = NotEnoughReplicasError(
                        f"the transaction coordinator of {tid!r} could not verify the "
                        f"transaction: {message}")
        return out

    async def _ask(self, tid: str, pid: int, epoch: int, parts: tuple) -> tuple:
        broker, _, _ = await self.meta.coordinator_for(tid, 1)
        if broker == self.meta.me:
            return await self.svc.txns.verify(tid, pid, epoch, parts)
        resp = await self._peers.call(broker, m.VerifyTxnPartitions(
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, parts=parts),
            VERIFY_TIMEOUT_S)
        return resp.parts


async def verify_txn_partitions(svc, req: m.VerifyTxnPartitions,
                                session) -> m.VerifyTxnPartitionsResponse:
    """The coordinator's side of a peer's question: brokers only."""
    check_broker(svc.meta, session)
    if len(req.parts) > MAX_PARTS:
        raise InvalidRequestError(f"{len(req.parts)} partitions (limit {MAX_PARTS})")
    limits.check_group_name(req.transactional_id)
    limits.check_int(req.producer_id, "producer_id", 0, limits.MAX_OFFSET)
    limits.check_int(req.producer_epoch, "producer_epoch", 0, 32767)
    for t, p in req.parts:
        limits.check_topic_name(t)
        limits.check_partition(p)
    out = await svc.txns.verify(req.transactional_id, req.producer_id, req.producer_epoch,
                                req.parts)
    return m.VerifyTxnPartitionsResponse(parts=tuple(PartitionResult(*r) for r in out))
