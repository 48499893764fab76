"""A consumer-protocol group (KIP-848) in a 3-broker cluster whose
coordinator is killed (slow: ``-m slow``): the group's record, replicated in
the offsets topic, brings it back on the new coordinator; the librdkafka
member heartbeats on with its epoch and reads what is produced after."""

from __future__ import annotations

import time

import pytest

from tests.support.fixtures import wait_until
from tests.support.kafka_cluster import kc  # noqa: F401 - the module's cluster
from tests.support.kafka_raw import raw_call

ck = pytest.importorskip("confluent_kafka")

pytestmark = pytest.mark.slow
GROUP = "g848-cluster"


_call = raw_call


def _coordinator(kc) -> "int | None":  # noqa: F811
    answers = set()
    for i in kc.live():
        try:
            body = _call(kc.kafka[i], 10, 1, {"key": GROUP, "key_type": 0})
        except OSError:
            return None
        answers.add((body.error_code, body.node_id))
    return next(iter(answers))[1] if len(answers) == 1 and next(iter(answers))[0] == 0 else None


def _described(address: str):
    (g,) = _call(address, 69, 0, {"group_ids": [GROUP],
                                  "include_authorized_operations": False}).groups
    return g


def test_the_group_survives_its_coordinators_death(kc):  # noqa: F811
    kc.create("k848c", partitions=2, replication_factor=3)
    node = wait_until(lambda: _coordinator(kc), 15, "one coordinator named by every broker")
    boot = ",".join(kc.kafka[i] for i in sorted(kc.brokers))
    c = ck.Consumer({"bootstrap.servers": boot, "group.id": GROUP, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["k848c"])
    p = ck.Producer({"bootstrap.servers": boot, "acks": "all"})
    try:
        def read(n: int) -> list:
            got, deadline = [], time.monotonic() + 30
            while len(got) < n and time.monotonic() < deadline:
                msg = c.poll(0.1)
                if msg is not None and not msg.error():
                    got.append(msg.value())
                    c.commit(message=msg, asynchronous=False)
            return got

        for i in range(6):
            p.produce("k848c", value=b"a%d" % i, partition=i % 2)
        assert p.flush(15) == 0
        assert sorted(read(6)) == sorted(b"a%d" % i for i in range(6))
        other = ck.Consumer({"bootstrap.servers": boot, "group.id": GROUP,
                             "group.protocol": "consumer"})
        other.subscribe(["k848c"])
        wait_until(lambda: c.poll(0.05) is None and other.poll(0.05) is None
                   and len(other.assignment()) == 1, 30, "a second member's partition")
        other.close()  # two joins and a leave: a group epoch a fresh group would not have
        before = wait_until(lambda: (g := _described(kc.kafka[node])).group_state == "Stable"
                            and len(g.members) == 1 and g, 15, "a stable group")
        assert before.group_epoch >= 3
        kc.brokers[node].kill()
        new = wait_until(lambda: (n := _coordinator(kc)) not in (None, node) and n, 30,
                         "another coordinator")
        after = wait_until(lambda: (g := _described(kc.kafka[new])).error_code == 0 and g, 30,
                           "the group loaded on the new coordinator")
        assert after.group_epoch == before.group_epoch
        assert [(m.member_id, m.member_epoch) for m in after.members] == \
            [(m.member_id, m.member_epoch) for m in before.members]
        for i in range(4):
            p.produce("k848c", value=b"b%d" % i, partition=i % 2)
        assert p.flush(30) == 0
        assert sorted(read(4)) == sorted(b"b%d" % i for i in range(4))
    finally:
        c.close()
