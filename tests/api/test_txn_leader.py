"""Transactions, the partition leader's side (issue 31): a real single
broker, in this process so its transaction markers can be written through
``api.markers.write_markers`` (what the transaction coordinator calls; a
single node takes no WriteTxnMarkers from the wire), everything else through
our protocol from raw connections in a thread: transactional produce,
read_committed Fetch stopping at the LSO with the aborted transactions,
ListOffsets isolation, a zombie's batch fenced, TxnOffsetCommit committed /
aborted / pending / overtaken by a plain commit, and a restarted broker
rebuilding them from the offsets log."""

from __future__ import annotations

import asyncio
import time

from logbroker.api.markers import write_markers
from logbroker.broker.config import BrokerConfig
from logbroker.broker.server import Broker
from logbroker.coordinator.records import partition_for
from logbroker.errors import (ClusterAuthorizationFailedError, InvalidProducerEpochError,
                              InvalidRequestError, TransactionCoordinatorFencedError,
                              UnstableOffsetCommitError)
from logbroker.limits import OFFSETS_TOPIC
from logbroker.protocol import messages as m
from logbroker.protocol.parts import TxnMarker
from logbroker.records.builder import build_batch
from tests.support.fixtures import RawConn

TOPIC = "txn-data"


def txn_batch(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return build_batch(list(values), producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)


class Site:
    """The broker (in this loop) and a raw connection used from a thread."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.conn: "RawConn | None" = None

    async def call(self, msg, timeout: float = 10.0):
        loop = asyncio.get_running_loop()
        if self.conn is None:
            self.conn = await loop.run_in_executor(None, RawConn, self.broker.port)
        return await loop.run_in_executor(None, self.conn.call, msg, timeout)

    async def markers(self, *marks: TxnMarker) -> tuple:
        return await write_markers(self.broker.services, marks)

    async def produce(self, data: bytes, partition: int = 0) -> tuple:
        resp = await self.call(m.Produce(acks=-1, parts=((TOPIC, partition, len(data)),),
                                         payload=(data,)))
        return resp.parts[0]

    async def fetch(self, offset: int, isolation: int, max_wait_ms: int = 0,
                    max_bytes: int = 1 << 20):
        return await self.call(m.Fetch(max_wait_ms=max_wait_ms, isolation=isolation,
                                       parts=((TOPIC, 0, offset, max_bytes),)))

    async def latest(self, isolation: int) -> int:
        resp = await self.call(m.ListOffsets(parts=((TOPIC, 0, m.LATEST),), isolation=isolation))
        assert resp.parts[0].error == 0, resp
        return resp.parts[0].offset

    async def pid(self) -> int:
        resp = await self.call(m.InitProducerId())
        assert resp.error == 0, resp
        return resp.producer_id

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def run(tmp_path, body) -> None:
    """``body(site, restart)`` against a broker on ``tmp_path``; ``restart()``
    stops it cleanly and starts a new one on the same data dir."""
    async def main() -> None:
        def config():
            # the leader's side alone: its batches are not verified with a coordinator
            # (tests/coordinator/test_txn_broker.py: a forged batch refused when they are)
            return BrokerConfig.load(None, data_dir=str(tmp_path / "data"), port=0,
                                     offsets_topic_num_partitions=4,
                                     transaction_partition_verification_enable=False)
        broker = Broker(config())
        await broker.start()
        site = Site(broker)

        async def restart() -> None:
            site.close()
            await site.broker.shutdown()
            site.broker = Broker(config())
            await site.broker.start()
        try:
            await body(site, restart)
        finally:
            site.close()
            await site.broker.shutdown()
    asyncio.run(main())


def test_read_committed_stops_at_the_lso_and_returns_the_aborted_transactions(tmp_path):
    async def body(site: Site, restart) -> None:
        assert (await site.call(m.CreateTopics(topics=((TOPIC, 1, {}),)))).topics[0][1] == 0
        a, b = await site.pid(), await site.pid()
        assert (await site.produce(txn_batch(a, 0, 0, b"a1", b"a2"))).error == 0  # offsets 0-1
        assert (await site.produce(build_batch([b"plain"]))).error == 0  # offset 2
        assert (await site.produce(txn_batch(b, 0, 0, b"b1"))).error == 0  # offset 3
        # a's transaction is open from offset 0: read_committed sees nothing yet
        got = await site.fetch(0, 1)
        assert got.parts[0].error == 0 and got.parts[0].nbytes == 0, got
        assert got.txn == ((TOPIC, 0, 0, ()),)
        assert await site.latest(1) == 0 and await site.latest(0) == 4
        by_time = [(await site.call(m.ListOffsets(parts=((TOPIC, 0, 0),), isolation=i))).parts[0]
                   for i in (0, 1)]
        assert [p.offset for p in by_time] == [0, -1], by_time  # never past the LSO
        unc = await site.fetch(0, 0)
        assert unc.parts[0].nbytes > 0 and unc.txn == ()  # read_uncommitted as before
        # a aborts: the LSO moves to b's first offset; the aborted list names a
        res = await site.markers(TxnMarker(a, 0, False, 0, TOPIC, 0))
        assert [r.error for r in res] == [0], res
        got = await site.fetch(0, 1)
        assert got.txn[0].last_stable_offset == 3 and got.txn[0].aborted == ((a, 0),), got
        assert got.parts[0].nbytes > 0 and await site.latest(1) == 3
        # a long poll at the LSO wakes when b's commit marker moves it
        started = time.monotonic()
        poll = asyncio.ensure_future(site.fetch(3, 1, max_wait_ms=8000))
        await asyncio.sleep(0)  # the poll's thread is on its way
        res = await site.markers(TxnMarker(b, 0, True, 0, TOPIC, 0))
        assert res[0].error == 0, res
        got = await poll  # woken by the marker's append or its fsync (the LSO is <= the HW)
        assert got.parts[0].nbytes > 0 and time.monotonic() - started < 6, got
        assert got.txn[0].last_stable_offset in (5, 6), got
        got = await site.fetch(3, 1)  # the marker is acknowledged (write_markers returned)
        # offsets: a 0-1, plain 2, b 3, a's abort marker 4, b's commit marker 5; a's
        # transaction overlaps the read (its marker is in it): still listed
        assert got.txn[0].last_stable_offset == 6 and got.txn[0].aborted == ((a, 0),), got
        assert await site.latest(1) == await site.latest(0) == 6
        # a zombie: the coordinator fenced a with epoch 1; its epoch-0 batch is refused
        res = await site.markers(TxnMarker(a, 1, False, 1, TOPIC, 0))
        assert res[0].error == 0, res
        part = await site.produce(txn_batch(a, 0, 2, b"zombie"))
        assert part.error == InvalidProducerEpochError.code, part
        res = await site.markers(TxnMarker(a, 0, True, 1, TOPIC, 0))  # an older epoch
        assert res[0].error == InvalidProducerEpochError.code, res
        res = await site.markers(TxnMarker(a, 1, True, 0, TOPIC, 0))  # an older coordinator
        assert res[0].error == TransactionCoordinatorFencedError.code, res
        res = await site.markers(TxnMarker(a, 1, True, 0, "no-such-topic", 0))
        assert res[0].error == 3, res
        # what the LSO and the aborted index say survives a restart
        await restart()
        got = await site.fetch(0, 1)
        assert got.txn[0].last_stable_offset == await site.latest(0), got
        assert got.txn[0].aborted[:1] == ((a, 0),), got
        # a client may not write markers: a single node takes none from the wire
        resp = await site.call(m.WriteTxnMarkers(markers=((a, 1, True, 1, TOPIC, 0),)))
        assert resp.error == InvalidRequestError.code, resp
        assert ClusterAuthorizationFailedError.code != resp.error
    run(tmp_path, body)


def test_txn_offset_commits_committed_aborted_pending_and_reloaded(tmp_path):
    async def body(site: Site, restart) -> None:
        assert (await site.call(m.CreateTopics(topics=((TOPIC, 2, {}),)))).topics[0][1] == 0
        n = site.broker.services.groups.host.partitions

        async def txn_commit(group: str, pid: int, offset: int, epoch: int = 0):
            resp = await site.call(m.TxnOffsetCommit(transactional_id=f"t-{group}",
                                                     producer_id=pid, producer_epoch=epoch,
                                                     group=group,
                                                     offsets=((TOPIC, 0, offset, "md"),)))
            return resp

        async def committed(group: str, stable: bool = False):
            resp = await site.call(m.FetchOffsets(group=group, parts=((TOPIC, 0),),
                                                  require_stable=stable))
            return resp.error if resp.error else resp.parts[0].offset

        async def marker(group: str, pid: int, commit: bool, epoch: int = 0):
            res = await site.markers(TxnMarker(pid, epoch, commit, 0, OFFSETS_TOPIC,
                                               partition_for(group, n)))
            assert res[0].error == 0, res

        pids = {g: await site.pid() for g in ("done", "gone", "open", "plain")}
        for g, pid in pids.items():
            resp = await txn_commit(g, pid, 5)
            assert resp.error == 0 and resp.parts[0].error == 0, resp
        # pending: invisible, and unstable to a reader that asks for stable offsets
        assert await committed("done") == -1
        assert await committed("done", stable=True) == UnstableOffsetCommitError.code
        await marker("done", pids["done"], True)
        await marker("gone", pids["gone"], False)
        assert await committed("done", stable=True) == 5
        assert await committed("gone", stable=True) == -1
        # a plain commit written after the transactional one wins at COMMIT (Kafka's rule)
        resp = await site.call(m.CommitOffsets(group="plain", offsets=((TOPIC, 0, 9, ""),)))
        assert resp.parts[0].error == 0, resp
        assert await committed("plain") == 9
        await marker("plain", pids["plain"], True)
        assert await committed("plain", stable=True) == 9
        # a second transaction of "done"'s producer: pending again
        assert (await txn_commit("done", pids["done"], 7)).parts[0].error == 0
        assert await committed("done") == 5
        # a new coordinator rebuilds committed, aborted and pending ones from the log
        await restart()
        assert await committed("done") == 5
        assert await committed("gone") == -1 and await committed("plain") == 9
        assert await committed("open") == -1
        assert await committed("open", stable=True) == UnstableOffsetCommitError.code
        await marker("open", pids["open"], True)
        await marker("done", pids["done"], True)
        assert await committed("open", stable=True) == 5
        assert await committed("done", stable=True) == 7
        # a fenced producer epoch is refused per part; the offsets stay
        await marker("done", pids["done"], False, epoch=1)
        resp = await txn_commit("done", pids["done"], 99, epoch=0)
        assert resp.parts[0].error == InvalidProducerEpochError.code, resp
        assert await committed("done", stable=True) == 7
    run(tmp_path, body)


def test_consume_transform_produce_through_the_coordinator(tmp_path):
    """The whole loop of one producer against one broker process, over the
    wire: its data and its consumer's offsets commit together, then abort
    together (the coordinator's markers reach the data partition and the
    group's offsets partition)."""
    from tests.support.fixtures import BrokerProcess, wait_until

    with BrokerProcess(tmp_path / "data") as b:
        c = RawConn(b.port)
        assert c.call(m.CreateTopics(topics=((TOPIC, 1, {}),))).topics[0][1] == 0

        def retried(msg):
            def answered():
                resp = c.call(msg)
                return None if resp.error in (51, 14, 15) else resp
            return wait_until(answered, 10, f"{type(msg).__name__} answered", interval=0.05)

        init = retried(m.InitProducerId(transactional_id="etl", transaction_timeout_ms=60_000))
        pid, epoch = init.producer_id, init.producer_epoch
        ids = dict(transactional_id="etl", producer_id=pid, producer_epoch=epoch)

        def one_transaction(seq: int, value: bytes, offset: int, commit: bool) -> int:
            assert retried(m.AddPartitionsToTxn(**ids, parts=((TOPIC, 0),))).parts[0][2] == 0
            data = txn_batch(pid, epoch, seq, value)
            part = c.call(m.Produce(acks=-1, parts=((TOPIC, 0, len(data)),), payload=(data,),
                                    transactional_id="etl")).parts[0]
            assert part.error == 0, part
            assert retried(m.AddOffsetsToTxn(**ids, group="eos")).error == 0
            resp = c.call(m.TxnOffsetCommit(**ids, group="eos", offsets=((TOPIC, 0, offset, ""),)))
            assert resp.error == 0 and resp.parts[0].error == 0, resp
            assert retried(m.EndTxn(**ids, commit=commit)).error == 0
            return part.base_offset

        def stable_offset():
            resp = c.call(m.FetchOffsets(group="eos", parts=((TOPIC, 0),), require_stable=True))
            return None if resp.error == UnstableOffsetCommitError.code else resp

        first = one_transaction(0, b"kept", 1, True)
        assert wait_until(stable_offset, 10, "the commit marker").parts[0].offset == 1
        second = one_transaction(1, b"dropped", 2, False)
        assert wait_until(stable_offset, 10, "the abort marker").parts[0].offset == 1

        def settled():
            got = c.call(m.Fetch(max_wait_ms=0, isolation=1, parts=((TOPIC, 0, 0, 1 << 20),)))
            return got if got.txn and got.txn[0].last_stable_offset == got.parts[0].high_watermark \
                else None
        got = wait_until(settled, 10, "the data partition's markers")
        assert got.txn[0].aborted == ((pid, second),) and first < second, got
        c.close()


def test_the_aborted_list_covers_the_returned_bytes_only(tmp_path):
    """A read_committed fetch cut by max_bytes lists the aborted transactions
    up to the first indexed batch past its bytes, not the partition's later ones."""
    async def body(site: Site, restart) -> None:
        assert (await site.call(m.CreateTopics(topics=((TOPIC, 1, {}),)))).topics[0][1] == 0
        a, b = await site.pid(), await site.pid()
        assert (await site.produce(txn_batch(a, 0, 0, b"a"))).error == 0  # offset 0
        assert (await site.markers(TxnMarker(a, 0, False, 0, TOPIC, 0)))[0].error == 0
        for i in range(100):  # ~25 KiB of plain batches: several index entries
            assert (await site.produce(build_batch([b"p" * 200]))).error == 0
        later = (await site.produce(txn_batch(b, 0, 0, b"b"))).base_offset
        assert (await site.markers(TxnMarker(b, 0, False, 0, TOPIC, 0)))[0].error == 0
        cut = await site.fetch(0, 1, max_bytes=600)
        assert 0 < cut.parts[0].nbytes <= 600 and cut.txn[0].aborted == ((a, 0),), cut
        whole = await site.fetch(0, 1)
        assert whole.txn[0].aborted == ((a, 0), (b, later)), whole
        tail = await site.fetch(later, 1, max_bytes=1)  # at least one batch, whatever max_bytes
        assert tail.txn[0].aborted == ((b, later),), tail
    run(tmp_path, body)
