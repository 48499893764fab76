"""Kafka 4's consumer group protocol (KIP-848) on the Kafka listener of one
real broker, through librdkafka (confluent-kafka, ``group.protocol=consumer``):
the broker assigns, members reconcile (revoke before assign), offsets commit
with member epochs; classic and consumer-protocol groups side by side; the
AdminClient's describe_consumer_groups (ConsumerGroupDescribe) and our CLI.
"""

from __future__ import annotations

import json
import time

import pytest
from click.testing import CliRunner

from logbroker.cli.main import main

from tests.support.kafka_raw import Raw, kafka_broker

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

WAIT = 15.0
CONFIG = {"group_consumer_heartbeat_interval_ms": 200, "group_initial_rebalance_delay_ms": 0}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kip848") / "data", config=CONFIG) as (b, boot):
        admin = AdminClient({"bootstrap.servers": boot})
        for f in admin.create_topics([NewTopic("k4", 4, 1), NewTopic("side", 1, 1)]).values():
            f.result(WAIT)
        yield b, boot, admin


def produce(boot: str, topic: str, values, partitions: int) -> None:
    p = ck.Producer({"bootstrap.servers": boot, "linger.ms": 2})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(WAIT) == 0


def consumer(boot: str, group: str, **extra) -> "ck.Consumer":
    c = ck.Consumer({"bootstrap.servers": boot, "group.id": group, "group.protocol": "consumer",
                     "auto.offset.reset": "earliest", "enable.auto.commit": False, **extra})
    c.subscribe(["k4"])
    return c


def drain(consumers: list, want: int, seen: dict) -> None:
    """Poll ``consumers`` in turn, committing each record before the next
    poll, until ``want`` records were read in all (``seen``: value -> who)."""
    deadline = time.monotonic() + WAIT
    while sum(len(v) for v in seen.values()) < want and time.monotonic() < deadline:
        for i, c in enumerate(consumers):
            msg = c.poll(0.05)
            if msg is None or msg.error():
                continue
            seen.setdefault(msg.value(), []).append(i)
            c.commit(message=msg, asynchronous=False)


def described(boot: str, group: str):
    """ConsumerGroupDescribe (v0) of one group, raw: its epochs and members."""
    raw = Raw(boot)
    try:
        raw.sock.sendall(raw.send(69, 0, 1, {"group_ids": [group],
                                             "include_authorized_operations": False}))
        (out,) = raw.recv(69, 0)[1].groups
        assert out.error_code == 0, out
        return out
    finally:
        raw.close()


def owned(c) -> set:
    return {(tp.topic, tp.partition) for tp in c.assignment()}


def wait_for(cond, consumers: list) -> None:
    deadline = time.monotonic() + WAIT
    while not cond() and time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.05)
    assert cond()


def test_members_split_partitions_move_on_a_join_and_resume_from_commits(broker):
    b, boot, admin = broker
    produce(boot, "k4", [b"a%d" % i for i in range(80)], 4)
    c1, c2 = consumer(boot, "kg"), consumer(boot, "kg")
    try:
        seen: dict = {}
        drain([c1, c2], 80, seen)
        wait_for(lambda: len(owned(c1)) == len(owned(c2)) == 2, [c1, c2])
        assert sorted(seen) == sorted(b"a%d" % i for i in range(80))
        assert all(len(who) == 1 for who in seen.values())  # every record once
        assert owned(c1) | owned(c2) == {("k4", p) for p in range(4)}
        c3 = consumer(boot, "kg")
        try:
            wait_for(lambda: len(owned(c3)) == 1 and len(owned(c1) | owned(c2) | owned(c3)) == 4
                     and not owned(c1) & owned(c2), [c1, c2, c3])
            produce(boot, "k4", [b"b%d" % i for i in range(40)], 4)
            later: dict = {}
            drain([c1, c2, c3], 40, later)
            assert sorted(later) == sorted(b"b%d" % i for i in range(40))
            assert all(len(who) == 1 for who in later.values())  # committed before each move
            assert 2 in {i for who in later.values() for i in who}  # c3 read its partition
            (desc,) = admin.describe_consumer_groups(["kg"]).values()
            d = desc.result(WAIT)
            assert d.type == ck.ConsumerGroupType.CONSUMER and len(d.members) == 3
            assert d.state == ck.ConsumerGroupState.STABLE
            assert sorted(len(m.assignment.topic_partitions) for m in d.members) == [1, 1, 2]
        finally:
            c3.close()
    finally:
        c1.close()
        c2.close()
    produce(boot, "k4", [b"c%d" % i for i in range(8)], 4)
    again = consumer(boot, "kg")  # a new member resumes from the group's commits
    try:
        resumed: dict = {}
        drain([again], 8, resumed)
        assert sorted(resumed) == sorted(b"c%d" % i for i in range(8))
    finally:
        again.close()


