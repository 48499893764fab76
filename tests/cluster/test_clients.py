"""The real clients and CLI against a real cluster (etcd + 3 brokers): they
ride through failures without user code retrying."""

import json
import os
import signal
import threading
import time


from tests.support.fixtures import FAST, consume, run_cli, cli_ok
from logbroker import Admin, Consumer, Producer


def test_producer_and_consumer_ride_through_a_leader_kill9(cluster):
    with Admin(bootstrap=cluster.bootstrap, **FAST) as admin:
        admin.create_topic("orders", 2, replication_factor=3)
    leader = cluster.state("orders", 0)[0]
    sent, errors, stop = [], [], threading.Event()

    def produce():
        with Producer(bootstrap=cluster.bootstrap, acks="all", linger_ms=2, **FAST) as p:
            i = 0
            while not stop.is_set() and i < 20_000:
                handles = [p.send("orders", f"{i + j}".encode(), partition=(i + j) % 2)
                           for j in range(50)]
                for h in handles:
                    try:
                        h.result(timeout=30)
                        sent.append(h)
                    except Exception as exc:  # noqa: BLE001 - the test reports it
                        errors.append(exc)
                i += 50

    t = threading.Thread(target=produce)
    t.start()
    try:
        from tests.support.fixtures import wait_until
        wait_until(lambda: len(sent) >= 1000, 20, "records acknowledged before the kill")
        cluster.brokers[leader].kill()
        killed_at = len(sent)
        wait_until(lambda: len(sent) >= killed_at + 1000, 30, "records acknowledged after the kill")
    finally:
        stop.set()
        t.join(60)
    assert not errors, errors[:3]
    new = cluster.state("orders", 0, via=next(i for i in cluster.live()))[0]
    assert new != leader
    acked = {(h.result().partition, h.result().offset): h for h in sent}
    assert len(acked) == len(sent), "two acks at one offset"
    with Consumer(bootstrap=cluster.bootstrap, **FAST) as c:
        c.assign([("orders", 0), ("orders", 1)])
        c.seek_to_beginning()
        got = consume(c, len(sent), 30)
    values = [r.value for r in got]
    assert len(values) == len(set(values)), "a record read twice"
    by_offset = {(r.partition, r.offset): r.value for r in got}
    missing = [k for k in acked if k not in by_offset]
    assert not missing, f"{len(missing)} acknowledged records lost"


def test_sends_wait_out_a_too_small_isr_and_offsets_survive_their_broker(cluster):
    with Admin(bootstrap=cluster.bootstrap, **FAST) as admin:
        admin.create_topic("t", 1, replication_factor=3, configs={"min_insync_replicas": 2})
    leader, _, replicas, _ = cluster.state("t")
    followers = [r for r in replicas if r != leader]
    with Producer(bootstrap=cluster.bootstrap, acks="all", delivery_timeout_ms=30_000,
                  **FAST) as p:
        assert p.send("t", b"first").result(timeout=10).offset == 0
        for f in followers:
            os.kill(cluster.brokers[f].proc.pid, signal.SIGSTOP)
        try:
            cluster.wait_state("t", 0, lambda ld, e, r, isr: list(isr) == [leader], 10,
                               "ISR down to the leader", via=leader)
            handle = p.send("t", b"waits for the ISR")
            time.sleep(0.5)  # not synchronisation: the send must still be waiting after it
            assert not handle.done(), "acknowledged with the ISR below min_insync_replicas"
        finally:
            for f in followers:
                os.kill(cluster.brokers[f].proc.pid, signal.SIGCONT)
        assert handle.result(timeout=30).offset == 1  # went through once the ISR grew back
    # committed offsets live in etcd: the broker that took the commit may die
    with Consumer(bootstrap=cluster.brokers[leader].bootstrap, group="g", **FAST) as c:
        c.assign([("t", 0)])
        c.commit({("t", 0): 2})
    cluster.brokers[leader].kill()
    others = ",".join(cluster.brokers[i].bootstrap for i in cluster.live())
    with Admin(bootstrap=others, **FAST) as admin:
        assert admin.fetch_offsets("g")[("t", 0)].offset == 2


