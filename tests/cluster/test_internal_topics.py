"""Internal topics (``__consumer_offsets``, ``__transaction_state``) are
created by the first FindCoordinator that needs them (metadata/
internal_topics.py); the creation finishes even when that request's client
goes away mid-way (librdkafka drops its bootstrap connection once Metadata
names the brokers), and a half-created one (partition states in etcd, no
topic key) is repaired, so neither stays without partition leaders.
"""

import time

from logbroker.cluster.state import Keys, PartitionState, TopicState, partition_value, topic_value
from logbroker.limits import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from logbroker.protocol import messages as m
from tests.cluster.test_poisoned_etcd import put
from tests.coordinator.test_txn_cluster import call
from tests.support.cluster import Cluster
from tests.support.fixtures import RawConn

KEYS = Keys("logbroker")


def _found(cluster, i: int, key: str, key_type: int, timeout: float = 15.0):
    """FindCoordinator through broker ``i`` until it names a coordinator (bounded)."""
    deadline, resp = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        resp = cluster.call(i, m.FindCoordinator(group=key, key_type=key_type))
        if resp.error == 0:
            break
        time.sleep(0.1)
    assert resp.error == 0, (key_type, resp)
    assert resp.broker_id in (1, 2, 3)
    return resp


def test_internal_topics_are_created_whatever_the_first_client_does(cluster, etcd):
    # a creation cut short before this fix: partition states, no topic key
    for p in range(3):
        put(etcd.url, KEYS.partition(TRANSACTION_STATE_TOPIC, p),
            partition_value(PartitionState(TRANSACTION_STATE_TOPIC, p, (1, 2, 3), 1, (1, 2, 3), 0)))
    for key_type, key in ((0, "g1"), (1, "txn-1")):
        raw = RawConn(cluster.brokers[1].port)
        raw.send(m.FindCoordinator(group=key, key_type=key_type))
        raw.close()  # gone before the answer: the creation must not be cancelled with it
        _found(cluster, 2, key, key_type)
    for p in range(3):  # the repaired topic kept the existing partitions
        assert sorted(cluster.state(TRANSACTION_STATE_TOPIC, p)[2]) == [1, 2, 3]


def test_add_offsets_joins_an_offsets_partition_without_a_leader(tmp_path, etcd):
    """Kafka adds the group's offsets partition to the transaction without
    waiting for its leader (librdkafka hands COORDINATOR_NOT_AVAILABLE of an
    AddOffsetsToTxn to the application)."""
    c = Cluster(tmp_path, etcd.url, config={"offsets_topic_num_partitions": 1,
                                            "transaction_state_num_partitions": 1})
    try:
        # the offsets topic's one partition on a broker that is not there: no leader
        put(etcd.url, KEYS.partition(OFFSETS_TOPIC, 0),
            partition_value(PartitionState(OFFSETS_TOPIC, 0, (9,), 9, (9,), 0)))
        put(etcd.url, KEYS.topic(OFFSETS_TOPIC),
            topic_value(TopicState(OFFSETS_TOPIC, 1, 1, {"cleanup_policy": "compact"})))
        c.start()
        coord = _found(c, 1, "tx-o", 1).broker_id
        init = call(c, coord, m.InitProducerId(transactional_id="tx-o",
                                               transaction_timeout_ms=60_000))
        assert init.error == 0, init
        resp = c.call(coord, m.AddOffsetsToTxn(transactional_id="tx-o",
                                               producer_id=init.producer_id,
                                               producer_epoch=init.producer_epoch, group="g"))
        assert resp.error == 0, resp
        d = c.call(coord, m.DescribeTransactions(transactional_ids=("tx-o",))).transactions[0]
        assert d.state == "Ongoing" and (OFFSETS_TOPIC, 0) in [tuple(x) for x in d.parts], d
    finally:
        c.close()
