"""Admin client end to end: topics, groups, offsets without a live consumer."""

from __future__ import annotations

import pytest

from logbroker import Admin, NewTopic, Producer
from logbroker.client import OffsetAndTimestamp, PartitionInfo
from logbroker.errors import (GroupNotFoundError, InvalidConfigError, InvalidGroupError,
                              InvalidRequestError, InvalidTopicError, TopicAlreadyExistsError,
                              UnknownTopicOrPartitionError)
from tests.support.fixtures import FAST


def test_topic_lifecycle(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        assert a.list_topics() == {}
        assert a.create_topics(["one", NewTopic("two", 2), ("three", 3, {"retention_ms": 1000})]) \
            == {"one": None, "two": None, "three": None}
        assert a.list_topics() == {"one": 1, "two": 2, "three": 3}
        desc = a.describe_topics(["three"])["three"]
        assert desc.configs["retention_ms"] == 1000 and desc.configs["partitions"] == 3
        assert desc.partitions[2] == PartitionInfo(2, 0, 0, 0, 0, desc.partitions[2].segments,
                                                   leader=0, replicas=(0,), isr=(0,))
        assert set(a.describe_topics()) == {"one", "two", "three"}
        results = a.create_topics(["one", "bad name!", ("cfg", 1, {"nope": 1})],
                                  raise_errors=False)
        assert isinstance(results["one"], TopicAlreadyExistsError)
        assert isinstance(results["bad name!"], InvalidTopicError)
        assert isinstance(results["cfg"], InvalidConfigError)
        with pytest.raises(TopicAlreadyExistsError, match="one"):
            a.create_topic("one")
        assert a.create_topic("one", exist_ok=True) is False
        with pytest.raises(InvalidConfigError, match="partitions"):
            a.create_topic("zero", partitions=0)
        assert a.delete_topics(["two"]) == {"two": None}
        with pytest.raises(UnknownTopicOrPartitionError):
            a.delete_topics(["two"])
        with pytest.raises(UnknownTopicOrPartitionError):
            a.describe_topics(["two"])
        assert set(a.list_topics()) == {"one", "three"}
        cluster = a.describe_cluster()
        assert cluster.brokers[0].port == broker.port and cluster.brokers[0].live
        assert cluster.server.startswith("logbroker")


def test_list_offsets_earliest_latest_and_by_timestamp(broker):
    with Producer(broker.bootstrap, **FAST) as p:
        for i in range(10):
            p.send("lo", b"%d" % i, timestamp_ms=5_000 + i * 100)
    with Admin(broker.bootstrap, **FAST) as a:
        assert a.list_offsets("lo") == {("lo", 0): OffsetAndTimestamp(10, -1)}
        assert a.list_offsets([("lo", 0)], "earliest") == {("lo", 0): OffsetAndTimestamp(0, -1)}
        assert a.list_offsets({("lo", 0): 5_250}) == {("lo", 0): OffsetAndTimestamp(3, 5_300)}
        assert a.list_offsets("lo", 99_999)[("lo", 0)].offset == -1
        with pytest.raises(InvalidRequestError, match="middle"):
            a.list_offsets("lo", "middle")
        with pytest.raises(UnknownTopicOrPartitionError, match=r"lo\[7\]"):
            a.list_offsets([("lo", 7)])


def test_group_offsets_without_a_live_consumer(broker):
    with Producer(broker.bootstrap, **FAST) as p:
        for i in range(8):
            p.send("go", b"%d" % i)
    with Admin(broker.bootstrap, **FAST) as a:
        assert a.list_groups() == []
        a.commit_offsets("g", {("go", 0): (5, "by admin")})
        got = a.fetch_offsets("g")
        assert got[("go", 0)][:2] == (5, "by admin") and got[("go", 0)].commit_ms > 0
        assert a.fetch_offsets("g", [("go", 0)])[("go", 0)].offset == 5
        assert a.fetch_offsets("other", [("go", 0)]) == {("go", 0): None}
        assert a.list_groups() == ["g"]
        [part] = a.describe_groups(["g"])["g"].partitions
        assert (part.topic, part.partition, part.committed, part.log_end, part.lag) == \
            ("go", 0, 5, 8, 3)
        with pytest.raises(GroupNotFoundError, match="nobody"):
            a.describe_groups(["nobody"])
        with pytest.raises(UnknownTopicOrPartitionError):
            a.commit_offsets("g", {("missing", 0): 1})
        assert a.delete_groups(["g"]) == {"g": None}
        with pytest.raises(InvalidGroupError):
            a.delete_groups(["g"])
        assert a.list_groups() == []