def test_a_classic_group_lives_beside_and_the_cli_shows_both_kinds(broker):
    b, boot, admin = broker
    produce(boot, "side", [b"s%d" % i for i in range(5)], 1)
    classic = ck.Consumer({"bootstrap.servers": boot, "group.id": "classic-g",
                           "auto.offset.reset": "earliest"})
    new = ck.Consumer({"bootstrap.servers": boot, "group.id": "new-g",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    classic.subscribe(["side"])
    new.subscribe(["side"])
    try:
        wait_for(lambda: owned(classic) and owned(new), [classic, new])
        # a classic member may not join a consumer-protocol group (and the reverse)
        raw = Raw(boot)
        try:
            raw.sock.sendall(raw.send(11, 5, 1, {
                "group_id": "new-g", "session_timeout_ms": 10_000, "rebalance_timeout_ms": 10_000,
                "member_id": "", "protocol_type": "consumer",
                "protocols": [{"name": "range",  # ConsumerProtocol v0: topics ["side"], no user data
                               "metadata": b"\0\0\0\0\0\1\0\4side\xff\xff\xff\xff"}]}))
            assert raw.recv(11, 5)[1].error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        finally:
            raw.close()
        found = {g.group_id: g for g in admin.list_consumer_groups().result(WAIT).valid}
        assert {"classic-g", "new-g"} <= set(found)
        descs = {g: f.result(WAIT) for g, f in
                 admin.describe_consumer_groups(["classic-g", "new-g"]).items()}
        assert descs["classic-g"].type == ck.ConsumerGroupType.CLASSIC
        assert descs["new-g"].type == ck.ConsumerGroupType.CONSUMER
        out = CliRunner().invoke(main, ["groups", "describe", "classic-g", "new-g",
                                        "--bootstrap", f"127.0.0.1:{b.port}", "--json"])
        assert out.exit_code == 0, out.output
        rows = {g["group"]: g for g in json.loads(out.output)}
        assert (rows["classic-g"]["type"], rows["new-g"]["type"]) == ("classic", "consumer")
        assert rows["new-g"]["members"][0]["partitions"] == [["side", 0]]
        out = CliRunner().invoke(main, ["groups", "list", "--bootstrap", f"127.0.0.1:{b.port}"])
        listed = {tuple(line.split()) for line in out.output.splitlines()}
        assert {("classic-g", "classic"), ("new-g", "consumer")} <= listed, out.output
    finally:
        classic.close()
        new.close()


def test_a_restarted_coordinator_keeps_the_group_and_its_members_epochs(tmp_path):
    """The group's record in the offsets topic brings it back: the member
    heartbeats on with its epoch (no rejoin), the group epoch goes on."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data = tmp_path / "data"
    with kafka_broker(data, config=CONFIG, kafka_port=port) as (_, boot):
        admin = AdminClient({"bootstrap.servers": boot})
        for f in admin.create_topics([NewTopic("r2", 2, 1)]).values():
            f.result(WAIT)
        c = consumer(boot, "rg")
        c.subscribe(["r2"])
        other = consumer(boot, "rg")
        other.subscribe(["r2"])
        wait_for(lambda: len(owned(c)) == 1 and len(owned(other)) == 1, [c, other])
        other.close()  # leaves: c takes both partitions
        wait_for(lambda: len(owned(c)) == 2, [c])
        before = described(boot, "rg")
        assert before.group_epoch >= 3  # two joins, one leave
    try:
        with kafka_broker(data, config=CONFIG, kafka_port=port) as (_, boot):
            produce(boot, "r2", [b"r%d" % i for i in range(6)], 2)
            seen: dict = {}
            drain([c], 6, seen)
            assert sorted(seen) == sorted(b"r%d" % i for i in range(6))
            after = described(boot, "rg")
            assert after.group_epoch == before.group_epoch  # restored, not rejoined
            assert [(mb.member_id, mb.member_epoch) for mb in after.members] == \
                [(mb.member_id, mb.member_epoch) for mb in before.members]
    finally:
        c.close()


def test_bad_heartbeats_get_kafkas_errors_naming_the_rule(broker):
    _, boot, _ = broker
    raw = Raw(boot)

    def beat(**body) -> tuple:
        raw.sock.sendall(raw.send(68, 1, 1, {"group_id": "bad-g", "member_id": "m-1",
                                             "member_epoch": 0, "rebalance_timeout_ms": 1000,
                                             **body}))
        out = raw.recv(68, 1)[1]
        return out.error_code, out.error_message or ""
    try:
        assert beat(subscribed_topic_regex="(a+)+$(")[0] == 128  # INVALID_REGULAR_EXPRESSION
        code, message = beat(subscribed_topic_names=[f"t{i}" for i in range(1001)])
        assert code == 42 and "1001 subscribed topics (limit 1000)" in message
        assert beat(subscribed_topic_names=["k4"], server_assignor="sticky")[0] == 112
        assert beat(member_epoch=5, subscribed_topic_names=["k4"])[0] == 25  # unknown member
    finally:
        raw.close()


def test_an_emptied_consumer_group_becomes_classic_with_its_offsets(broker):
    _, boot, admin = broker
    new = ck.Consumer({"bootstrap.servers": boot, "group.id": "turn-g",
                       "group.protocol": "consumer", "auto.offset.reset": "earliest"})
    new.subscribe(["side"])
    try:
        wait_for(lambda: owned(new), [new])
        assert new.consume(1, 5.0)
        new.commit(asynchronous=False)
    finally:
        new.close()  # leaves: the group keeps only its offsets
    classic = ck.Consumer({"bootstrap.servers": boot, "group.id": "turn-g",
                           "auto.offset.reset": "earliest"})
    classic.subscribe(["side"])
    try:
        wait_for(lambda: owned(classic), [classic])
        (d,) = admin.describe_consumer_groups(["turn-g"]).values()
        assert d.result(WAIT).type == ck.ConsumerGroupType.CLASSIC
        (tp,) = classic.committed([ck.TopicPartition("side", 0)], WAIT)
        assert tp.offset == 1  # the consumer-protocol member's commit, kept
    finally:
        classic.close()


def test_a_regex_subscription_takes_matching_topics_created_later(broker):
    _, boot, admin = broker
    for f in admin.create_topics([NewTopic("rx-a", 2, 1), NewTopic("nope-rx", 1, 1)]).values():
        f.result(WAIT)
    c = ck.Consumer({"bootstrap.servers": boot, "group.id": "rx-g", "group.protocol": "consumer",
                     "auto.offset.reset": "earliest"})
    c.subscribe(["^rx-.*"])  # sent as the heartbeat's RE2 regex (v1)
    try:
        wait_for(lambda: owned(c) == {("rx-a", 0), ("rx-a", 1)}, [c])
        for f in admin.create_topics([NewTopic("rx-b", 1, 1)]).values():
            f.result(WAIT)
        produce(boot, "rx-b", [b"late"], 1)
        got, deadline = [], time.monotonic() + WAIT
        while not got and time.monotonic() < deadline:
            msg = c.poll(0.1)
            if msg is not None and not msg.error():
                got.append((msg.topic(), msg.value()))
        assert got == [("rx-b", b"late")]  # the group saw the new topic (epoch bumped)
    finally:
        c.close()


def test_topic_ids_in_metadata_looked_up_by_id_and_new_on_re_creation(broker):
    from logbroker.kafka.topic_ids import NO_TOPIC_ID

    _, boot, admin = broker

    def meta(topics) -> dict:
        raw = Raw(boot)
        try:
            raw.sock.sendall(raw.send(3, 12, 1, {"topics": topics,
                                                 "allow_auto_topic_creation": False}))
            return {(t.name, t.topic_id): t.error_code for t in raw.recv(3, 12)[1].topics}
        finally:
            raw.close()
    for f in admin.create_topics([NewTopic("ids", 1, 1)]).values():
        f.result(WAIT)
    ((name, tid),) = meta([{"name": "ids", "topic_id": NO_TOPIC_ID}])
    assert name == "ids" and tid != NO_TOPIC_ID
    from confluent_kafka.admin import (AlterConfigOpType, ConfigEntry, ConfigResource,
                                       NewPartitions)

    for f in admin.create_partitions([NewPartitions("ids", 2)]).values():
        f.result(WAIT)
    entry = ConfigEntry("retention.ms", "3600000",
                        incremental_operation=AlterConfigOpType.SET)
    for f in admin.incremental_alter_configs([ConfigResource("topic", "ids",
                                                             incremental_configs=[entry])]).values():
        f.result(WAIT)
    assert meta([{"name": "ids", "topic_id": NO_TOPIC_ID}]) == {("ids", tid): 0}  # kept
    assert meta([{"name": None, "topic_id": tid}]) == {("ids", tid): 0}
    for f in admin.delete_topics(["ids"]).values():
        f.result(WAIT)
    assert meta([{"name": None, "topic_id": tid}]) == {(None, tid): 100}  # UNKNOWN_TOPIC_ID
    for f in admin.create_topics([NewTopic("ids", 1, 1)]).values():
        f.result(WAIT)
    ((_, again),) = meta([{"name": "ids", "topic_id": NO_TOPIC_ID}])
    assert again not in (tid, NO_TOPIC_ID)


def test_random_heartbeats_and_describes_are_answered_without_a_traceback(broker):
    import random

    from logbroker.kafka.apis import APIS
    from tests.support.kafka_cases import random_body

    b, boot, _ = broker
    rng = random.Random(848)
    raw = Raw(boot)
    answered = 0
    try:
        for cid in range(200):
            api = APIS[rng.choice((68, 69))]
            version = rng.randint(api.min_version, api.max_version)
            raw.sock.sendall(raw.send(api.key, version, cid, random_body(api.request, version,
                                                                         rng)))
            try:
                assert raw.recv(api.key, version)[0].correlation_id == cid
                answered += 1
            except (ConnectionError, OSError):
                raw.close()
                raw = Raw(boot)
    finally:
        raw.close()
    assert answered >= 150 and b.alive() and "Traceback" not in b.log()
