"""The partition limits in a cluster (issue 29, item 1): a broker's total
counts the replicas placed on it; the replicas of a large topic are made
while every broker keeps answering others. Real brokers through a real etcd."""

from __future__ import annotations

import threading
import time

from logbroker.errors import PolicyViolationError
from logbroker.protocol import messages as m
from tests.support.cluster import Cluster
from tests.support.fixtures import RawConn, wait_until


def _create(c: Cluster, name: str, partitions: int, rf: int, timeout: float = 30.0):
    resp = c.call(1, m.CreateTopics(topics=((name, partitions, {"replication_factor": rf}),)),
                  timeout)
    return resp.error or resp.topics[0].error, resp.message or resp.topics[0].message


def test_broker_limit_counts_the_replicas_placed_on_each_broker(tmp_path, etcd):
    c = Cluster(tmp_path, etcd.url, config={"max_partitions_per_broker": 50}).start()
    try:
        assert _create(c, "r3", 40, 3)[0] == 0  # 40 replicas on each of the 3 brokers
        error, message = _create(c, "more", 20, 3)  # 60 on each: refused
        assert error == PolicyViolationError.code
        assert "max_partitions_per_broker is 50" in message
        assert _create(c, "one", 20, 1)[0] == 0  # 6 or 7 more on each: fits
        topics = {t.name: t.partitions for t in c.metadata().topics if not t.error}
        assert topics == {"r3": 40, "one": 20}
        assert "above max_partitions_per_broker 50" in c.brokers[1].log()
    finally:
        c.close()


def test_a_large_topic_leaves_every_broker_answering(tmp_path, etcd):
    """1,000 partitions, 3 replicas each: every broker makes 1,000 logs while
    a client pings each of them (a broker that made them one by one on its
    loop stopped answering for tens of seconds)."""
    c = Cluster(tmp_path, etcd.url).start()
    stop, rtts = threading.Event(), {i: [] for i in c.brokers}

    def ping(i: int) -> None:
        conn = RawConn(c.brokers[i].port, timeout=60)
        while not stop.is_set():
            t = time.perf_counter()
            conn.call(m.Handshake(client_id="ping"), timeout=60)
            rtts[i].append(time.perf_counter() - t)
            stop.wait(0.005)

    pingers = [threading.Thread(target=ping, args=(i,)) for i in c.brokers]
    try:
        for t in pingers:
            t.start()
        assert _create(c, "wide", 1000, 3, timeout=120)[0] == 0
        # every broker's replicas are made and led: a leader for each partition
        wait_until(lambda: all(len([p for p in c.metadata(["wide"], via=i).partitions
                                    if p[2] >= 0]) == 1000 for i in c.brokers), 60,
                   "every broker knows every partition's leader")
        for i in c.brokers:  # each broker hosts a log of every partition
            wait_until(lambda i=i: sum(1 for _ in (tmp_path / f"broker-{i}").glob("wide-*"))
                       == 1000, 60, f"broker {i} made its replicas")
    finally:
        stop.set()
        for t in pingers:
            t.join(60)
        c.close()
    for i, seen in rtts.items():
        seen.sort()
        assert len(seen) > 20, (i, seen)
        p99 = seen[int(len(seen) * 0.99) - 1]
        assert p99 < 0.1 and seen[-1] < 2.0, (i, p99, seen[-10:])
