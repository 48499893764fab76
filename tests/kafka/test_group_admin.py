"""Kafka's group administration APIs on the Kafka listener (docs/kafka.md
§4.5): ListGroups (v0-2), DescribeGroups (v0-4) and DeleteGroups (v0-1)
answered through our coordinator, against one broker process for the
module. A group holding a kafka-python member and our Consumer is listed
and described (both members, their subscriptions and assignments in
Kafka's ConsumerProtocol encoding) by kafka-python's KafkaAdminClient,
confluent-kafka's AdminClient and aiokafka's AIOKafkaAdminClient; deleting
it is refused (NON_EMPTY_GROUP) while it has members; an empty group is
deleted and its offsets are gone for our Admin and ``logbroker groups``;
an unknown group is Kafka's Dead group to describe and GROUP_ID_NOT_FOUND
to delete. Raw frames of every version, golden bytes and kafka-python's
encoders check the codec. Every wait is bounded."""

from __future__ import annotations

import asyncio
import json
import logging
import random

import pytest

from tests.support.fixtures import invoke_cli, invoked_ok
from tests.support.kafka_adapters import protocol_failures
from tests.support.kafka_members import kafka_member, our_member, split, until
from tests.support.kafka_raw import WAIT, Raw, kafka_broker
from logbroker import Admin, Consumer
from logbroker.kafka.codec import (RequestHeader, ResponseHeader, decode_request,
                                   decode_response, encode_request, encode_response)
from logbroker.kafka.consumer_protocol import (KafkaAssignment, KafkaSubscription,
                                               decode_assignment, decode_subscription,
                                               encode_assignment, encode_subscription)
from logbroker.kafka.serve_group_admin import kafka_host

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402

DESCRIBE, LIST, DELETE = 15, 16, 42
OMITTED = -(1 << 31)
FAST = {"heartbeat_interval_ms": 100, "session_timeout_ms": 3000, "max_poll_interval_ms": 6000}
MIXED, MIXED_TOPIC = "ga-mixed", "ga-mixed2"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """(BrokerProcess, Kafka bootstrap); groups settle fast (initial delay 100 ms)."""
    with kafka_broker(tmp_path_factory.mktemp("kafka-group-admin") / "data",
                      config={"group_initial_rebalance_delay_ms": 100}) as got:
        yield got


@pytest.fixture(scope="module")
def mixed(kb):
    """Group ``ga-mixed`` (range) of our Consumer and a kafka-python member,
    each owning one partition of ``ga-mixed2``; both leave at the end."""
    b, bootstrap = kb
    with Admin(b.bootstrap) as admin:
        admin.create_topic(MIXED_TOPIC, 2)
    ours = our_member(Consumer(b.bootstrap, group=MIXED, auto_offset_reset="earliest",
                               partition_assignment_strategy=["range"],
                               enable_auto_commit=False, **FAST), MIXED_TOPIC)
    theirs = kafka_member(KafkaConsumer(MIXED_TOPIC, bootstrap_servers=bootstrap, group_id=MIXED,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        **FAST))
    ours.start()
    until(lambda: ours.owned == {0, 1}, "our member's assignment")
    theirs.start()
    until(lambda: split(ours, theirs), "a split")
    try:
        yield ours, theirs
    finally:
        ours.stop(commit=False)
        theirs.stop(commit=False)


def _stable(b) -> None:
    """Wait until the mixed group is Stable with both members assigned."""
    def settled():
        with Admin(b.bootstrap) as admin:
            d = admin.describe_groups([MIXED])[MIXED]
        return d.state == "Stable" and sorted(len(mb.partitions) for mb in d.members) == [1, 1]
    until(settled, "a stable mixed group")


def _empty_group(b, group: str, topic: str) -> None:
    """A group that only has committed offsets (our Admin commits them)."""
    with Admin(b.bootstrap) as admin:
        if topic not in admin.list_topics():
            admin.create_topic(topic, 1)
        admin.commit_offsets(group, {(topic, 0): 0})


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list = []

    def emit(self, record) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def ck(kb):
    """A confluent-kafka AdminClient with ``debug=protocol`` (held while its
    futures run); at the end its log shows no buffer underflow or parse
    failure (``ck.lines``)."""
    ck_admin = pytest.importorskip("confluent_kafka.admin")
    lines = _Lines()
    logger = logging.getLogger(f"test.rdkafka.group-admin.{id(lines)}")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(lines)
    admin = ck_admin.AdminClient({"bootstrap.servers": kb[1], "debug": "protocol"},
                                 logger=logger)
    admin.lines = lines.lines
    yield admin
    admin.poll(0)  # delivers the log lines
    logger.removeHandler(lines)
    assert lines.lines and not protocol_failures(lines.lines)


