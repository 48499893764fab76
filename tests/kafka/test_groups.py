"""Kafka consumer groups on the Kafka listener (issue 15): JoinGroup,
SyncGroup, Heartbeat and LeaveGroup through our coordinator, member bytes
translated between Kafka's ConsumerProtocol and ours, against one broker
process for the module. Clients: kafka-python (resume from a commit, two
members splitting and rebalancing, one member next to our Consumer with
range or cooperative-sticky, either leading), confluent-kafka (a static
member too), aiokafka and ``kcat -G``; raw frames for the errors. Each
member polls in its own thread (kafka_members.py), every wait is bounded."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.kafka_members import (Member, aio_member, kafka_member, our_member, split,
                                        until)
from tests.support.kafka_raw import WAIT, Raw, kafka_broker, kread
from logbroker import Admin, Consumer

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from kafka.admin import KafkaAdminClient, NewTopic  # noqa: E402

FAST = {"heartbeat_interval_ms": 100, "session_timeout_ms": 3000, "max_poll_interval_ms": 6000}


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """(BrokerProcess, Kafka bootstrap); groups settle fast (initial delay 100 ms)."""
    with kafka_broker(tmp_path_factory.mktemp("kafka-groups") / "data",
                      config={"group_initial_rebalance_delay_ms": 100}) as got:
        yield got


def _topic(bootstrap: str, name: str, partitions: int, values) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()
    _produce(bootstrap, name, values)


def _produce(bootstrap: str, topic: str, values) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i, v in enumerate(values):
            producer.send(topic, v, partition=i % 2 if topic.endswith("2") else 0)
        producer.flush(WAIT)
    finally:
        producer.close()


def _kconsumer(bootstrap: str, topic: str, group: str, **kw) -> KafkaConsumer:
    return KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                         auto_offset_reset="earliest", enable_auto_commit=False,
                         **{**FAST, **kw})


def test_kafka_python_group_reads_once_commits_and_resumes(kb):
    _, bootstrap = kb
    _topic(bootstrap, "kg-resume", 1, [b"a%d" % i for i in range(10)])
    c1 = _kconsumer(bootstrap, "kg-resume", "g-resume")
    try:
        got = kread(c1, 10)
        assert [r.value for r in got] == [b"a%d" % i for i in range(10)]
        assert c1.assignment() and c1._coordinator._generation.generation_id >= 1
        c1.commit()
    finally:
        c1.close()
    _produce(bootstrap, "kg-resume", [b"b%d" % i for i in range(5)])
    c2 = _kconsumer(bootstrap, "kg-resume", "g-resume")
    try:
        got = kread(c2, 5)
        got += [r for rs in c2.poll(timeout_ms=300).values() for r in rs]  # nothing more
        assert [(r.offset, r.value) for r in got] == [(10 + i, b"b%d" % i) for i in range(5)]
    finally:
        c2.close()


def split_then_read(first: Member, second: Member, bootstrap: str, topic: str, values) -> tuple:
    """Start ``first`` (alone it takes both partitions, and leads), then
    ``second``; once each owns one partition, produce ``values`` and wait
    until they are read. Returns what each owned then."""
    first.start()
    until(lambda: first.owned == {0, 1}, "the first member's assignment")
    second.start()
    until(lambda: split(first, second), "a split")
    owned = (first.owned, second.owned)
    _produce(bootstrap, topic, values)
    until(lambda: len(first.got) + len(second.got) >= len(values), "the records")
    return owned


def test_two_kafka_python_members_split_and_rebalance_when_one_leaves(kb):
    _, bootstrap = kb
    first = [b"x%d" % i for i in range(20)]
    _topic(bootstrap, "kg-split2", 2, [])
    m1 = kafka_member(_kconsumer(bootstrap, "kg-split2", "g-split"))
    m2 = kafka_member(_kconsumer(bootstrap, "kg-split2", "g-split"))
    _, owned2 = split_then_read(m1, m2, bootstrap, "kg-split2", first)
    m2.stop()  # commits, then leaves: m1 takes both partitions from m2's commit
    until(lambda: m1.owned == {0, 1}, "the rebalance")
    more = [b"y%d" % i for i in range(10)]
    _produce(bootstrap, "kg-split2", more)
    until(lambda: len(m1.got) + len(m2.got) >= 30, "the records after the rebalance")
    time.sleep(0.3)  # a record read twice would show up by now
    m1.stop()
    values = [v for _p, v in m1.got + m2.got]
    assert sorted(values) == sorted(first + more)  # each once across both members
    assert {p for p, _v in m2.got} == owned2


@pytest.mark.parametrize("leader,assignor", [("ours", "range"), ("kafka", "range"),
                                             ("ours", "cooperative-sticky"),
                                             ("kafka", "cooperative-sticky")])
def test_a_kafka_member_and_our_consumer_share_one_group(kb, leader, assignor):
    """Either leads: the other's subscription and its assignment are
    translated (msgpack <-> ConsumerProtocol) by the Kafka listener; with
    cooperative-sticky the owned partitions cross too (the first member
    gives one up in a second rebalance)."""
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    b, bootstrap = kb
    topic, group = f"kg-mixed-{leader}-{assignor}2", f"g-mixed-{leader}-{assignor}"
    values = [b"m%d" % i for i in range(20)]
    _topic(bootstrap, topic, 2, [])
    consumer = Consumer(b.bootstrap, group=group, auto_offset_reset="earliest",
                        partition_assignment_strategy=[assignor], enable_auto_commit=False,
                        **FAST)
    ours = our_member(consumer, topic)
    kafka_assignor = RangePartitionAssignor if assignor == "range" else CooperativeStickyAssignor
    theirs = kafka_member(_kconsumer(bootstrap, topic, group,
                                     partition_assignment_strategy=[kafka_assignor]))
    pair = (ours, theirs) if leader == "ours" else (theirs, ours)
    owned = dict(zip(pair, split_then_read(*pair, bootstrap, topic, values)))
    with Admin(b.bootstrap) as admin:  # the coordinator holds our encoding for both
        d = admin.describe_groups([group])[group]
    assert (d.state, d.protocol) == ("Stable", assignor)
    assert sorted(tuple(p for _t, p in mb.partitions) for mb in d.members) == [(0,), (1,)]
    assert sorted(mb.client_id.split("-")[0] for mb in d.members) == ["kafka", "logbroker"]
    time.sleep(0.3)  # a record read twice would show up by now
    got = {mb: list(mb.got) for mb in pair}  # before one leaves and the other takes over
    ours.stop(commit=False)  # (nothing committed: the other member rebalances now)
    theirs.stop(commit=False)
    assert sorted(v for _p, v in got[ours] + got[theirs]) == sorted(values)
    assert {p for p, _ in got[ours]} == owned[ours] and {p for p, _ in got[theirs]} == owned[theirs]


def test_our_consumer_leads_a_member_whose_subscription_says_version_4(kb):
    """An aiokafka member whose assignor writes version 4 over version 0's
    layout (as an aiokafka-based stream framework does) and our Consumer
    share a ``range`` group: our leader reads its subscription (translated
    tolerantly; the strict parse refused its JoinGroup), each gets a
    partition, each record is read once."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

    class V4Range(RangePartitionAssignor):
        @classmethod
        def metadata(cls, topics):
            return ConsumerProtocolMemberMetadata(4, sorted(topics), b"framework-state")

    b, bootstrap = kb
    topic, group = "kg-v4-2", "g-v4"
    values = [b"v%d" % i for i in range(10)]
    _topic(bootstrap, topic, 2, [])
    ours = our_member(Consumer(b.bootstrap, group=group, auto_offset_reset="earliest",
                               partition_assignment_strategy=["range"], enable_auto_commit=False,
                               **FAST), topic)
    theirs = aio_member(lambda: AIOKafkaConsumer(
        bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
        enable_auto_commit=False, partition_assignment_strategy=(V4Range,),
        heartbeat_interval_ms=100, session_timeout_ms=3000, max_poll_interval_ms=6000), topic)
    split_then_read(ours, theirs, bootstrap, topic, values)
    ours.stop(commit=False)
    theirs.stop(commit=False)
    assert sorted(v for _p, v in ours.got + theirs.got) == sorted(values)


