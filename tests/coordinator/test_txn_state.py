"""The transaction state machine (coordinator/txn_state.py) and its records: pure and fast."""

from __future__ import annotations

import pytest

from logbroker.coordinator import txn_state as ts
from logbroker.coordinator.txn_records import encode, read_batch
from logbroker.errors import (ConcurrentTransactionsError, InvalidProducerIdMappingError,
                              InvalidTxnStateError, ProducerFencedError)

T = 1_000_000
PARTS = (("orders", 0), ("orders", 1))


def fresh(tid="etl", pid=7, timeout=60_000) -> ts.TxnState:
    return ts.init(None, tid, -1, -1, timeout, T, new_id=pid)


def ongoing(cur=None) -> ts.TxnState:
    cur = cur or fresh()
    return ts.add_partitions(cur, cur.transactional_id, cur.producer_id, cur.producer_epoch,
                             PARTS, T + 10, 100)


def test_init_from_nothing_takes_the_new_id_at_epoch_0():
    assert ts.needs_new_id(None, -1, -1)
    st = fresh()
    assert (st.producer_id, st.producer_epoch, st.state, st.timeout_ms) == (7, 0, ts.EMPTY, 60_000)


def test_init_again_bumps_the_epoch_and_the_old_producer_is_fenced():
    st = ts.init(fresh(), "etl", -1, -1, 30_000, T + 1)
    assert (st.producer_id, st.producer_epoch, st.timeout_ms) == (7, 1, 30_000)
    with pytest.raises(ProducerFencedError):
        ts.add_partitions(st, "etl", 7, 0, PARTS, T + 2, 100)
    with pytest.raises(ProducerFencedError):
        ts.end(st, "etl", 7, 0, True, T + 2)


def test_kip360_recovery_with_the_current_epoch_bumps_and_a_retry_gets_the_same_answer():
    st = ts.init(fresh(), "etl", 7, 0, 60_000, T + 1)
    assert (st.producer_epoch, st.last_producer_epoch) == (1, 0)
    again = ts.init(st, "etl", 7, 0, 60_000, T + 2)  # the answer was lost: the retry
    assert again is st
    with pytest.raises(ProducerFencedError):  # an epoch neither current nor last
        ts.init(st, "etl", 7, 5, 60_000, T + 2)
    with pytest.raises(ProducerFencedError):  # another producer id
        ts.init(st, "etl", 99, 1, 60_000, T + 2)


def test_an_exhausted_epoch_rotates_the_producer_id():
    st = ts.TxnState("etl", 7, ts.MAX_EPOCH, 60_000)
    assert ts.needs_new_id(st, -1, -1)
    nxt = ts.init(st, "etl", -1, -1, 60_000, T, new_id=8)
    assert (nxt.producer_id, nxt.producer_epoch, nxt.last_producer_id,
            nxt.last_producer_epoch) == (8, 0, 7, ts.MAX_EPOCH)


def test_add_partitions_opens_the_transaction_once_and_grows_it():
    st = ongoing()
    assert (st.state, st.parts, st.start_ms) == (ts.ONGOING, PARTS, T + 10)
    assert ts.add_partitions(st, "etl", 7, 0, PARTS[:1], T + 20, 100) is None  # nothing new
    more = ts.add_partitions(st, "etl", 7, 0, [("clicks", 3)], T + 30, 100)
    assert more.parts == (("clicks", 3), *PARTS) and more.start_ms == T + 10
    with pytest.raises(InvalidTxnStateError):
        ts.add_partitions(st, "etl", 7, 0, [("x", i) for i in range(99)], T, 100)


def test_requests_of_an_unknown_id_or_another_producer_id():
    with pytest.raises(InvalidProducerIdMappingError):
        ts.add_partitions(None, "etl", 7, 0, PARTS, T, 100)
    with pytest.raises(InvalidProducerIdMappingError):
        ts.end(fresh(), "etl", 8, 0, True, T)


@pytest.mark.parametrize("commit", [True, False])
def test_end_prepares_then_completes(commit):
    st = ongoing()
    prep = ts.end(st, "etl", 7, 0, commit, T + 50)
    assert prep.state == (ts.PREPARE_COMMIT if commit else ts.PREPARE_ABORT)
    assert prep.commit is commit and prep.parts == PARTS
    with pytest.raises(ConcurrentTransactionsError):  # the same outcome while completing
        ts.end(prep, "etl", 7, 0, commit, T + 51)
    with pytest.raises(InvalidTxnStateError):  # the opposite outcome
        ts.end(prep, "etl", 7, 0, not commit, T + 51)
    with pytest.raises(ConcurrentTransactionsError):
        ts.add_partitions(prep, "etl", 7, 0, PARTS, T + 51, 100)
    with pytest.raises(ConcurrentTransactionsError):
        ts.init(prep, "etl", -1, -1, 60_000, T + 51)
    done = ts.complete(prep, T + 60)
    assert done.state == (ts.COMPLETE_COMMIT if commit else ts.COMPLETE_ABORT)
    assert (done.parts, done.start_ms, done.producer_epoch) == ((), -1, 0)
    assert ts.end(done, "etl", 7, 0, commit, T + 61) is None  # a retried EndTxn: done
    with pytest.raises(InvalidTxnStateError):
        ts.end(done, "etl", 7, 0, not commit, T + 61)
    with pytest.raises(InvalidTxnStateError):
        ts.complete(done, T + 62)
    nxt = ts.add_partitions(done, "etl", 7, 0, PARTS[:1], T + 70, 100)  # the next transaction
    assert nxt.state == ts.ONGOING and nxt.start_ms == T + 70


