"""A fake follower (issue 29, item 3): in an open cluster (no authentication,
what ``make cluster`` starts), ReplicaFetch and a follower's
OffsetForLeaderEpoch count only from a connection that proved, with the
cluster's secret, that it is the broker it names (cluster/peer_proof.py,
api/peer.py). Real brokers on 127.0.0.1, a raw protocol client as the
attacker."""

from __future__ import annotations

import asyncio
import os

import pytest

from logbroker.cluster.etcd import Etcd
from logbroker.cluster.peer_proof import PeerKey
from logbroker.cluster.state import Keys
from logbroker.errors import ClusterAuthorizationFailedError, SaslAuthenticationFailedError
from logbroker.protocol import messages as m
from tests.support.cluster import Cluster
from tests.support.fixtures import RawConn, wait_until

TOPIC = "proof"
# followers stay in the ISR for the whole test although one is dead: the
# window in which a forged fetch moved the HW on main
SLOW = {"session_timeout_ms": 30_000, "replica_lag_time_max_ms": 30_000}


@pytest.fixture
def slow_cluster(tmp_path, etcd):
    c = Cluster(tmp_path, etcd.url, config=SLOW)
    try:
        yield c.start()
    finally:
        c.close()


def _hw(c: Cluster, leader: int) -> int:
    resp = c.call(leader, m.ListOffsets(parts=((TOPIC, 0, m.LATEST),)))
    assert resp.parts[0][2] == 0, resp
    return resp.parts[0][4]


def _forged_fetch(port: int, replica: int, offset: int, epoch: int):
    conn = RawConn(port)
    try:
        return conn.call(m.ReplicaFetch(replica_id=replica, max_wait_ms=0, min_bytes=0,
                                        parts=((TOPIC, 0, offset, epoch, 1 << 20),)))
    finally:
        conn.close()


def _secret(etcd_url: str) -> bytes:
    async def get():
        e = Etcd(etcd_url)
        try:
            return (await e.get(Keys("logbroker").secret)).value
        finally:
            await e.close()
    return asyncio.run(get())


def test_forged_replica_fetches_are_refused_and_the_hw_stays(slow_cluster, etcd):
    c = slow_cluster
    c.create(TOPIC, 1, replication_factor=3)
    leader, epoch, replicas, isr = c.state(TOPIC)
    live, dead = [r for r in replicas if r != leader]
    c.brokers[dead].kill()  # kill -9: still in the ISR (its session lasts 30 s)
    code, _, base = c.produce(leader, TOPIC, 0, [b"acked-by-one"], acks=1)
    assert code == 0
    end = base + 1
    wait_until(lambda: _hw(c, leader) == base, 10, "the live follower fetched")
    port = c.brokers[leader].port
    for replica in (dead, live):
        resp = _forged_fetch(port, replica, end, epoch)
        assert resp.error == ClusterAuthorizationFailedError.code, resp
        assert f"replica {replica} refused" in resp.message
    conn = RawConn(port)
    resp = conn.call(m.OffsetForLeaderEpoch(replica_id=live, parts=((TOPIC, 0, epoch, epoch),)))
    assert resp.error == ClusterAuthorizationFailedError.code, resp
    conn.close()
    # the record is on the leader and the live follower only: the HW must not cover it
    assert _hw(c, leader) == base
    code, _, _ = c.produce(leader, TOPIC, 0, [b"must-wait"], acks=-1, timeout_ms=500)
    assert code != 0  # acks=all waits for the dead follower (in the ISR), never acknowledged
    assert "refused ReplicaFetch" in c.brokers[leader].log()
    # a consumer's OffsetForLeaderEpoch (replica -1) is not a replica's: still served
    conn = RawConn(port)
    resp = conn.call(m.OffsetForLeaderEpoch(replica_id=-1, parts=((TOPIC, 0, epoch, epoch),)))
    assert resp.error == 0 and resp.parts[0][2] == 0, resp
    conn.close()


