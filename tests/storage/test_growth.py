"""Adding partitions to a single node's topic (storage/growth.py): invisible
until published, the existing partitions untouched, refused as Kafka
refuses, rolled back after a crash, and never published over a topic
deleted meanwhile."""

from __future__ import annotations

import pytest

from logbroker.errors import InvalidPartitionsError, UnknownTopicOrPartitionError
from tests.support.fixtures import batch, crash, open_store, values_of


def test_new_partitions_appear_at_once_and_the_old_keep_their_data(tmp_path):
    s = open_store(tmp_path)
    try:
        s.create_topic("t", 2, retention_ms=60_000)
        s.get_log("t", 1).append(batch([b"a", b"b"]))
        grown = s.begin_growth("t", 5)
        assert list(grown.added) == [2, 3, 4]
        with pytest.raises(InvalidPartitionsError, match="already"):
            s.begin_growth("t", 6)  # one growth of a topic at a time
        grown.add(range(2, 4))
        grown.add(range(4, 5))
        assert s.topics.get("t").partitions == 2 and not s.hosts("t", 2)
        assert s.add_partitions(grown).partitions == 5
        assert s.topics.get("t").overrides == {"retention_ms": 60_000}
        assert [s.hosts("t", p) for p in range(5)] == [True] * 5
        assert values_of(s.get_log("t", 1)) == [b"a", b"b"]
        assert s.get_log("t", 4).config.retention_ms == 60_000
        for count in (5, 3):
            with pytest.raises(InvalidPartitionsError, match="must be larger"):
                s.begin_growth("t", count)
        with pytest.raises(UnknownTopicOrPartitionError):
            s.begin_growth("missing", 3)
    finally:
        s.close()
    s = open_store(tmp_path)  # the new count is durable
    try:
        assert s.topics.get("t").partitions == 5 and s.hosts("t", 4)
    finally:
        s.close()


def test_a_crash_mid_growth_rolls_the_new_partitions_back(tmp_path):
    s = open_store(tmp_path)
    s.create_topic("t", 1)
    s.get_log("t", 0).append(batch([b"kept"]))
    s.get_log("t", 0).flush()
    s.get_log("t", 0).checkpoint()
    grown = s.begin_growth("t", 40)
    grown.add(range(1, 20))
    crash(s)
    s = open_store(tmp_path)
    try:
        assert s.topics.get("t").partitions == 1 and not list(tmp_path.glob("t-1*"))
        assert values_of(s.get_log("t", 0)) == [b"kept"]
        again = s.begin_growth("t", 3)  # the marker is gone: it may grow again
        again.add(again.added)
        s.add_partitions(again)
        assert s.topics.get("t").partitions == 3
    finally:
        s.close()


def test_a_topic_deleted_while_growing_is_not_brought_back(tmp_path):
    s = open_store(tmp_path)
    try:
        s.create_topic("t", 1)
        grown = s.begin_growth("t", 3)
        grown.add(grown.added)
        s.delete_topic("t")
        with pytest.raises(UnknownTopicOrPartitionError, match="deleted or changed"):
            s.add_partitions(grown)
        grown.abandon()
        assert s.topics.get("t") is None and not list(tmp_path.glob("t-*"))
    finally:
        s.close()
