"""CreatePartitions and DeleteRecords in a 3-broker cluster through
confluent-kafka's AdminClient (tests/support/kafka_cluster.py's ``kc``):
new partitions placed as the client assigned them, refused assignments
named; a leader's moved log start is followed by every replica, so a new
leader after a kill still starts there; a preferred election moves
leadership back (answered 0, not ELECTION_NOT_NEEDED). Marked slow (a cluster start):
run with ``-m slow``."""

from __future__ import annotations

import pytest

from logbroker.protocol import messages as m
from tests.support.fixtures import wait_until
from tests.support.kafka_cluster import kc  # noqa: F401 (the fixture)
from tests.support.kafka_raw import admin_error, kafka_address

pytestmark = pytest.mark.slow
WAIT = 20.0


def _admin(kc):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": ",".join(kc.kafka.values())})


def _error(fut):
    return admin_error(fut, WAIT)


def test_create_partitions_with_assignments_in_a_cluster(kc):
    import confluent_kafka as ck
    from confluent_kafka.admin import NewPartitions, NewTopic
    admin = _admin(kc)
    admin.create_topics([NewTopic("cgrow", 1, 2)])["cgrow"].result(WAIT)
    a, b, c = sorted(kc.brokers)
    assert admin.create_partitions([NewPartitions("cgrow", 3, replica_assignment=[
        [b, c], [c, a]])])["cgrow"].result(WAIT) is None
    wait_until(lambda: len(admin.list_topics("cgrow", timeout=WAIT).topics["cgrow"]
                           .partitions) == 3, WAIT, "every broker's Metadata has 3 partitions")
    parts = admin.list_topics("cgrow", timeout=WAIT).topics["cgrow"].partitions
    assert (parts[1].replicas, parts[2].replicas) == ([b, c], [c, a])
    assert parts[2].leader == c  # the first replica leads
    p = ck.Producer({"bootstrap.servers": ",".join(kc.kafka.values()), "acks": "all"})
    p.produce("cgrow", value=b"new", partition=2)
    assert p.flush(WAIT) == 0
    for bad, why in (([[a, a]], "distinct"), ([[a, b], [b, c]], "assignment"),
                     ([[a, 99]], "not live")):
        err = _error(admin.create_partitions([NewPartitions("cgrow", 4,
                                                            replica_assignment=bad)])["cgrow"])
        assert err.code() == ck.KafkaError.INVALID_REPLICA_ASSIGNMENT and why in err.str()
    assert admin.create_partitions([NewPartitions("cgrow", 5)])["cgrow"].result(WAIT) is None


def test_every_replica_follows_a_deleted_log_start(kc):
    import confluent_kafka as ck
    from confluent_kafka.admin import NewTopic
    admin = _admin(kc)
    admin.create_topics([NewTopic("ccut", 1, 3)])["ccut"].result(WAIT)
    p = ck.Producer({"bootstrap.servers": ",".join(kc.kafka.values()), "acks": "all",
                     "linger.ms": 0})
    for i in range(10):
        p.produce("ccut", value=b"v%d" % i, partition=0)
        p.flush(WAIT)
    done = admin.delete_records([ck.TopicPartition("ccut", 0, 6)])
    assert [f.result(WAIT).low_watermark for f in done.values()] == [6]

    def starts():
        out = []
        for i in kc.live():
            (t,) = kc.call(i, m.DescribeTopics(topics=("ccut",))).topics
            out += [p.log_start for p in t.partitions if not p.error]
        return out
    wait_until(lambda: starts() == [6, 6, 6], WAIT, "every replica's log start is 6")
    leader = kc.state("ccut", 0)[0]
    kc.brokers[leader].kill()
    c = ck.Consumer({"bootstrap.servers": ",".join(v for k, v in kc.kafka.items()
                                                    if k != leader),
                     "group.id": "ccut-g", "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition("ccut", 0, ck.OFFSET_BEGINNING)])
        got = []
        wait_until(lambda: (msg := c.poll(0.2)) is not None and msg.error() is None
                   and got.append(msg.offset()) is None and len(got) >= 4, WAIT, "4 records")
        assert got == [6, 7, 8, 9]
    finally:
        c.close()
    # the old leader, back and in sync, is the preferred replica: a preferred election moves it
    kc.brokers[leader].start()
    kc.wait_state("ccut", 0, lambda now, _e, _r, isr: leader in isr and now != leader, WAIT,
                  "the restarted broker back in sync")
    kc.kafka[leader] = kafka_address(kc.brokers[leader])  # a new Kafka port: a new client
    fresh = _admin(kc)
    moved = fresh.elect_leaders(ck.ElectionType.PREFERRED,
                                [ck.TopicPartition("ccut", 0)]).result(WAIT)
    assert [err for err in moved.values()] == [None]
    kc.wait_state("ccut", 0, lambda now, *_: now == leader, WAIT, "the preferred replica leads")