def _cli_groups(b) -> list:
    return json.loads(invoked_ok(invoke_cli(["groups", "list", "--json"],
                                            bootstrap=b.bootstrap)))


# -- the mixed group, through three admin clients ----------------------------------------------
def test_kafka_python_lists_and_describes_a_mixed_group(kb, mixed):
    b, bootstrap = kb
    _stable(b)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listed = {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
        described = admin.describe_groups([MIXED])[MIXED]
    finally:
        admin.close()
    assert listed[MIXED] == "consumer"
    assert (described["error"], described["group_state"], described["protocol_type"],
            described["protocol_data"]) == (None, "Stable", "consumer", "range")
    members = described["members"]
    assert sorted(mb["client_id"].split("-")[0] for mb in members) == ["kafka", "logbroker"]
    assert {mb["client_host"] for mb in members} == {"/127.0.0.1"}
    owned = []
    for mb in members:  # decoded by kafka-python's ConsumerProtocol classes
        assert mb["member_metadata"]["topics"] == [MIXED_TOPIC]
        (assigned,) = mb["member_assignment"]["assigned_partitions"]
        assert assigned["topic"] == MIXED_TOPIC
        owned += assigned["partitions"]
    assert sorted(owned) == [0, 1]


def test_confluent_kafka_lists_and_describes_a_mixed_group(kb, mixed, ck):
    from confluent_kafka import ConsumerGroupState

    b, bootstrap = kb
    _stable(b)
    listed = ck.list_consumer_groups(request_timeout=WAIT).result(WAIT)
    assert not listed.errors
    assert MIXED in {g.group_id for g in listed.valid}
    d = ck.describe_consumer_groups([MIXED], request_timeout=WAIT)[MIXED].result(WAIT)
    assert (d.group_id, d.state, d.partition_assignor, d.is_simple_consumer_group) == (
        MIXED, ConsumerGroupState.STABLE, "range", False)
    assert d.coordinator.id == 0 and f"{d.coordinator.host}:{d.coordinator.port}" == bootstrap
    assert sorted(mb.client_id.split("-")[0] for mb in d.members) == ["kafka", "logbroker"]
    assert {mb.host for mb in d.members} == {"/127.0.0.1"}
    parts = [(tp.topic, tp.partition) for mb in d.members for tp in mb.assignment.topic_partitions]
    assert sorted(parts) == [(MIXED_TOPIC, 0), (MIXED_TOPIC, 1)]
    ck.poll(0)
    assert any("Received ListGroupsResponse (v2" in line for line in ck.lines)
    assert any("Received DescribeGroupsResponse (v4" in line for line in ck.lines)


def test_aiokafka_lists_and_describes_a_mixed_group(kb, mixed):
    aio_admin = pytest.importorskip("aiokafka.admin")
    b, bootstrap = kb
    _stable(b)

    async def main():
        admin = aio_admin.AIOKafkaAdminClient(bootstrap_servers=bootstrap)
        await admin.start()
        try:
            return (await admin.list_consumer_groups(),
                    await admin.describe_consumer_groups([MIXED]))
        finally:
            await admin.close()
    listed, (response,) = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert (MIXED, "consumer") in [tuple(g) for g in listed]
    (group,) = response.groups  # raw: (error, id, state, type, data, members)
    assert group[:5] == (0, MIXED, "Stable", "consumer", "range")
    owned = []
    for _mid, _client, host, metadata, assignment in group[5]:
        assert host == "/127.0.0.1"
        assert decode_subscription(metadata).topics == (MIXED_TOPIC,)
        owned += [p for _t, p in decode_assignment(assignment).partitions]
    assert sorted(owned) == [0, 1]


def test_a_group_with_members_is_not_deleted(kb, mixed, ck):
    from confluent_kafka import KafkaError, KafkaException

    b, bootstrap = kb
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        assert admin.delete_groups([MIXED]) == {MIXED: "NonEmptyGroupError"}
    finally:
        admin.close()
    with pytest.raises(KafkaException) as info:
        ck.delete_consumer_groups([MIXED], request_timeout=WAIT)[MIXED].result(WAIT)
    assert info.value.args[0].code() == KafkaError.NON_EMPTY_GROUP
    assert MIXED in _cli_groups(b)  # still there, members and all
    with Admin(b.bootstrap) as admin:
        assert len(admin.describe_groups([MIXED])[MIXED].members) == 2


# -- deleting and unknown groups -----------------------------------------------------------------
@pytest.mark.parametrize("client", ["kafka-python", "confluent-kafka"])
def test_an_empty_group_is_deleted_with_its_offsets(kb, request, client):
    b, bootstrap = kb
    group = f"ga-empty-{client}"
    _empty_group(b, group, "ga-empty")
    assert group in _cli_groups(b)
    if client == "kafka-python":
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            assert admin.delete_groups([group]) == {group: "OK"}
        finally:
            admin.close()
    else:
        ck = request.getfixturevalue("ck")
        assert ck.delete_consumer_groups([group], request_timeout=WAIT)[group].result(WAIT) is None
    assert group not in _cli_groups(b)
    with Admin(b.bootstrap) as admin:
        assert admin.fetch_offsets(group) == {}


def test_an_unknown_group_is_dead_to_describe_and_not_found_to_delete(kb, ck):
    from confluent_kafka import ConsumerGroupState, KafkaError, KafkaException

    _, bootstrap = kb
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        d = admin.describe_groups(["ga-nope"])["ga-nope"]
        assert (d["error"], d["group_state"], d["protocol_type"], d["members"]) == (
            None, "Dead", "", [])
        assert admin.delete_groups(["ga-nope"]) == {"ga-nope": "GroupIdNotFoundError"}
    finally:
        admin.close()
    d = ck.describe_consumer_groups(["ga-nope"], request_timeout=WAIT)["ga-nope"].result(WAIT)
    assert (d.state, d.members) == (ConsumerGroupState.DEAD, [])
    with pytest.raises(KafkaException) as info:
        ck.delete_consumer_groups(["ga-nope"], request_timeout=WAIT)["ga-nope"].result(WAIT)
    assert info.value.args[0].code() == KafkaError.GROUP_ID_NOT_FOUND


# -- raw frames, every version -------------------------------------------------------------------
def _call(raw: Raw, api: int, version: int, body: dict, cid: int = 1):
    raw.sock.sendall(raw.send(api, version, cid, body))
    return raw.recv(api, version)[1]


def test_raw_requests_at_every_version(kb):
    b, bootstrap = kb
    _empty_group(b, "ga-raw", "ga-raw")
    raw = Raw(bootstrap)
    try:
        for v in range(3):
            got = _call(raw, LIST, v, {})
            assert got.error_code == 0 and got.throttle_time_ms == 0
            # a group with committed offsets only has no protocol type (Kafka lists it with "")
            assert ("ga-raw", "") in [(g.group_id, g.protocol_type) for g in got.groups]
        for v in range(5):
            got = _call(raw, DESCRIBE, v, {"groups": ["ga-raw", "ga-nope", ""],
                                           "include_authorized_operations": True})
            known, unknown, bad = got.groups
            assert (known.error_code, known.group_id, known.group_state, known.protocol_type,
                    known.protocol_data, known.members) == (0, "ga-raw", "Empty", "", "", ())
            assert (unknown.error_code, unknown.group_state, unknown.protocol_type) == (
                0, "Dead", "")
            assert (bad.error_code, bad.group_id) == (24, "")  # INVALID_GROUP_ID
            assert known.authorized_operations == OMITTED  # not provided (v3+; default before)
        for v in range(2):
            got = _call(raw, DELETE, v, {"groups_names": ["ga-nope", ""]})
            assert [(r.group_id, r.error_code) for r in got.results] == [("ga-nope", 69), ("", 24)]
        got = _call(raw, DELETE, 1, {"groups_names": ["ga-raw"]})
        assert [(r.group_id, r.error_code) for r in got.results] == [("ga-raw", 0)]
        assert "ga-raw" not in [g.group_id for g in _call(raw, LIST, 2, {}).groups]
        assert _call(raw, DESCRIBE, 4, {"groups": []}).groups == ()
    finally:
        raw.close()


def test_raw_describe_of_the_mixed_group_carries_kafka_member_bytes(kb, mixed):
    b, bootstrap = kb
    _stable(b)
    raw = Raw(bootstrap)
    try:
        v0 = _call(raw, DESCRIBE, 0, {"groups": [MIXED]}).groups[0]
        v4 = _call(raw, DESCRIBE, 4, {"groups": [MIXED]}).groups[0]
    finally:
        raw.close()
    assert v0.members == tuple(mb._replace(group_instance_id=None) for mb in v4.members)
    for mb in v4.members:
        sub = decode_subscription(mb.member_metadata)
        assert sub.topics == (MIXED_TOPIC,) and mb.group_instance_id is None
        assert len(decode_assignment(mb.member_assignment).partitions) == 1


# -- the codec: golden bytes and kafka-python's encoders ------------------------------------------
def test_every_version_is_in_the_codec_cases():
    """tests/kafka/test_codec.py's round trips and kafka-python comparisons, and
    tests/kafka/test_codec_fuzz.py's fuzz, run every version of the three."""
    from tests.support.kafka_cases import CASES

    assert sorted((api.key, v) for api, v in CASES if api.key in (DESCRIBE, LIST, DELETE)) == \
        [(DESCRIBE, v) for v in range(5)] + [(LIST, v) for v in range(3)] + [(DELETE, 0),
                                                                            (DELETE, 1)]


def test_golden_list_groups_v1_response_and_describe_groups_v0_request():
    wire = encode_response(ResponseHeader(9), LIST, 1, {"error_code": 0, "groups": [
        {"group_id": "g", "protocol_type": "consumer"}]})
    # size | correlation 9 | throttle 0, error 0, 1 group: "g", "consumer"
    assert wire == bytes.fromhex("0000001b" "00000009" "00000000" "0000" "00000001"
                                 "000167" "0008") + b"consumer"
    assert decode_response(wire[4:], LIST, 1)[1].groups[0].protocol_type == "consumer"
    req = encode_request(RequestHeader(DESCRIBE, 0, 3, None), {"groups": ["a", "bc"]})
    assert req == bytes.fromhex("00000015" "000f" "0000" "00000003" "ffff"
                                "00000002" "000161" "00026263")
    assert decode_request(req[4:])[1].groups == ("a", "bc")


def test_golden_delete_groups_v0_request_and_response():
    req = encode_request(RequestHeader(DELETE, 0, 4, "c"), {"groups_names": ["g"]})
    assert req == bytes.fromhex("00000012" "002a" "0000" "00000004" "000163" "00000001" "000167")
    wire = encode_response(ResponseHeader(4), DELETE, 0, {"results": [
        {"group_id": "g", "error_code": 68}]})
    assert wire == bytes.fromhex("00000011" "00000004" "00000000" "00000001" "000167" "0044")


def _member_body(rng: random.Random, version: int) -> dict:
    sub = KafkaSubscription((f"t{rng.randint(0, 9)}",), None, (("t1", 0),), rng.randint(-1, 9))
    return {"member_id": f"m-{rng.random()}", "client_id": "c", "client_host": "/127.0.0.1",
            "group_instance_id": rng.choice([None, "i"]) if version >= 4 else None,
            "member_metadata": encode_subscription(sub),
            "member_assignment": encode_assignment(KafkaAssignment((("t1", 0), ("t1", 3))))}


@pytest.mark.parametrize("version", range(5))
def test_describe_groups_response_is_kafka_pythons(version):
    from kafka.protocol.admin import DescribeGroupsResponse

    rng = random.Random(version)
    body = {"throttle_time_ms": 5, "groups": [
        {"error_code": 0, "group_id": "g", "group_state": "Stable", "protocol_type": "consumer",
         "protocol_data": "range", "members": [_member_body(rng, version) for _ in range(2)],
         "authorized_operations": OMITTED},
        {"error_code": 16, "group_id": "h", "group_state": "", "protocol_type": "",
         "protocol_data": "", "members": [], "authorized_operations": OMITTED}]}
    wire = encode_response(ResponseHeader(1), DESCRIBE, version, body)[8:]
    theirs = DescribeGroupsResponse.decode(wire, version=version)
    assert [g.group_id for g in theirs.groups] == ["g", "h"]
    assert [mb.member_id for mb in theirs.groups[0].members] == \
        [mb["member_id"] for mb in body["groups"][0]["members"]]
    theirs._header = None
    assert bytes(theirs.encode()) == wire


def test_kafka_host():
    assert [kafka_host(h) for h in ("127.0.0.1:5000", "::1:5000", "", "?", "somewhere")] == [
        "/127.0.0.1", "/::1", "", "", "/somewhere"]

