"""Cluster metrics (docs/metrics.md): a real 3-broker cluster with
``--metrics-port 0``; a follower killed shows as under-replicated partitions
and an ISR shrink on the leader's /metrics."""

from __future__ import annotations

import pytest

from tests.support.fixtures import Cluster, require_etcd, wait_until
from tests.support.metrics_scrape import scrape, value


@pytest.fixture
def metrics_cluster(tmp_path, etcd):
    require_etcd()
    c = Cluster(tmp_path, etcd.url, extra=("--metrics-port", "0"),
                config={"replica_lag_time_max_ms": 1000,
                        "metrics_refresh_s": 0.2})  # the test watches a change: fresh snapshots
    try:
        c.start()
        urls = {}
        for i, b in c.brokers.items():
            line = b.proc.stdout.readline()  # the line after "listening" (see test_metrics.py)
            assert line.startswith("logbroker metrics on http://127.0.0.1:"), line
            urls[i] = line.split(" on ", 1)[1].strip()
        yield c, urls
    finally:
        c.close()


def test_a_killed_follower_shows_as_under_replicated(metrics_cluster):
    c, urls = metrics_cluster
    c.create("urp", 1)
    leader, _, replicas, _ = c.state("urp")
    code, message, _ = c.produce(leader, "urp", 0, [b"a", b"b", b"c"])
    assert code == 0, message
    # a follower that fell behind on a loaded machine may be out of the ISR a moment
    s = wait_until(lambda: (lambda s: s if value(s, "logbroker_under_replicated_partitions")
                            == 0 else None)(scrape(urls[leader])), 15,
                   "every replica of the new topic in sync")
    assert value(s, "logbroker_scrape_errors_total") == 0
    assert value(s, "logbroker_leader_partitions") >= 1
    assert value(s, "logbroker_controller_changes_total") >= 1
    assert value(s, "logbroker_partition_high_watermark", topic="urp", partition=0) == 3
    # one controller at a time; an election (or a lease renewed late on a loaded machine)
    # can leave a moment with none, so the count is awaited, never more than one
    def controllers():
        n = sum(value(scrape(u), "logbroker_controller_active") for u in urls.values())
        assert n <= 1, f"{n} brokers report themselves controller"
        return n == 1
    wait_until(controllers, 15, "one broker reports itself the controller", interval=0.1)
    shrinks = value(s, "logbroker_isr_shrinks_total")

    follower = next(b for b in replicas if b != leader)
    c.brokers[follower].kill()
    # the ISR loses the dead follower either by the leader's shrink (lagging
    # past replica_lag_time_max_ms: logbroker_isr_shrinks_total counts it) or
    # by the controller once the follower's lease ends, whichever comes first
    after = wait_until(lambda: (lambda s: s if value(s, "logbroker_under_replicated_partitions")
                                > 0 else None)(scrape(urls[leader])), 15,
                       "the leader reports under-replicated partitions")
    assert value(after, "logbroker_isr_shrinks_total") >= shrinks
