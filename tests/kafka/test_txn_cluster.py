"""Kafka clients' transactions on a 3-broker cluster (docs/kafka.md §4.14;
tests/support/kafka_cluster.py's ``kc``: three real brokers and etcd):
librdkafka's transactional producer, bootstrapped at one broker, finds its
transaction coordinator at that broker's Kafka address, writes to three
partitions led by the three brokers (RF 3) and commits with its input
offsets, aborts the next transaction and commits a third; so the markers
go both to the coordinator's own partitions and to its peers' (our
WriteTxnMarkers over the peer link). A read_committed consumer at another
broker sees the committed records only, a read_uncommitted one all of
them. Slow (a cluster of its own); the single broker's are in
test_txn_clients.py."""

from __future__ import annotations

import pytest

from tests.support.kafka_cluster import kc, leaders  # noqa: F401 (the fixture)
from tests.support.kafka_raw import raw_call
from tests.kafka.test_txn_clients import WAIT

pytestmark = pytest.mark.slow
ck = pytest.importorskip("confluent_kafka")


def _read(bootstrap: str, topic: str, isolation: str, want: int) -> dict:
    import time

    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused-" + isolation,
                     "isolation.level": isolation, "enable.partition.eof": True,
                     "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    got: dict = {p: [] for p in range(3)}
    at_end: set = set()
    try:
        c.assign([ck.TopicPartition(topic, p, 0) for p in range(3)])
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                continue
            if msg.error():
                assert msg.error().code() == ck.KafkaError._PARTITION_EOF, msg.error()
                at_end.add(msg.partition())
                if len(at_end) == 3 and sum(map(len, got.values())) >= want:
                    break
                continue
            at_end.discard(msg.partition())
            got[msg.partition()].append(msg.value())
    finally:
        c.close()
    return got


def test_transactions_over_three_leaders(kc):  # noqa: F811 (the fixture)
    kc.create("txn-out", partitions=3, replication_factor=3)
    kc.create("txn-in", partitions=1, replication_factor=3)
    assert sorted(leaders(kc, "txn-out", 3).values()) == [1, 2, 3]
    # both internal topics first, by raw FindCoordinators awaited to the end: a
    # client that drops its connection while one is being created (librdkafka drops
    # its bootstrap connection once Metadata names the brokers) leaves the topic
    # without leaders, COORDINATOR_NOT_AVAILABLE for good (main's cluster metadata)
    for key, key_type in (("cl-g", 0), ("cl-tx", 1)):
        found = raw_call(kc.kafka[1], 10, 2, {"key": key, "key_type": key_type})
        assert found.error_code == 0, found
        assert f"{found.host}:{found.port}" == kc.kafka[found.node_id]
    group = ck.Consumer({"bootstrap.servers": kc.kafka[2], "group.id": "cl-g",
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    p = ck.Producer({"bootstrap.servers": kc.kafka[1], "transactional.id": "cl-tx",
                     "linger.ms": 5})
    try:
        p.init_transactions(WAIT)
        for value, offset, commit in ((b"c", 1, True), (b"a", 2, False), (b"e", 3, True)):
            p.begin_transaction()
            for partition in range(3):
                p.produce("txn-out", value=value, partition=partition)
            p.send_offsets_to_transaction([ck.TopicPartition("txn-in", 0, offset)],
                                          group.consumer_group_metadata(), WAIT)
            assert p.flush(WAIT) == 0
            (p.commit_transaction if commit else p.abort_transaction)(WAIT)
        committed = group.committed([ck.TopicPartition("txn-in", 0)], WAIT)
    finally:
        group.close()
    assert committed[0].offset == 3
    assert _read(kc.kafka[3], "txn-out", "read_committed", 6) == {p: [b"c", b"e"]
                                                                  for p in range(3)}
    assert _read(kc.kafka[3], "txn-out", "read_uncommitted", 9) == {p: [b"c", b"a", b"e"]
                                                                    for p in range(3)}
