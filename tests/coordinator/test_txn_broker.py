"""The transaction coordinator on one real broker, through our protocol
(raw requests): init, add partitions, commit and abort, a zombie fenced by a
second InitProducerId, a timeout abort, a kill -9 mid-transaction and a
Prepare* record finished after a restart; the markers' effect on a
partition (LSO, aborted transactions, a zombie's batch fenced)."""

from __future__ import annotations

import pytest

from logbroker.coordinator import txn_state as ts
from logbroker.coordinator.txn_records import TOPIC, encode, partition_for
from logbroker.protocol import messages as m
from logbroker.records.builder import build_batch
from tests.support.fixtures import BrokerProcess, RawConn, open_store, wait_until

CONFIG = {"transaction_abort_timed_out_check_interval_ms": 100}


@pytest.fixture(scope="module")
def txn_broker(tmp_path_factory):
    """One broker for the tests that use ids and topics of their own."""
    with BrokerProcess(tmp_path_factory.mktemp("txn") / "data", config=CONFIG) as b:
        yield b


def _setup(b) -> RawConn:
    c = RawConn(b.port)
    assert c.call(m.CreateTopics(topics=(("orders", 2, {}),))).topics[0][1] in (0, 36)
    return c


def _retry(c: RawConn, msg, timeout: float = 10.0):
    """``msg`` until it is not answered CONCURRENT_TRANSACTIONS or LOAD_IN_PROGRESS."""
    def answered():
        resp = c.call(msg)
        return None if resp.error in (51, 14) else resp
    return wait_until(answered, timeout, f"{type(msg).__name__} answered", interval=0.05)


def _init(c, tid, timeout_ms=60_000, pid=-1, epoch=-1):
    resp = _retry(c, m.InitProducerId(transactional_id=tid, transaction_timeout_ms=timeout_ms,
                                      producer_id=pid, producer_epoch=epoch))
    assert resp.error == 0, resp
    return resp.producer_id, resp.producer_epoch


def _add(c, tid, pid, epoch, parts=(("orders", 0), ("orders", 1))):
    return c.call(m.AddPartitionsToTxn(transactional_id=tid, producer_id=pid,
                                       producer_epoch=epoch, parts=parts))


def _describe(c, tid):
    return c.call(m.DescribeTransactions(transactional_ids=(tid,))).transactions[0]


def _state(c, tid, want: str, timeout: float = 10.0):
    return wait_until(lambda: (d := _describe(c, tid)).state == want and d, timeout,
                      f"{tid} in state {want}", interval=0.02)


def test_commit_abort_and_the_requests_errors(txn_broker):
    c = _setup(txn_broker)
    found = c.call(m.FindCoordinator(group="etl", key_type=1))
    assert (found.error, found.port) == (0, txn_broker.port)
    assert c.call(m.FindCoordinator(group="etl", key_type=7)).error == 42
    pid, epoch = _init(c, "etl")
    assert epoch == 0
    assert all(p.error == 0 for p in _add(c, "etl", pid, epoch).parts)
    d = _describe(c, "etl")
    assert (d.state, d.producer_id, d.parts, d.timeout_ms) == ("Ongoing", pid,
                                                              (("orders", 0), ("orders", 1)), 60_000)
    assert d.start_ms > 0
    assert c.call(m.EndTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch,
                           commit=True)).error == 0
    d = _state(c, "etl", "CompleteCommit")
    assert d.parts == () and d.start_ms == -1
    assert _add(c, "etl", pid, epoch, (("orders", 1),)).parts[0].error == 0
    assert c.call(m.AddOffsetsToTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch,
                                    group="billing")).error == 0
    offsets_part = ("__consumer_offsets", partition_for("billing", 16))
    assert offsets_part in _describe(c, "etl").parts
    assert c.call(m.EndTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch,
                           commit=False)).error == 0
    _state(c, "etl", "CompleteAbort")
    listed = c.call(m.ListTransactions(states=("CompleteAbort",))).transactions
    assert ("etl", pid, "CompleteAbort") in listed
    # errors: no open transaction, an unknown partition (nothing added), an internal topic,
    # a timeout out of bounds, an unknown id, a producer id not this id's
    assert c.call(m.EndTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch,
                           commit=True)).error == 48
    parts = _add(c, "etl", pid, epoch, (("orders", 0), ("orders", 9))).parts
    assert [p.error for p in parts] == [55, 3]  # OPERATION_NOT_ATTEMPTED beside the refused one
    assert _describe(c, "etl").state == "CompleteAbort"
    assert _add(c, "etl", pid, epoch, ((TOPIC, 0),)).parts[0].error == 17
    assert c.call(m.InitProducerId(transactional_id="x", transaction_timeout_ms=0)).error == 50
    assert c.call(m.InitProducerId(transactional_id="x",
                                   transaction_timeout_ms=900_001)).error == 50
    assert _describe(c, "nope").error == 105
    assert _add(c, "etl", pid + 1, epoch).error == 49
    # the idempotent path is as before
    plain = c.call(m.InitProducerId())
    assert plain.error == 0 and plain.producer_epoch == 0 and plain.producer_id != pid


