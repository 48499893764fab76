"""Data dir: topics, group offsets, clean marker, exclusive lock, config errors."""

from __future__ import annotations

import pytest

from tests.support.fixtures import batch, crash, open_store, values_of
from logbroker.storage.config import LogConfig
from logbroker.errors import (InvalidConfigError, InvalidTopicError, StorageError,
                              TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from logbroker.storage.groups import CommittedOffset


def test_topics_create_list_delete_and_overrides(tmp_path):
    s = open_store(tmp_path)
    s.create_topic("orders", 3, segment_bytes=4096, retention_ms=1000)
    with pytest.raises(TopicAlreadyExistsError):
        s.create_topic("orders")
    with pytest.raises(InvalidTopicError):
        s.create_topic("bad/name")
    with pytest.raises(InvalidConfigError):
        s.create_topic("x", 1, no_such_setting=1)
    assert s.get_log("orders", 2).config.segment_bytes == 4096
    s.get_log("orders", 1).append([batch([b"o"])])
    s.close()
    s = open_store(tmp_path)
    assert [t.name for t in s.topics.list()] == ["orders"]
    assert s.get_log("orders", 2).config.retention_ms == 1000
    assert values_of(s.get_log("orders", 1)) == [b"o"]
    s.delete_topic("orders")
    with pytest.raises(UnknownTopicOrPartitionError):
        s.get_log("orders", 0)
    assert not (tmp_path / "orders-0").exists()
    s.create_topic("orders")  # a new topic of the same name starts empty
    assert s.get_log("orders", 0).log_end_offset == 0
    s.close()


def test_group_offsets_are_durable_and_listed(tmp_path):
    s = open_store(tmp_path)
    s.groups.commit("g1", {("t", 0): 5, ("t", 1): CommittedOffset(7, "meta")})
    s.groups.commit("g2", {("u", 0): 1})
    s.groups.commit("g1", {("t", 0): 6})
    crash(s)  # commits survive a crash: each one is a synced transaction
    s = open_store(tmp_path)
    got = s.groups.fetch("g1")
    assert {k: v.offset for k, v in got.items()} == {("t", 0): 6, ("t", 1): 7}
    assert got[("t", 1)].metadata == "meta" and got[("t", 1)].commit_ms > 0
    assert s.groups.fetch("g1", "u") == {}
    assert s.groups.groups() == ["g1", "g2"]
    assert s.groups.delete("g1") == 2
    assert s.groups.groups() == ["g2"]
    s.close()


def test_clean_marker_only_after_clean_close(tmp_path):
    s = open_store(tmp_path)
    assert not s.was_clean
    s.close()
    assert (tmp_path / ".clean_shutdown").exists()
    s = open_store(tmp_path)
    assert s.was_clean and not (tmp_path / ".clean_shutdown").exists()
    crash(s)
    s = open_store(tmp_path)
    assert not s.was_clean
    s.close()


def test_a_data_dir_is_opened_by_one_process_at_a_time(tmp_path):
    s = open_store(tmp_path)
    with pytest.raises(StorageError, match="in use"):
        open_store(tmp_path)
    s.close()
    open_store(tmp_path).close()


def test_log_config_validation():
    with pytest.raises(InvalidConfigError):
        LogConfig(flush="sometimes")
    with pytest.raises(InvalidConfigError):
        LogConfig(segment_bytes=10)
    with pytest.raises(InvalidConfigError):
        LogConfig(retention_ms=-5)
    assert LogConfig.from_dict({"flush": "lazy"}).flush == "lazy"
    with pytest.raises(InvalidConfigError):
        LogConfig.from_dict({"nope": 1})


def test_a_lost_partition_directory_comes_back_at_open(tmp_path):
    """New partitions' directories are not fsynced one by one (a slice of
    them costs two LMDB commits): after a power cut loses one, LMDB's record
    brings it back, empty if it was, offline if its checkpoint says it held
    flushed data (a real power cut cannot lose that one: a segment's first
    flush syncs its directory)."""
    import shutil

    s = open_store(tmp_path)
    s.create_topic("t", 4)
    s.get_log("t", 1).append([batch([b"kept"])])
    s.get_log("t", 1).flush()
    s.get_log("t", 1).checkpoint()
    crash(s)
    shutil.rmtree(tmp_path / "t-2")  # empty: as if never synced
    shutil.rmtree(tmp_path / "t-1")  # held flushed data
    s = open_store(tmp_path)
    try:
        assert s.get_log("t", 2).log_end_offset == 0 and s.get_log("t", 2).offline is None
        assert s.get_log("t", 1).offline is not None  # not silently empty
        assert (tmp_path / "t-2").is_dir()
    finally:
        s.close()


def test_creation_in_slices_is_invisible_until_finished_and_rolled_back_after_a_crash(tmp_path):
    s = open_store(tmp_path)
    made = s.begin_topic("big", 600, {})
    made.add(range(0, 300))
    assert s.topics.get("big") is None and s.partition_count() == 0
    with pytest.raises(UnknownTopicOrPartitionError):
        s.get_log("big", 0)
    with pytest.raises(TopicAlreadyExistsError):
        s.create_topic("big")
    assert s.files.open_count() == 0  # empty partitions hold no descriptor
    crash(s)
    s = open_store(tmp_path)
    try:
        assert s.topics.get("big") is None and not list(tmp_path.glob("big-*"))
        s.create_topic("big", 600)
        assert s.partition_count() == 600 and s.files.open_count() == 0
    finally:
        s.close()


def test_an_untouched_log_is_not_checkpointed_again_at_open_or_close(tmp_path):
    """A clean restart writes no checkpoint for a log it did not change, at
    open nor at the next clean close (50,000 idle partitions restart and
    stop without 50,000 rewrites); a log appended to is checkpointed at
    close and reopens clean with what was written."""
    s = open_store(tmp_path)
    s.create_topic("idle", 20)
    s.create_topic("busy", 1)
    s.get_log("busy", 0).append([batch([b"a"])])
    s.close()

    def commits() -> int:
        return s.meta.env.info()["last_txnid"]

    s = open_store(tmp_path)
    assert s.was_clean
    opened = commits()
    s.close()
    s = open_store(tmp_path)
    assert s.was_clean and commits() == opened, "a checkpoint was rewritten for unchanged logs"
    assert values_of(s.get_log("busy", 0)) == [b"a"]
    s.get_log("busy", 0).append([batch([b"b"])])
    s.close()
    s = open_store(tmp_path)
    assert s.was_clean and commits() == opened + 1  # one transaction: the changed log's slice
    assert values_of(s.get_log("busy", 0)) == [b"a", b"b"]
    s.get_log("busy", 0).append([batch([b"c"])])
    crash(s)
    s = open_store(tmp_path)
    assert not s.was_clean and values_of(s.get_log("busy", 0)) == [b"a", b"b", b"c"]
    s.close()
