"""Kafka's ConsumerProtocol codec (kafka/consumer_protocol.py) and the
translation of member bytes between it and ours (kafka/member_bytes.py),
checked against kafka-python's own ConsumerProtocol classes (pure, fast)."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given, settings, strategies as st

from logbroker.protocol.consumer_protocol import Assignment, Subscription
from logbroker.kafka.consumer_protocol import (KafkaAssignment, KafkaSubscription,
                                               decode_assignment, decode_subscription,
                                               encode_assignment, encode_subscription)
from logbroker.kafka.errors import KafkaDecodeError
from logbroker.kafka.member_bytes import (ASSIGNMENT, SUBSCRIBED_BUDGET, SUBSCRIPTION,
                                          assignment_to_kafka, assignment_to_ours, for_reader,
                                          subscribed_topics, subscription_to_kafka,
                                          subscription_to_ours)

kc = pytest.importorskip("kafka.coordinator.consumer")
KS, KA = kc.ConsumerProtocolSubscription, kc.ConsumerProtocolAssignment


def _ks(version: int, **kw) -> bytes:
    fields = {"topics": ["b", "a"], "user_data": b"ud", "owned_partitions": [
        KS.TopicPartition(topic="a", partitions=[1, 0])], "generation_id": 7, "rack_id": "r1"}
    fields.update(kw)
    return KS(version=version, **fields).encode()


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscriptions_of_every_version_decode_as_kafka_wrote_them(version):
    sub = decode_subscription(_ks(version))
    assert sub.topics == ("b", "a") and sub.user_data == b"ud"
    assert sub.owned == ((("a", 1), ("a", 0)) if version >= 1 else ())
    assert sub.generation == (7 if version >= 2 else -1)
    assert sub.rack == ("r1" if version >= 3 else None)


def test_a_newer_version_reads_as_the_newest_known_and_trailing_bytes_are_ignored():
    data = bytearray(_ks(3))
    data[0:2] = (9).to_bytes(2, "big")
    assert decode_subscription(bytes(data) + b"\x00\x01more").rack == "r1"
    assignment = KA(version=0, assigned_partitions=[], user_data=None).encode()
    assert decode_assignment(b"\x00\x07" + assignment[2:] + b"xyz") == KafkaAssignment()


@pytest.mark.parametrize("version", [1, 3, 4, 9])
def test_a_higher_version_over_version_0s_layout_reads(version):
    """Clients write version 4 (an aiokafka-based framework) or 1 (KafkaJS's
    custom assigners) over version 0's fields: topics and user data read,
    the later fields at their defaults."""
    data = version.to_bytes(2, "big") + _ks(0)[2:]
    assert decode_subscription(data) == KafkaSubscription(("b", "a"), b"ud")
    assert decode_subscription(data[:-6]) == KafkaSubscription(("b", "a"))  # no user data
    assert decode_subscription(data + b"\xff\xff\xff").topics == ("b", "a")  # unreadable tail


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xff" + b"\x00" * 8,
                                  b"\x00\x00\x00\x00\x00\x05\x00\x01a"])
def test_malformed_kafka_bytes_are_read_as_empty_values_never_refused(data):
    with pytest.raises(KafkaDecodeError):
        decode_subscription(data)
    assert Subscription.decode(subscription_to_ours(data)) == Subscription(())
    assert assignment_to_ours(data) == b""  # no partitions


def test_bytes_reach_a_reader_of_their_own_encoding_as_written():
    odd = b"\x00\x07anything at all"
    for kind in (SUBSCRIPTION, ASSIGNMENT):
        assert for_reader(kind, odd, True, True) is odd
        assert for_reader(kind, b"\x80", False, False) == b"\x80"
    assert KS.decode(for_reader(SUBSCRIPTION, Subscription(("x",)).encode(), False, True)
                     ).topics == ["x"]


def test_our_encoders_are_read_by_kafka_python():
    sub = KafkaSubscription(("t",), None, (("t", 0), ("t", 2), ("u", 1)), 4, None)
    back = KS.decode(encode_subscription(sub))
    assert back.version == 2 and back.topics == ["t"] and back.user_data is None
    assert [(tp.topic, tp.partitions) for tp in back.owned_partitions] == [("t", [0, 2]),
                                                                           ("u", [1])]
    assert back.generation_id == 4
    a = KA.decode(encode_assignment(KafkaAssignment((("t", 3), ("u", 0)), b"x")))
    assert [(tp.topic, tp.partitions) for tp in a.assigned_partitions] == [("t", [3]), ("u", [0])]
    assert a.user_data == b"x"


def test_a_kafka_subscription_round_trips_through_ours_and_reads_as_ours():
    ours = subscription_to_ours(_ks(3))
    sub = Subscription.decode(ours)  # our client reads it (the Kafka-only keys ignored)
    assert sub == Subscription(("a", "b"), (("a", 0), ("a", 1)), 7)
    back = KS.decode(subscription_to_kafka(ours))
    assert (back.version, sorted(back.topics), back.user_data, back.rack_id) == (3, ["a", "b"],
                                                                                 b"ud", "r1")
    assert [(tp.topic, tp.partitions) for tp in back.owned_partitions] == [("a", [0, 1])]


def test_our_subscription_goes_to_a_kafka_leader_as_v1_without_user_data():
    ours = Subscription(("x", "y"), (("x", 2),)).encode()
    back = KS.decode(subscription_to_kafka(ours))
    assert (back.version, back.topics, back.user_data) == (1, ["x", "y"], None)
    assert [(tp.topic, tp.partitions) for tp in back.owned_partitions] == [("x", [2])]


def test_assignments_both_ways():
    kafka = KA(version=0, assigned_partitions=[KA.TopicPartition(topic="t", partitions=[2, 0])],
               user_data=b"sticky").encode()
    ours = assignment_to_ours(kafka)
    assert Assignment.decode(ours) == Assignment((("t", 0), ("t", 2)))
    again = KA.decode(assignment_to_kafka(ours))
    assert [(tp.topic, tp.partitions) for tp in again.assigned_partitions] == [("t", [0, 2])]
    assert again.user_data == b"sticky"
    plain = KA.decode(assignment_to_kafka(Assignment((("u", 1),)).encode()))
    assert [(tp.topic, tp.partitions) for tp in plain.assigned_partitions] == [("u", [1])]
    assert plain.user_data is None


def test_bytes_of_ours_that_do_not_parse_go_to_kafka_as_empty_values():
    for bad in (b"\xc1", msgpack.packb([1, 2]), msgpack.packb({"v": 0, "topics": ["bad/name"]})):
        assert KS.decode(subscription_to_kafka(bad)).topics == []
        assert KA.decode(assignment_to_kafka(bad)).assigned_partitions == []
    assert subscription_to_kafka(b"") == b"" and assignment_to_kafka(b"") == b""


def test_a_kafka_topic_name_our_rules_refuse_makes_an_empty_subscription_of_ours():
    assert Subscription.decode(subscription_to_ours(_ks(0, topics=["no spaces allowed"]))
                               ) == Subscription(())


def test_the_topics_a_mixed_group_subscribes_to():
    ours = Subscription(("x", "y")).encode()
    assert subscribed_topics([(_ks(0), True), (ours, False)]) == {"a", "b", "x", "y"}
    assert subscribed_topics([]) == frozenset()
    assert subscribed_topics([(ours, False), (b"", True)]) is None  # not known: every topic
    assert subscribed_topics([(b"\x00\x00\xff", True)]) is None
    big = encode_subscription(KafkaSubscription(tuple(f"t{i:06d}" for i in range(
        SUBSCRIBED_BUDGET // 9))))
    assert len(big) > SUBSCRIBED_BUDGET and subscribed_topics([(big, True)]) is None  # bounded


@given(st.binary(max_size=64))
@settings(max_examples=300, deadline=None)
def test_any_bytes_translate_without_raising(data):
    """A peer's bytes never raise out of the translation (the group's
    requests are never refused for them); the readers raise only their
    decode error."""
    for fn in (subscription_to_ours, assignment_to_ours, subscription_to_kafka,
               assignment_to_kafka):
        assert isinstance(fn(data), bytes)
    for fn in (decode_subscription, decode_assignment):
        try:
            fn(data)
        except KafkaDecodeError:
            pass
