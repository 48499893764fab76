"""Internal topics (``__consumer_offsets``, ``__transaction_state``) are
created by the first FindCoordinator that needs them (metadata/
internal_topics.py); the creation finishes even when that request's client
goes away mid-way (librdkafka drops its bootstrap connection once Metadata
names the brokers), and a half-created one (partition states in etcd, no
topic key) is repaired, so neither stays without partition leaders.
"""

import time

from logbroker.cluster.state import Keys, PartitionState, partition_value
from logbroker.limits import TRANSACTION_STATE_TOPIC
from logbroker.protocol import messages as m
from tests.cluster.test_poisoned_etcd import put
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