def test_confluent_kafka_subscribes_with_a_group(kb):
    ck = pytest.importorskip("confluent_kafka")
    _, bootstrap = kb
    _topic(bootstrap, "kg-conf", 1, [b"c%d" % i for i in range(8)])
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "g-conf",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False,
                     "session.timeout.ms": 3000, "heartbeat.interval.ms": 100})
    try:
        c.subscribe(["kg-conf"])
        got, deadline = [], time.monotonic() + WAIT
        while len(got) < 8 and time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
        assert got == [b"c%d" % i for i in range(8)]
        c.commit(asynchronous=False)
        assert [tp.offset for tp in c.committed([ck.TopicPartition("kg-conf", 0)], 5)] == [8]
    finally:
        c.close()


def test_a_static_confluent_member_restarts_without_a_rebalance(kb):
    """group.instance.id (JoinGroup v5): a static member's close does not
    leave; its restart takes its place in the same generation."""
    ck = pytest.importorskip("confluent_kafka")
    b, bootstrap = kb
    _topic(bootstrap, "kg-static", 1, [b"s%d" % i for i in range(6)])
    conf = {"bootstrap.servers": bootstrap, "group.id": "g-static", "group.instance.id": "i1",
            "auto.offset.reset": "earliest", "enable.auto.commit": False,
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 100}
    generations = []
    for expected in ([b"s%d" % i for i in range(4)], [b"s4", b"s5"]):
        n = len(expected)
        c = ck.Consumer(conf)
        try:
            c.subscribe(["kg-static"])
            got, deadline = [], time.monotonic() + WAIT
            while len(got) < n and time.monotonic() < deadline:
                msg = c.consume(n - len(got), 0.2)
                got += [x.value() for x in msg if x.error() is None]
            c.commit(asynchronous=False)
            with Admin(b.bootstrap) as admin:
                d = admin.describe_groups(["g-static"])["g-static"]
            generations.append(d.generation)
            assert [mb.group_instance_id for mb in d.members] == ["i1"]
            assert got == expected  # the restarted member resumes from the commit
        finally:
            c.close()
    assert generations[0] == generations[1]  # no rebalance