def test_a_zombie_is_fenced_by_a_second_init(txn_broker):
    c = _setup(txn_broker)
    pid, epoch = _init(c, "zombie")
    assert _add(c, "zombie", pid, epoch).parts[0].error == 0
    first = c.call(m.InitProducerId(transactional_id="zombie", transaction_timeout_ms=60_000))
    assert first.error == 51  # its open transaction is being aborted
    pid2, epoch2 = _init(c, "zombie")
    assert (pid2, epoch2) == (pid, 2)  # bumped by the abort, then by this init
    d = _describe(c, "zombie")
    assert (d.state, d.producer_epoch) == ("Empty", 2)
    assert c.call(m.EndTxn(transactional_id="zombie", producer_id=pid, producer_epoch=epoch,
                           commit=True)).error == 90
    assert _add(c, "zombie", pid, epoch).error == 90
    assert _add(c, "zombie", pid2, epoch2).parts[0].error == 0


def test_a_timed_out_transaction_is_aborted_with_the_epoch_bumped(txn_broker):
    c = _setup(txn_broker)
    pid, epoch = _init(c, "slow", timeout_ms=300)
    assert _add(c, "slow", pid, epoch).parts[0].error == 0
    d = _state(c, "slow", "CompleteAbort")
    assert d.producer_epoch == epoch + 1
    assert c.call(m.EndTxn(transactional_id="slow", producer_id=pid, producer_epoch=epoch,
                           commit=True)).error == 90
    # KIP-360: the timed-out producer recovers with its id and old epoch, no second bump
    assert _init(c, "slow", 60_000, pid, epoch) == (pid, epoch + 1)


def test_state_survives_a_kill_and_prepare_is_finished_after_a_restart(tmp_path):
    b = BrokerProcess(tmp_path / "data", config=CONFIG).start()
    try:
        c = _setup(b)
        pid, epoch = _init(c, "open")
        assert _add(c, "open", pid, epoch).parts[0].error == 0
        pid2, _ = _init(c, "decided")
        b.kill()  # kill -9: the acknowledged records are durable
        # a coordinator that died between PrepareCommit and its markers: the record alone
        store = open_store(tmp_path / "data")
        try:
            n = store.topics.get(TOPIC).partitions
            prep = ts.TxnState("decided", pid2, 0, 60_000, ts.PREPARE_COMMIT,
                               (("orders", 1),), 1, 1)
            lg = store.get_log(TOPIC, partition_for("decided", n))
            lg.append(encode([prep]), sync=True)
        finally:
            store.close()
        b.start()
        c = RawConn(b.port)
        d = _retry(c, m.DescribeTransactions(transactional_ids=("open",))).transactions[0]
        assert (d.state, d.producer_epoch, d.parts) == ("Ongoing", epoch,
                                                       (("orders", 0), ("orders", 1)))
        _state(c, "decided", "CompleteCommit")
        assert c.call(m.EndTxn(transactional_id="open", producer_id=pid, producer_epoch=epoch,
                               commit=True)).error == 0
        _state(c, "open", "CompleteCommit")
    finally:
        b.kill()


DATA = "txdata"  # the partition test_markers_... reads back (no other test's markers)


def _produce(c, pid, epoch, seq, value=b"v", tid="rc"):
    data = build_batch([value], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)
    part = c.call(m.Produce(acks=-1, parts=((DATA, 0, len(data)),), payload=(data,),
                            transactional_id=tid)).parts[0]
    return part[2], part[4]  # error, base offset


def _latest(c, isolation):
    return c.call(m.ListOffsets(parts=((DATA, 0, m.LATEST),), isolation=isolation)).parts[0][4]


