"""Bad values at the broker's edge (issue 9): every name, size and number of a
request gets a stable error code and a clear message before storage sees it,
and the broker goes on serving."""

from __future__ import annotations

import time

import pytest

from tests.support.fixtures import FAST, RawConn
from logbroker import Admin
from logbroker.client.admin.results import NewTopic
from logbroker.errors import (InvalidConfigError, InvalidGroupError, InvalidRequestError,
                              InvalidTopicError, UnknownTopicOrPartitionError)
from logbroker.limits import MAX_NAME_CHARS, TOPIC_CONFIGS
from logbroker.protocol import messages as m
from logbroker.records import build_batch
from logbroker.storage.config import LogConfig

BAD_TOPIC, BAD_REQUEST = InvalidTopicError.code, InvalidRequestError.code
BAD_GROUP, BAD_CONFIG = InvalidGroupError.code, InvalidConfigError.code
LONG = "g" * (MAX_NAME_CHARS + 300)
B = build_batch([b"v"])


def produce(topic="t", partition=0, **fields):
    return m.Produce(parts=((topic, partition, len(B)),), payload=(B,), **fields)


def fetch(offset=0, part_max=1 << 20, topic="t", partition=0, **fields):
    return m.Fetch(parts=((topic, partition, offset, part_max),), **{"max_wait_ms": 0, **fields})


def top(resp):
    return resp.error, resp.message


def first(field):
    def get(resp):
        entry = getattr(resp, field)[0]
        return next((entry[i], entry[i + 1]) for i in range(len(entry))
                    if type(entry[i]) is int and type(entry[i + 1]) is str and i > 0)
    return get


def groups_entry(resp):
    return resp.groups[0][1:3]


# (request, where its error is, code, a word of the message)
CASES = [
    (produce(""), first("parts"), BAD_TOPIC, "invalid topic name ''"),
    (produce("x" * 300), first("parts"), BAD_TOPIC, "invalid topic name"),
    (produce("a/b"), first("parts"), BAD_TOPIC, "[A-Za-z0-9._-]"),
    (produce("t\n"), first("parts"), BAD_TOPIC, "invalid topic name 't\\n'"),  # not "t" + end
    (produce(partition=-1), first("parts"), BAD_REQUEST, "partition -1"),
    (produce(partition=1 << 40), first("parts"), BAD_REQUEST, "partition"),
    (produce(partition=3), first("parts"), UnknownTopicOrPartitionError.code, "t-3"),
    (produce(acks=2), top, BAD_REQUEST, "acks"),
    (produce(timeout_ms=-1), top, BAD_REQUEST, "timeout_ms -1"),
    (produce(timeout_ms=1 << 40), top, BAD_REQUEST, "timeout_ms"),
    (fetch(max_wait_ms=-1), top, BAD_REQUEST, "max_wait_ms -1"),
    (fetch(max_wait_ms=1 << 40), top, BAD_REQUEST, "max_wait_ms"),
    (fetch(min_bytes=-1), top, BAD_REQUEST, "min_bytes"),
    (fetch(max_bytes=-1), top, BAD_REQUEST, "max_bytes -1"),
    (fetch(offset=-5), first("parts"), BAD_REQUEST, "offset -5"),
    (fetch(part_max=-1), first("parts"), BAD_REQUEST, "max_bytes -1"),
    (fetch(topic=""), first("parts"), BAD_TOPIC, "invalid topic name"),
    (m.ListOffsets(parts=(("t", 0, -3),)), first("parts"), BAD_REQUEST, "offset spec"),
    (m.ListOffsets(parts=(("t", 0, 1 << 62),)), first("parts"), BAD_REQUEST, "offset spec"),
    (m.ListOffsets(parts=(("", 0, -1),)), first("parts"), BAD_TOPIC, "invalid topic name"),
    (m.CommitOffsets(group="", offsets=(("t", 0, 0, ""),)), top, BAD_GROUP, "invalid group name"),
    (m.CommitOffsets(group=LONG, offsets=(("t", 0, 0, ""),)), top, BAD_GROUP, "1-249"),
    (m.CommitOffsets(group="a\x00b", offsets=(("t", 0, 0, ""),)), top, BAD_GROUP, "printable"),
    # any int64 is a committed offset (-1 / -2 too, as Kafka stores them); past int64 is not
    (m.CommitOffsets(group="g", offsets=(("t", 0, 1 << 63, ""),)), top, BAD_REQUEST,
     "expected an integer"),
    (m.CommitOffsets(group="g", offsets=(("t", 0, 0, "m" * 5000),)), first("parts"), BAD_REQUEST,
     "metadata of 5000"),
    (m.CommitOffsets(group="g", offsets=(("", 0, 0, ""),)), first("parts"), BAD_TOPIC, "topic"),
    (m.FetchOffsets(group=LONG), top, BAD_GROUP, "invalid group name"),
    (m.FetchOffsets(group="g", parts=(("", 0),)), top, BAD_TOPIC, "invalid topic name"),
    (m.DescribeGroups(groups=(LONG,)), groups_entry, BAD_GROUP, "invalid group name"),
    (m.DeleteGroups(groups=("",)), first("groups"), BAD_GROUP, "invalid group name"),
    (m.CreateTopics(topics=(("", 1, {}),)), first("topics"), BAD_TOPIC, "invalid topic name"),
    (m.CreateTopics(topics=(("n\n", 1, {}),)), first("topics"), BAD_TOPIC, "invalid topic name"),
    (m.CreateTopics(topics=(("n", 0, {}),)), first("topics"), BAD_CONFIG, "partitions must be"),
    (m.CreateTopics(topics=(("n", 1 << 40, {}),)), first("topics"), BAD_CONFIG, "partitions"),
    (m.CreateTopics(topics=(("n", 1, {"segment_bytes": True}),)), first("topics"), BAD_CONFIG,
     "segment_bytes must be an integer"),
    (m.CreateTopics(topics=(("n", 1, {"segment_bytes": 1 << 40}),)), first("topics"), BAD_CONFIG,
     "segment_bytes"),
    (m.CreateTopics(topics=(("n", 1, {"retention_ms": -5}),)), first("topics"), BAD_CONFIG,
     "retention_ms"),
    (m.CreateTopics(topics=(("n", 1, {"retention_ms": 1.5}),)), first("topics"), BAD_CONFIG,
     "retention_ms"),
    (m.CreateTopics(topics=(("n", 1, {"flush": "never"}),)), first("topics"), BAD_CONFIG, "flush"),
    (m.CreateTopics(topics=(("n", 1, {"nonsense": 1}),)), first("topics"), BAD_CONFIG, "nonsense"),
    (m.DeleteTopics(topics=("",)), first("topics"), BAD_TOPIC, "invalid topic name"),
    (m.Metadata(topics=("",), auto_create=True), first("topics"), BAD_TOPIC, "invalid topic name"),
    (m.DescribeTopics(topics=("..",)), first("topics"), BAD_TOPIC, "invalid topic name"),
]


