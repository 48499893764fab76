"""Transactional offsets across a group coordinator's death, on a real
3-broker cluster (real etcd): a TxnOffsetCommit pends on the group's
offsets partition, its coordinator is killed (-9), the new leader of that
partition rebuilds the pending offsets from the replicated log (unstable to
a reader asking for stable offsets), and the commit marker the transaction
coordinator then has written applies them."""

from __future__ import annotations

import pytest

from logbroker.errors import UnstableOffsetCommitError
from logbroker.protocol import messages as m
from tests.support.cluster import Cluster
from tests.support.fixtures import wait_until

RETRY = (14, 15, 16, 51)  # LOAD_IN_PROGRESS, NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT


pytestmark = pytest.mark.slow  # ~13 s of 3 brokers; the nemesis run covers the failover too


@pytest.fixture
def tcluster(tmp_path, etcd):
    c = Cluster(tmp_path, etcd.url, config={"offsets_topic_num_partitions": 3,
                                            "transaction_state_num_partitions": 3})
    try:
        yield c.start()
    finally:
        c.close()


def call(c: Cluster, i: int, msg, timeout: float = 30.0):
    """``msg`` to broker ``i`` until answered without a retriable coordinator error."""
    def answered():
        try:
            r = c.call(i, msg)
        except (OSError, AssertionError, TimeoutError):
            return None
        return None if r.error in RETRY else r
    return wait_until(answered, timeout, f"{type(msg).__name__} answered", interval=0.1)


def coordinator(c: Cluster, key: str, key_type: int, not_: int = -1) -> int:
    def found():
        for i in c.live():
            try:
                r = c.call(i, m.FindCoordinator(group=key, key_type=key_type))
            except (OSError, AssertionError, TimeoutError):
                continue
            if r.error == 0 and r.broker_id != not_ and r.broker_id in c.live():
                return r.broker_id
        return None
    return wait_until(found, 30, f"the coordinator of {key}", interval=0.1)


def test_pending_offsets_survive_the_group_coordinator_and_commit(tcluster):
    c = tcluster
    c.create("src", 1, replication_factor=3)
    group = coordinator(c, "eos", 0)
    tid = next(t for t in (f"etl-{i}" for i in range(64))  # a transaction coordinator that lives
               if coordinator(c, t, 1) != group)
    txn = coordinator(c, tid, 1)
    init = call(c, txn, m.InitProducerId(transactional_id=tid, transaction_timeout_ms=60_000))
    ids = dict(transactional_id=tid, producer_id=init.producer_id,
               producer_epoch=init.producer_epoch)
    assert call(c, txn, m.AddOffsetsToTxn(**ids, group="eos")).error == 0
    resp = call(c, group, m.TxnOffsetCommit(**ids, group="eos", offsets=(("src", 0, 42, "m"),)))
    assert resp.error == 0 and resp.parts[0].error == 0, resp
    fetch = m.FetchOffsets(group="eos", parts=(("src", 0),), require_stable=True)
    assert c.call(group, fetch).error == UnstableOffsetCommitError.code

    c.brokers[group].kill()
    new = coordinator(c, "eos", 0, not_=group)
    assert call(c, new, fetch).error == UnstableOffsetCommitError.code  # rebuilt from the log
    assert call(c, txn, m.EndTxn(**ids, commit=True)).error == 0

    def stable():
        r = call(c, new, fetch)
        return r if r.error == 0 else None
    got = wait_until(stable, 30, "the commit marker on the new coordinator", interval=0.1)
    assert got.parts[0].offset == 42 and got.parts[0].metadata == "m", got