def test_markers_end_the_partitions_transactions_and_fence_a_zombie(txn_broker):
    """The chain through the partition: records of an open transaction hold
    the last stable offset until the commit's marker; an abort is listed
    to read_committed fetches; a fenced zombie's next batch is refused."""
    c = _setup(txn_broker)
    assert c.call(m.CreateTopics(topics=((DATA, 1, {}),))).topics[0][1] == 0
    pid, epoch = _init(c, "rc")
    assert _add(c, "rc", pid, epoch, ((DATA, 0),)).parts[0].error == 0
    assert _produce(c, pid, epoch, 0) == (0, 0)
    assert (_latest(c, 1), _latest(c, 0)) == (0, 1)  # the open transaction holds the LSO
    assert c.call(m.EndTxn(transactional_id="rc", producer_id=pid, producer_epoch=epoch,
                           commit=True)).error == 0
    _state(c, "rc", "CompleteCommit")
    assert _latest(c, 1) == _latest(c, 0) == 2  # the record and its marker
    assert _add(c, "rc", pid, epoch, ((DATA, 0),)).parts[0].error == 0
    assert _produce(c, pid, epoch, 1) == (0, 2)
    assert c.call(m.EndTxn(transactional_id="rc", producer_id=pid, producer_epoch=epoch,
                           commit=False)).error == 0
    # the next transaction's first request waits for the abort to complete (no 51 to retry)
    assert _add(c, "rc", pid, epoch, ((DATA, 0),)).parts[0].error == 0
    fetched = c.call(m.Fetch(max_wait_ms=0, parts=((DATA, 0, 0, 1 << 20),), isolation=1))
    assert [tuple(a) for a in fetched.txn[0].aborted] == [(pid, 2)]
    # a zombie: its open transaction aborted by the next producer of its id
    assert _produce(c, pid, epoch, 2)[0] == 0
    assert c.call(m.InitProducerId(transactional_id="rc",
                                   transaction_timeout_ms=60_000)).error == 51
    assert _init(c, "rc") == (pid, epoch + 2)
    assert _produce(c, pid, epoch, 3)[0] in (47, 90)  # fenced at the partition by the marker
    assert _latest(c, 1) == _latest(c, 0)  # nothing left open


def test_an_idle_id_expires_and_starts_afresh(tmp_path):
    config = {**CONFIG, "transactional_id_expiration_ms": 300}
    with BrokerProcess(tmp_path / "data", config=config) as b:
        c = _setup(b)
        pid, _ = _init(c, "idle")
        wait_until(lambda: _describe(c, "idle").error == 105, 10, "the idle id forgotten",
                   interval=0.05)
        assert _add(c, "idle", pid, 0).error == 49  # its producer id is no longer the id's
        pid2, epoch2 = _init(c, "idle")
        assert pid2 != pid and epoch2 == 0


def test_a_forged_transactional_batch_is_refused(txn_broker):
    """KIP-890 part 1 (api/txn_verify.py): a producer's first transactional
    batch on a partition is appended only if its coordinator holds that
    producer's open transaction with the partition in it; no transaction
    hangs on a partition its coordinator never heard of."""
    c = _setup(txn_broker)
    c.call(m.CreateTopics(topics=((DATA, 1, {}),)))
    before = _latest(c, 1)
    # a made-up producer id, no InitProducerId, no AddPartitionsToTxn
    assert _produce(c, 987_654_321, 0, 0, tid="forger")[0] == 48
    assert _produce(c, 987_654_321, 0, 0, tid=None)[0] == 48  # no transactional id at all
    # a real producer's id and epoch, but the partition was never added
    pid, epoch = _init(c, "fv")
    assert _produce(c, pid, epoch, 0, tid="fv")[0] == 48
    assert _produce(c, pid, epoch, 0, tid="rc")[0] == 48  # another id's coordinator state
    assert _latest(c, 1) == _latest(c, 0) == before  # nothing appended, nothing left open
    # added: the first batch is verified (one round trip), the next ones are not asked
    assert _add(c, "fv", pid, epoch, ((DATA, 0),)).parts[0].error == 0
    assert _produce(c, pid, epoch, 0, tid="fv")[0] == 0
    assert _produce(c, pid, epoch, 1, tid="fv")[0] == 0
    assert _latest(c, 1) == before  # the open transaction holds the LSO
    assert c.call(m.EndTxn(transactional_id="fv", producer_id=pid, producer_epoch=epoch,
                           commit=False)).error == 0
    _state(c, "fv", "CompleteAbort")
    # the transaction ended: the same producer and epoch need AddPartitionsToTxn again
    assert _produce(c, pid, epoch, 2, tid="fv")[0] == 48
    assert _latest(c, 1) == _latest(c, 0)
