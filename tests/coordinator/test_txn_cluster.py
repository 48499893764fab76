"""The transaction coordinator on a real 3-broker cluster (real etcd): markers
go to each partition's leader (over the brokers' peer link for the others'),
and when the coordinator's broker is killed right after a commit was decided,
the new leader of the id's transaction state partition finishes it."""

from __future__ import annotations

import pytest

from logbroker.protocol import messages as m
from tests.support.cluster import Cluster
from tests.support.fixtures import wait_until

PARTS = (("orders", 0), ("orders", 1), ("orders", 2))
RETRY = (14, 15, 16, 51)  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT


@pytest.fixture
def tcluster(tmp_path, etcd):
    c = Cluster(tmp_path, etcd.url, config={"transaction_abort_timed_out_check_interval_ms": 200})
    try:
        yield c.start()
    finally:
        c.close()


def coordinator_of(c: Cluster, tid: str, not_: int = -1) -> int:
    def found():
        for i in c.live():
            try:
                r = c.call(i, m.FindCoordinator(group=tid, key_type=1))
            except (OSError, AssertionError, TimeoutError):
                continue
            if r.error == 0 and r.broker_id != not_ and r.broker_id in c.live():
                return r.broker_id
        return None
    return wait_until(found, 30, "a transaction coordinator", interval=0.1)


def call(c: Cluster, i: int, msg, timeout: float = 20.0):
    """``msg`` to broker ``i`` until answered with no retriable coordinator error."""
    def answered():
        try:
            r = c.call(i, msg)
        except (OSError, AssertionError, TimeoutError):
            return None
        return None if r.error in RETRY else r
    return wait_until(answered, timeout, f"{type(msg).__name__} answered", interval=0.1)


def state(c: Cluster, i: int, tid: str, want: str, timeout: float = 30.0):
    def reached():
        d = call(c, i, m.DescribeTransactions(transactional_ids=(tid,))).transactions[0]
        return d if d.state == want else None
    return wait_until(reached, timeout, f"{tid} {want} on broker {i}", interval=0.1)


def log_end(c: Cluster, topic: str, partition: int) -> int:
    leader = c.state(topic, partition)[0]
    resp = c.call(leader, m.ListOffsets(parts=((topic, partition, m.LATEST),)))
    assert resp.parts[0][2] == 0, resp
    return resp.parts[0][4]


def test_the_new_coordinator_finishes_what_the_killed_one_decided(tcluster):
    c = tcluster
    c.create("orders", 3, replication_factor=3)
    leaders = {c.state("orders", p)[0] for p in range(3)}
    co = coordinator_of(c, "etl")
    other = next(i for i in c.live() if i != co)
    assert c.call(other, m.InitProducerId(transactional_id="etl",
                                          transaction_timeout_ms=60_000)).error == 16
    init = call(c, co, m.InitProducerId(transactional_id="etl", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    add = m.AddPartitionsToTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch,
                               parts=PARTS)
    commit = m.EndTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch, commit=True)

    # one transaction through the first coordinator: a marker on each partition's leader
    assert all(p.error == 0 for p in call(c, co, add).parts)
    assert call(c, co, commit).error == 0
    state(c, co, "etl", "CompleteCommit")
    assert leaders - {co}, "some partition is led by another broker (a peer's marker)"
    assert [log_end(c, "orders", p) for p in range(3)] == [1, 1, 1]

    # the next one decided, then its coordinator killed at once
    assert all(p.error == 0 for p in call(c, co, add).parts)
    assert call(c, co, commit).error == 0
    c.brokers[co].kill()
    new = coordinator_of(c, "etl", not_=co)
    d = state(c, new, "etl", "CompleteCommit")
    assert (d.producer_id, d.producer_epoch) == (pid, epoch)
    def marked():
        try:
            return all(log_end(c, "orders", p) >= 2 for p in range(3))
        except (OSError, AssertionError, TimeoutError):
            return False
    wait_until(marked, 30, "every partition has the second marker", interval=0.1)

    # the producer goes on with the new coordinator
    assert all(p.error == 0 for p in call(c, new, add).parts)
    abort = m.EndTxn(transactional_id="etl", producer_id=pid, producer_epoch=epoch, commit=False)
    assert call(c, new, abort).error == 0
    state(c, new, "etl", "CompleteAbort")


def _txn_produce(c: Cluster, i: int, tid, pid: int, epoch: int, seq: int, partition: int):
    from logbroker.records.builder import build_batch
    data = build_batch([b"v%d" % seq], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                       transactional=True)
    resp = c.call(i, m.Produce(acks=-1, parts=(("verified", partition, len(data)),),
                               payload=(data,), transactional_id=tid))
    return resp.parts[0].error


def test_a_forged_transactional_batch_is_refused_by_a_leader_the_coordinator_is_not(tcluster):
    """KIP-890 part 1 across brokers: the partition's leader asks the id's
    coordinator, another broker, over the peer link (VerifyTxnPartitions)."""
    c = tcluster
    c.create("verified", 3, replication_factor=3)
    co = coordinator_of(c, "tv")
    part, leader = next((p, c.state("verified", p)[0]) for p in range(3)
                        if c.state("verified", p)[0] != co)
    # a made-up producer (the id unknown to its coordinator), then no AddPartitionsToTxn
    assert _txn_produce(c, leader, "tv", 424242, 0, 0, part) == 48
    init = call(c, co, m.InitProducerId(transactional_id="tv", transaction_timeout_ms=60_000))
    pid, epoch = init.producer_id, init.producer_epoch
    assert _txn_produce(c, leader, "tv", pid, epoch, 0, part) == 48
    assert log_end(c, "verified", part) == 0  # nothing appended, nothing left open
    # a client is not a broker: the peer request is refused whatever it asks
    assert c.call(co, m.VerifyTxnPartitions(transactional_id="tv", producer_id=pid,
                                            producer_epoch=epoch,
                                            parts=(("verified", part),))).error == 31
    # added: verified once, then the transaction's next batches go straight in
    add = m.AddPartitionsToTxn(transactional_id="tv", producer_id=pid, producer_epoch=epoch,
                               parts=(("verified", part),))
    assert call(c, co, add).parts[0].error == 0
    assert _txn_produce(c, leader, "tv", pid, epoch, 0, part) == 0
    assert _txn_produce(c, leader, "tv", pid, epoch, 1, part) == 0
    # a new producer instance of the id fences this one: its open transaction aborted
    assert call(c, co, m.InitProducerId(transactional_id="tv",
                                        transaction_timeout_ms=60_000)).producer_epoch > epoch
    wait_until(lambda: log_end(c, "verified", part) == 3, 30, "the abort marker")
    assert _txn_produce(c, leader, "tv", pid, epoch, 2, part) in (47, 90)
    assert log_end(c, "verified", part) == 3  # two records and the abort marker, no more