def test_aiokafka_subscribes_with_a_group_and_commits(kb):
    aiokafka = pytest.importorskip("aiokafka")
    import asyncio

    _, bootstrap = kb
    _topic(bootstrap, "kg-aio", 1, [b"a%d" % i for i in range(7)])

    async def run() -> tuple:
        c = aiokafka.AIOKafkaConsumer("kg-aio", bootstrap_servers=bootstrap, group_id="g-aio",
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      **FAST)
        await c.start()
        try:
            got = []
            async with asyncio.timeout(WAIT):
                while len(got) < 7:
                    for records in (await c.getmany(timeout_ms=200)).values():
                        got += [r.value for r in records]
            await c.commit()
            return got, await c.committed(aiokafka.TopicPartition("kg-aio", 0))
        finally:
            await c.stop()

    assert asyncio.run(run()) == ([b"a%d" % i for i in range(7)], 7)


def test_kcat_balanced_consumer_reads(kb):
    from tests.support.kafka_adapters import kcat_path as _kcat

    kcat = _kcat()
    _, bootstrap = kb
    _topic(bootstrap, "kg-kcat", 1, [b"k%d" % i for i in range(6)])
    done = subprocess.run([kcat, "-b", bootstrap, "-G", "g-kcat", "-c", "6", "-f", "%s\\n",
                           "-X", "auto.offset.reset=earliest", "kg-kcat"],
                          capture_output=True, text=True, timeout=2 * WAIT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["k%d" % i for i in range(6)]


def _join(raw: Raw, version: int, cid: int, group: str, member_id: str = "",
          protocol_type: str = "consumer", metadata: "bytes | None" = None):
    from kafka.coordinator.consumer import ConsumerProtocolSubscription as KS

    meta = KS(version=0, topics=["kg-raw"], user_data=b"u").encode() if metadata is None \
        else metadata
    raw.sock.sendall(raw.send(11, version, cid, {
        "group_id": group, "session_timeout_ms": 2000, "rebalance_timeout_ms": 2000,
        "member_id": member_id, "protocol_type": protocol_type,
        "protocols": [{"name": "range", "metadata": meta}]}))


def test_membership_errors_on_the_wire(kb):
    """Raw frames: another protocol type (``connect``) served with its bytes
    opaque, a member of another type refused (23), JoinGroup v0 (the
    session timeout as rebalance timeout), the leader's assignment back byte
    for byte (even bytes no ConsumerProtocol reader could read), stale
    generation (22), unknown member (25), a rebalance seen by heartbeat
    (27), LeaveGroup v0 and v3."""
    from kafka.coordinator.consumer import ConsumerProtocolAssignment as KA
    from kafka.coordinator.consumer import ConsumerProtocolSubscription as KS

    _, bootstrap = kb
    a, b = Raw(bootstrap), Raw(bootstrap)
    try:
        _join(a, 5, 1, "g-raw-connect", protocol_type="connect", metadata=b"\x00\x01worker")
        connect = a.recv(11, 5)[1]
        assert connect.error_code == 0 and [mb.metadata for mb in connect.members] == [
            b"\x00\x01worker"]
        _join(a, 5, 1, "g-raw-connect")  # a consumer member in a connect group
        assert a.recv(11, 5)[1].error_code == 23
        _join(a, 0, 2, "g-raw")
        joined = a.recv(11, 0)[1]
        me = joined.member_id
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, me)
        assert [KS.decode(mb.metadata).topics for mb in joined.members] == [["kg-raw"]]
        assert KS.decode(joined.members[0].metadata).user_data == b"u"
        given = b"\x00\x07" + KA(version=0, assigned_partitions=[KA.TopicPartition(
            topic="kg-raw", partitions=[0])], user_data=b"x").encode()[2:] + b"\x00\x00\x00\x09"
        a.sock.sendall(a.send(14, 1, 4, {"group_id": "g-raw", "generation_id": 1, "member_id": me,
                                         "assignments": [{"member_id": me, "assignment": given}]}))
        assert a.recv(14, 1)[1].assignment == given
        for cid, (gen, mid, code) in enumerate([(2, me, 22), (1, "nobody", 25), (1, me, 0)], 5):
            a.sock.sendall(a.send(12, 0, cid, {"group_id": "g-raw", "generation_id": gen,
                                               "member_id": mid}))
            assert a.recv(12, 0)[1].error_code == code
        _join(b, 2, 10, "g-raw")  # parks: the group rebalances
        until(lambda: _heartbeat(a, me) == 27, "REBALANCE_IN_PROGRESS")
        a.sock.sendall(a.send(13, 0, 11, {"group_id": "g-raw", "member_id": me}))
        assert a.recv(13, 0)[1].error_code == 0
        second = b.recv(11, 2)[1]  # the join completes without the member that left
        assert (second.error_code, second.generation_id) == (0, 2)
        assert [mb.member_id for mb in second.members] == [second.member_id]
        b.sock.sendall(b.send(13, 3, 12, {"group_id": "g-raw", "members": [
            {"member_id": second.member_id}, {"member_id": me}]}))
        left = b.recv(13, 3)[1]
        assert left.error_code == 0 and [m.error_code for m in left.members] == [0, 25]
    finally:
        a.close()
        b.close()