def test_end_without_an_open_transaction_is_invalid():
    with pytest.raises(InvalidTxnStateError):
        ts.end(fresh(), "etl", 7, 0, True, T)


def test_a_timeout_aborts_with_the_epoch_bumped():
    st = ongoing()
    assert not st.overdue(T + 10 + 60_000) and st.overdue(T + 10 + 60_001)
    fenced = ts.fence(st, T + 70_000)
    assert (fenced.state, fenced.producer_epoch, fenced.last_producer_epoch) == (
        ts.PREPARE_ABORT, 1, 0)
    with pytest.raises(ProducerFencedError):  # the old producer's EndTxn
        ts.end(fenced, "etl", 7, 0, True, T + 70_001)
    done = ts.complete(fenced, T + 70_002)
    assert done.state == ts.COMPLETE_ABORT and done.producer_epoch == 1
    # the old producer recovers (KIP-360): its last epoch is the fenced one, no second bump
    assert ts.init(done, "etl", 7, 0, 60_000, T + 70_003) is done
    with pytest.raises(InvalidTxnStateError):
        ts.fence(done, T)


def test_init_while_ongoing_is_refused_by_init_the_caller_fences():
    with pytest.raises(InvalidTxnStateError):
        ts.init(ongoing(), "etl", -1, -1, 60_000, T)


def test_idle_ids_expire_only_when_settled():
    st = fresh()
    assert st.expired(T + 1001, 1000) and not st.expired(T + 1000, 1000)
    assert not ongoing().expired(T + 10**9, 1000)
    dead = ts.expire(st)
    assert dead.state == ts.DEAD
    with pytest.raises(InvalidTxnStateError):
        ts.expire(ongoing())
    again = ts.init(dead, "etl", -1, -1, 60_000, T, new_id=9)  # a dead id starts afresh
    assert (again.producer_id, again.producer_epoch) == (9, 0)


def test_records_round_trip_and_a_tombstone_for_a_dead_id():
    states = [fresh(), ongoing(), ts.end(ongoing(), "etl", 7, 0, False, T + 99),
              ts.expire(fresh("gone"))]
    back = read_batch(encode(states))
    assert back[:3] == states[:3]
    assert back[3].transactional_id == "gone" and back[3].state == ts.DEAD


def test_verify_holds_only_the_open_transactions_partitions_of_its_producer():
    """A partition leader's question (KIP-890 part 1, api/txn_verify.py)."""
    from logbroker.errors import InvalidProducerEpochError
    st = ongoing()
    ts.verify(st, "etl", 7, 0, ("orders", 1))  # in the transaction: no error
    for cur, pid, epoch, part in ((None, 7, 0, ("orders", 0)),  # an id never seen
                                  (fresh(), 7, 0, ("orders", 0)),  # no open transaction
                                  (st, 7, 0, ("orders", 2)),  # not added
                                  (st, 8, 0, ("orders", 0)),  # another producer
                                  (st, 7, 1, ("orders", 0))):  # an epoch not (yet) the id's
        with pytest.raises(InvalidTxnStateError):
            ts.verify(cur, "etl", pid, epoch, part)
    bumped = ts.TxnState(**{**st.__dict__, "producer_epoch": 3})
    with pytest.raises(InvalidProducerEpochError):
        ts.verify(bumped, "etl", 7, 2, ("orders", 0))
    ending = ts.end(st, "etl", 7, 0, True, T + 20)
    with pytest.raises(InvalidTxnStateError):
        ts.verify(ending, "etl", 7, 0, ("orders", 0))


def test_producer_of_reads_the_transactional_batches_producer():
    from logbroker.api.txn_verify import producer_of
    from logbroker.records.builder import build_batch
    txn = build_batch([b"a"], producer_id=5, producer_epoch=2, base_sequence=0,
                      transactional=True)
    other = build_batch([b"b"], producer_id=6, producer_epoch=2, base_sequence=0,
                        transactional=True)
    plain = build_batch([b"c"], producer_id=5, producer_epoch=2, base_sequence=1)
    assert producer_of(plain) is None and producer_of(b"") is None
    assert producer_of(plain + txn) == (5, 2)
    with pytest.raises(InvalidTxnStateError):
        producer_of(txn + other)
    # every form a produce part reaches the handler in (storage/incoming.part_buffers)
    from logbroker.errors import CorruptRecordError
    from logbroker.storage.incoming import Convert, Inspected
    assert producer_of([plain, memoryview(txn)]) == (5, 2)
    assert producer_of(Inspected(txn, None, False)) == (5, 2)
    assert producer_of(Inspected(txn, CorruptRecordError("refused"), False)) is None
    assert producer_of(Convert(b"legacy", lambda: txn)) is None
