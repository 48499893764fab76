"""Routing against a real single node: it is the leader of everything at
epoch 0; the clients' metadata says so, the producer's traffic shares the
control connection, a bootstrap list whose first broker is down works, and
the cluster admin calls (describe_cluster, elect_leaders, replication
factor) answer as a one-broker cluster."""

from __future__ import annotations

import asyncio

import pytest

from tests.support.fixtures import FAST, closed_port, consume
from logbroker import Admin, Consumer, NewTopic, Producer, aio
from logbroker.client import BrokerInfo, ClusterPartition, ElectionResult
from logbroker.errors import (InvalidConfigError, InvalidReplicationFactorError,
                              UnknownTopicOrPartitionError)


def test_the_metadata_names_the_single_broker_leader_of_everything(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("three", 3)
    with Producer(broker.bootstrap, **FAST) as p:
        assert p.partitions_for("three") == 3
        cache = p._core.router.cache
        assert cache.brokers == {0: ("127.0.0.1", broker.port)} and cache.controller == -1
        assert cache.leaders == {("three", i): 0 for i in range(3)} and not cache.stale
        assert {(pm.leader_epoch, pm.replicas, pm.isr) for pm in cache.partitions.values()} == \
            {(0, (0,), (0,))}
        assert [p.send("three", b"v", partition=i).result(10).offset for i in range(3)] == [0] * 3
        router = p._core.router
        assert router.current(0) is router.control.current()  # one connection, as before routing
        assert router._links == {}


def test_clients_skip_a_dead_first_bootstrap_address(broker):
    both = f"127.0.0.1:{closed_port()},{broker.bootstrap}"
    with Producer(both, **FAST) as p:
        assert p.send("bs", b"x").result(10).offset == 0
    with Consumer(both, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("bs", 0)])
        assert [r.value for r in consume(c, 1)] == [b"x"]
    with Admin(both, **FAST) as a:
        assert a.list_topics() == {"bs": 1}
        assert a.list_offsets("bs")[("bs", 0)].offset == 1

    async def main():
        async with aio.Producer(both, **FAST) as ap:
            assert (await ap.send_and_wait("bs", b"y")).offset == 1
        async with aio.Admin(both, **FAST) as aa:
            return await aa.describe_cluster(["bs"])

    desc = asyncio.run(asyncio.wait_for(main(), 30))
    assert desc.partitions == (ClusterPartition("bs", 0, 0, 0, (0,), (0,), 0),)


def test_describe_cluster_and_elect_leaders_of_a_single_node(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topics(["x", NewTopic("y", 2, replication_factor=1)])
        desc = a.describe_cluster()
        assert (desc.cluster, desc.controller) == ("", -1) and desc.server.startswith("logbroker")
        assert desc.brokers == (BrokerInfo(0, "127.0.0.1", broker.port, True),)
        assert [(p.topic, p.partition, p.leader, p.under_replicated) for p in desc.partitions] == \
            [("x", 0, 0, False), ("y", 0, 0, False), ("y", 1, 0, False)]
        assert a.elect_leaders(["y"]) == {("y", 0): ElectionResult("y", 0, 0, None),
                                          ("y", 1): ElectionResult("y", 1, 0, None)}
        [(key, result)] = a.elect_leaders(["nope"]).items()
        assert key == ("nope", -1) and isinstance(result.error, UnknownTopicOrPartitionError)
        with pytest.raises(UnknownTopicOrPartitionError, match="nope"):
            a.describe_cluster(["x", "nope"])


def test_replication_factor_is_checked_and_sent_as_a_config(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        assert a.create_topic("rf1", replication_factor=1, configs={"min_insync_replicas": 1})
        with pytest.raises(InvalidReplicationFactorError, match="rf3"):
            a.create_topic("rf3", replication_factor=3)
        results = a.create_topics([NewTopic("both", 1, {"replication_factor": 2}, 1),
                                   ("tuple", 1, {}, 1)], raise_errors=False)
        assert isinstance(results["both"], InvalidConfigError) and results["tuple"] is None
        with pytest.raises(TypeError):
            a.create_topic("bad", replication_factor="3")
        with pytest.raises(InvalidConfigError, match="replication_factor"):
            a.create_topic("zero", replication_factor=0)
        assert "both" not in a.list_topics()