def test_a_proof_binds_the_connection_to_one_broker_id(cluster, etcd):
    c = cluster
    c.create(TOPIC, 1, replication_factor=3)
    leader, epoch, replicas, _ = c.state(TOPIC)
    other = next(r for r in replicas if r != leader)
    port = c.brokers[leader].port
    # a wrong secret: refused (58) and the connection closed
    conn = RawConn(port)
    nonce = os.urandom(32)
    resp = conn.call(m.PeerChallenge(broker_id=other, nonce=nonce))
    assert resp.error == 0 and resp.broker_id == leader
    wrong = PeerKey(b"x" * 32, "logbroker", other)
    resp = conn.call(m.PeerProof(proof=wrong.mac("client", other, leader, nonce, resp.nonce)))
    assert resp.error == SaslAuthenticationFailedError.code, resp
    assert conn.closed_by_peer(5)
    assert "broker proof" in c.brokers[leader].log()
    # the right secret proves broker `other`: it may fetch as `other`, never as another id
    key = PeerKey(_secret(etcd.url), "logbroker", other)
    conn = RawConn(port)
    first = conn.call(m.PeerChallenge(broker_id=other, nonce=nonce))
    resp2 = conn.call(m.PeerProof(proof=key.mac("client", other, leader, nonce, first.nonce)))
    assert resp2.error == 0, resp2
    assert resp2.proof == key.mac("server", other, leader, nonce, first.nonce)
    third = next(i for i in c.brokers if i not in (leader, other))
    # transaction markers are a proven broker's only (api/markers.py): refused on a
    # connection that proved nothing, written on the proven one (no open transaction:
    # written all the same, Kafka's rule)
    marker = m.WriteTxnMarkers(markers=((7, 0, False, 0, TOPIC, 0),))
    plain = RawConn(port)
    resp = plain.call(marker)
    assert resp.error == ClusterAuthorizationFailedError.code, resp
    plain.close()
    resp = conn.call(marker)
    assert resp.error == 0 and [p.error for p in resp.parts] == [0], resp
    for replica, ok in ((third, False), (other, True)):
        resp = conn.call(m.ReplicaFetch(replica_id=replica, max_wait_ms=0, min_bytes=0,
                                        parts=((TOPIC, 0, 0, epoch, 1 << 20),)))
        assert (resp.error == 0) is ok, resp
    # a replayed proof on a new connection fails (fresh server nonce)
    conn2 = RawConn(port)
    conn2.call(m.PeerChallenge(broker_id=other, nonce=nonce))
    resp = conn2.call(m.PeerProof(proof=key.mac("client", other, leader, nonce, first.nonce)))
    assert resp.error == SaslAuthenticationFailedError.code
    # the real followers replicate: a record is acknowledged by all three
    code, _, _ = c.produce(leader, TOPIC, 0, [b"replicated"], acks=-1)
    assert code == 0


def test_a_configured_secret_replicates_and_a_different_one_is_refused(tmp_path, etcd):
    """``cluster_secret_file``: brokers that share it replicate; a broker
    with another secret proves nothing (refused and logged on both sides)."""
    from bench.common.procs import BrokerProcess

    shared, other = tmp_path / "shared.secret", tmp_path / "other.secret"
    shared.write_text("s" * 40 + "\n")
    other.write_text("o" * 40 + "\n")
    c = Cluster(tmp_path, etcd.url, n=2, config={"cluster_secret_file": str(shared)})
    intruder = BrokerProcess(tmp_path / "broker-3", "--broker-id", "3", "--etcd", etcd.url,
                             config={"cluster_secret_file": str(other),
                                     "session_timeout_ms": 2000})
    try:
        c.start()
        c.create("shared", 1, replication_factor=2)
        leader = c.state("shared")[0]
        assert c.produce(leader, "shared", 0, [b"both"], acks=-1)[0] == 0
        intruder.start()
        resp = c.call(1, m.CreateTopics(topics=(("mixed", 1, {"replication_factor": 3}),)))
        assert resp.topics[0][1] == 0, resp
        logs = lambda: "".join(b.log() for b in (*c.brokers.values(), intruder))  # noqa: E731
        wait_until(lambda: "wrong cluster secret" in logs(), 15, "the other secret refused")
        assert "fetching from broker" in logs()  # the refused side names its leader
        assert all(b.alive() for b in (*c.brokers.values(), intruder))
    finally:
        intruder.kill()
        c.close()