def test_cli_cluster_status_and_rebalance_back_to_the_preferred_leader(cluster):
    b = cluster.bootstrap
    cli_ok(run_cli("topics", "create", "r", "--partitions", "3", "--replication-factor", "3",
                   bootstrap=b))
    status = json.loads(cli_ok(run_cli("cluster", "status", "--json", bootstrap=b)))
    assert len(status["brokers"]) == 3 and status["controller"] in (1, 2, 3)
    parts = [p for p in status["partitions"] if p["topic"] == "r"]
    assert sorted(p["leader"] for p in parts) == [1, 2, 3]
    victim = cluster.state("r", 0)[0]
    cluster.brokers[victim].kill()
    cluster.wait_state("r", 0, lambda ld, e, r, isr: ld not in (victim, -1), 10, "failover")
    cluster.brokers[victim].start()
    cluster.wait_state("r", 0, lambda ld, e, r, isr: victim in isr, 15, "back in the ISR")
    assert cluster.state("r", 0)[0] != victim
    moved = json.loads(cli_ok(run_cli("cluster", "rebalance", "--json", bootstrap=b)))
    assert moved, moved
    cluster.wait_state("r", 0, lambda ld, e, r, isr: ld == victim, 10, "preferred leader back")
    table = cli_ok(run_cli("topics", "describe", "r", bootstrap=b))
    assert "ISR" in table.upper() or "isr" in table


def test_a_tailing_consumer_never_sees_an_error_through_a_failover(cluster):
    with Admin(bootstrap=cluster.bootstrap, **FAST) as admin:
        admin.create_topic("tail", 1, replication_factor=3)
    leader = cluster.state("tail")[0]
    with Producer(bootstrap=cluster.bootstrap, acks="all", **FAST) as p, \
            Consumer(bootstrap=cluster.bootstrap, fetch_max_wait_ms=200, **FAST) as c:
        c.assign([("tail", 0)])
        c.seek("tail", 0, 0)
        got, errors = [], []
        p.send("tail", b"0").result(timeout=10)
        cluster.brokers[leader].kill()
        killed = time.monotonic()
        i = 1
        while time.monotonic() - killed < 8 and len(got) < 20:
            try:
                got += [r.value for r in c.poll(0.3)]
            except Exception as exc:  # noqa: BLE001 - the assertion below reports it
                errors.append(exc)
            if i < 20:
                p.send("tail", str(i).encode())
                i += 1
        p.flush(30)
        got += [r.value for r in consume(c, 20 - len(got), 15)]
    assert not errors, errors[:3]
    assert got == [str(i).encode() for i in range(20)]


def test_a_consumer_of_several_leaders_with_a_small_prefetch_reads_everything(cluster):
    with Admin(bootstrap=cluster.bootstrap, **FAST) as admin:
        admin.create_topic("wide", 3, replication_factor=2, configs={"min_insync_replicas": 1})
    assert len({cluster.state("wide", p)[0] for p in range(3)}) == 3, "three leaders"
    value = b"x" * 2000
    with Producer(bootstrap=cluster.bootstrap, acks=1, linger_ms=5, **FAST) as p:
        for i in range(3000):  # partition 0 is soon caught up: its session long-polls
            p.send("wide", value, partition=0 if i < 10 else 1 + i % 2)
        p.flush(60)
    with Consumer(bootstrap=cluster.bootstrap, prefetch_bytes=256 << 10, max_poll_records=50,
                  max_partition_fetch_bytes=64 << 10, fetch_max_bytes=128 << 10, **FAST) as c:
        c.assign([("wide", p) for p in range(3)])
        c.seek_to_beginning()
        got = consume(c, 3000, 60)
    assert len(got) == 3000 and {r.partition for r in got} == {0, 1, 2}