def _heartbeat(raw: Raw, member_id: str) -> int:
    cid = len(raw.sent) + 100
    raw.sock.sendall(raw.send(12, 1, cid, {"group_id": "g-raw", "generation_id": 1,
                                           "member_id": member_id}))
    return raw.recv(12, 1)[1].error_code


def test_random_membership_requests_are_answered_or_close_the_connection(kb):
    """150 JoinGroup / SyncGroup / Heartbeat / LeaveGroup requests of every
    version with schema-generated values (timeouts clamped so a join cannot
    park longer than WAIT): each answered at its version or its connection
    closed; the broker logs no traceback (checked at the module's end)."""
    import random

    from logbroker.kafka.apis import APIS
    from tests.support.kafka_cases import random_body

    b, bootstrap = kb
    rng = random.Random(11)
    cases = [(APIS[k], v) for k in (11, 12, 13, 14)
             for v in range(APIS[k].min_version, APIS[k].max_version + 1)]
    raw, answered = Raw(bootstrap), 0
    try:
        for cid in range(150):
            api, version = rng.choice(cases)
            body = random_body(api.request, version, rng)
            for key in ("session_timeout_ms", "rebalance_timeout_ms"):
                if key in body:
                    body[key] = min(rng.choice([body[key], 1000, 1500]), 1500)
            raw.sock.sendall(raw.send(api.key, version, cid, body))
            try:
                assert raw.recv(api.key, version)[0].correlation_id == cid
                answered += 1
            except TimeoutError:
                pytest.fail(f"{api.name} v{version} neither answered nor closed: {body!r}")
            except (ConnectionError, OSError):
                raw.close()
                raw = Raw(bootstrap)
    finally:
        raw.close()
    assert answered >= 100 and b.alive()
