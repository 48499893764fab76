"""Retention by time and size; age rolls; readers survive deletions."""

from __future__ import annotations

import os

from tests.support.fixtures import batch, open_store, values_of
from logbroker.storage.retention import apply_retention

DAY = 24 * 3600 * 1000


def test_time_retention_deletes_old_sealed_segments_only(store_factory):
    s = store_factory(segment_bytes=400, retention_ms=DAY, file_delete_delay_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(30):  # old records, then new ones
        log.append([batch([b"old%d" % i] * 3, ts=1_000)], now=10 * DAY)
    for i in range(5):
        log.append([batch([b"new%d" % i] * 3, ts=10 * DAY)], now=10 * DAY)
    before = len(log.segments)
    deleted = apply_retention(log, now=10 * DAY + 1)
    assert deleted and len(log.segments) == before - len(deleted)
    assert all(seg.max_timestamp < 10 * DAY - DAY for seg in deleted)
    assert log.log_start_offset == log.segments[0].base_offset
    assert values_of(log)[-15:] == [b"new%d" % i for i in range(5) for _ in range(3)]
    assert all(seg.path.endswith(".deleted") for seg in deleted)
    assert log.purge_deleted(now=10 * DAY + 1) == len(deleted)
    assert not any(os.path.exists(seg.path) for seg in deleted)


def test_size_retention_keeps_at_least_the_limit(store_factory):
    s = store_factory(segment_bytes=500, retention_bytes=2000, retention_ms=-1)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(60):
        log.append([batch([b"s%03d" % i] * 3)])
    apply_retention(log, now=0)
    total = log.size_in_bytes()
    assert 2000 <= total <= 2000 + 500
    assert values_of(log)[-1] == b"s059"


def test_active_segment_is_never_deleted_but_rolls_on_age(store_factory):
    s = store_factory(segment_ms=1000, retention_ms=1000, file_delete_delay_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"a", b"b"], ts=0)], now=0)
    assert apply_retention(log, now=500) == []
    deleted = apply_retention(log, now=5000)  # rolls the aged active, then deletes it
    assert len(deleted) == 1 and len(log.segments) == 1
    assert log.active.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)
    assert log.append([batch([b"c"])]).first_offset == 2


def test_retention_never_passes_the_high_watermark(store_factory):
    s = store_factory(segment_bytes=300, retention_bytes=0, retention_ms=-1)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.auto_hw = False
    log.set_high_watermark(0)
    for i in range(20):
        log.append([batch([b"h%d" % i] * 3)])
    log.set_high_watermark(9)
    apply_retention(log, now=0)
    assert log.log_start_offset <= 9
    assert values_of(log, 9)[0] == b"h3"


def test_reader_holding_a_segment_survives_its_deletion(store_factory):
    s = store_factory(segment_bytes=300, retention_bytes=0, retention_ms=-1, file_delete_delay_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(20):
        log.append([batch([b"r%d" % i] * 3)])
    first = log.segments[0]
    with open(first.path, "rb") as fh:
        expected = fh.read()
    with s.files.fd(first, first.path) as fd:  # a read in flight
        apply_retention(log, now=0)
        log.purge_deleted(now=10**15)
        assert not os.path.exists(first.path)
        assert os.pread(fd, len(expected), 0) == expected


def test_store_tick_applies_retention_and_survives_reopen(tmp_path):
    s = open_store(tmp_path, segment_ms=1000, retention_ms=1000, file_delete_delay_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"x"] * 4, ts=0)], now=0)
    stats = s.tick(now=10_000)
    assert stats["deleted_segments"] == 1 and stats["errors"] == 0
    s.tick(now=10_001)
    s.close()
    s = open_store(tmp_path)
    log = s.get_log("t", 0)
    assert (log.log_start_offset, log.log_end_offset) == (4, 4)
    assert [p for p in os.listdir(tmp_path / "t-0") if p.endswith(".deleted")] == []
    s.close()


def test_an_altered_topic_applies_to_its_open_logs_and_survives_reopening(tmp_path):
    """Store.alter_topic (a single node's AlterConfigs, a cluster broker
    following etcd): the open log rolls at the new segment size and the
    next retention pass keeps the new byte limit; Kafka configs kept
    without effect are stored, never passed to the log; reopened, the
    store keeps the altered settings."""
    s = open_store(tmp_path / "d")
    s.create_topic("t", 1, retention_ms=-1)
    log = s.get_log("t", 0)
    for i in range(20):
        log.append([batch([b"a%02d" % i] * 3)])
    assert len(log.segments) == 1  # the default segment size: one segment
    s.alter_topic("t", {"retention_ms": -1, "segment_bytes": 300, "retention_bytes": 600,
                        "message_timestamp_type": "LogAppendTime"})
    for i in range(20):
        log.append([batch([b"b%02d" % i] * 3)])
    assert len(log.segments) > 3
    apply_retention(log, now=0)
    assert log.size_in_bytes() <= 600 + 300 and values_of(log)[-1] == b"b19"
    s.close()
    s = open_store(tmp_path / "d")
    assert s.topics.get("t").overrides["message_timestamp_type"] == "LogAppendTime"
    assert s.get_log("t", 0).config.retention_bytes == 600
    s.close()