def test_every_bad_value_gets_its_code_and_the_broker_serves_on(broker):
    c = RawConn(broker.port)
    assert c.call(produce()).parts[0][2] == 0
    wrong = []
    for req, where, code, words in CASES:
        started = time.monotonic()
        resp = c.call(req, timeout=15)
        try:
            got = where(resp)
        except (IndexError, StopIteration):
            got = (resp.error, resp.message)
        if got[0] != code or words not in got[1] or "\n" in got[1] \
                or time.monotonic() - started > 2:
            wrong.append((type(req).__name__, code, got, round(time.monotonic() - started, 1)))
    assert not wrong, "\n".join(map(str, wrong))
    assert c.call(m.ListGroups()).groups == ()  # nothing half-committed
    assert {t[0] for t in c.call(m.Metadata()).topics} == {"t"}  # nothing created
    assert c.call(fetch()).parts[0][2:4] == (0, "")  # still serving
    assert "Traceback" not in broker.log() and "internal error" not in broker.log()


def test_topic_config_rules_cover_every_log_setting():
    """Our log settings, the cluster's, and Kafka's topic configs kept
    without effect (kafka/topic_configs.py): every one has a rule."""
    from logbroker.cluster.state import CLUSTER_CONFIGS
    from logbroker.kafka.topic_configs import KAFKA, NO_EFFECT

    kept = {KAFKA[name][0] for name in NO_EFFECT}
    assert set(TOPIC_CONFIGS) == set(LogConfig().to_dict()) | set(CLUSTER_CONFIGS) | kept


def test_the_client_gets_the_code_and_message(broker):
    with Admin(bootstrap=broker.bootstrap, **FAST) as admin:
        with pytest.raises(InvalidConfigError, match="segment_bytes must be an integer in 128.."):
            admin.create_topics([NewTopic("n", 1, {"segment_bytes": 1 << 40})])
        with pytest.raises(InvalidConfigError, match="flush must be one of fsync, lazy"):
            admin.create_topics([NewTopic("n", 1, {"flush": "never"})])
        started = time.monotonic()
        with pytest.raises(InvalidGroupError, match="invalid group name"):
            admin.commit_offsets(LONG, {("t", 0): 0})
        assert time.monotonic() - started < 3
        admin.create_topics([NewTopic("n", 1, {"segment_bytes": 4096})])
        assert admin.describe_topics(["n"])["n"].configs["segment_bytes"] == 4096


def test_a_trailing_newline_makes_no_name_valid_and_valid_names_stay_valid():
    """Names are checked whole: ``$`` would also match before a final
    newline ("t\\n" passed as a topic, "bob\\n" as a user). A name found
    valid once is remembered (a request names its topic once per part),
    in a bounded set: 10,000 distinct names later the set holds at most
    4,096 and every one is still judged the same."""
    from logbroker import limits
    from logbroker.protocol.auth_messages import check_user_name

    for bad in ("t\n", "t\r\n", "\n", "t\nu"):
        with pytest.raises(InvalidTopicError):
            limits.check_topic_name(bad)
    with pytest.raises(InvalidRequestError, match="invalid user name"):
        check_user_name("bob\n")
    assert check_user_name("bob") == "bob"
    for i in range(10_000):
        assert limits.check_topic_name(f"topic-{i}") == f"topic-{i}"
        assert len(limits._VALID_TOPICS) <= limits._VALID_MAX
    assert limits.check_topic_name("topic-3") == "topic-3"
    for bad in ("topic-3\n", "..", "a/b", 3, None):
        with pytest.raises(InvalidTopicError):
            limits.check_topic_name(bad)
