"""Partition log contracts: append, read, timestamps, roll, truncate, delete_before."""

from __future__ import annotations

import threading

import pytest

from tests.support.fixtures import batch, values_of
from logbroker.errors import (CorruptRecordError, InvalidRequestError, OffsetOutOfRangeError,
                              RecordTooLargeError)
from logbroker.records import decode_batch, scan_batches


def fill(log, n_batches: int, per_batch: int = 3, ts0: int = 1_000_000) -> list[bytes]:
    sent = []
    for i in range(n_batches):
        vals = [b"r%05d-%d" % (i, j) for j in range(per_batch)]
        log.append([batch(vals, ts=ts0 + i * 10)])
        sent += vals
    return sent


def test_append_assigns_contiguous_offsets_and_stamps_them(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    a = log.append([batch([b"a", b"b"]), batch([b"c"])], leader_epoch=3)
    b = log.append([batch([b"d"])], leader_epoch=3)
    assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 3)
    assert log.log_end_offset == 4 and log.high_watermark == 4
    headers = [h for _, h in scan_batches(log.read(0, 1 << 20))]
    assert [(h.base_offset, h.leader_epoch) for h in headers] == [(0, 3), (2, 3), (3, 3)]
    assert values_of(log) == [b"a", b"b", b"c", b"d"]


def test_append_rejects_bad_batches_and_writes_nothing(store_factory):
    s = store_factory(max_batch_bytes=200)
    s.create_topic("t")
    log = s.get_log("t", 0)
    good = batch([b"x"])
    bad = bytearray(good)
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append([good, bytes(bad)])
    with pytest.raises(CorruptRecordError):
        log.append([good + b"\0"])
    with pytest.raises(RecordTooLargeError):
        log.append([batch([b"y" * 300])])
    with pytest.raises(InvalidRequestError):
        log.append([])
    assert log.log_end_offset == 0 and log.active.size == 0


def test_read_contract_before_start_in_batch_end_past_end(store_factory):
    s = store_factory(segment_bytes=512)
    s.create_topic("t")
    log = s.get_log("t", 0)
    sent = fill(log, 40)
    assert len(log.segments) > 3
    end = log.log_end_offset
    assert log.read(end, 1000) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(end + 1, 1000)
    # inside a batch: the whole batch holding the offset comes first
    first = next(scan_batches(log.read(4, 1)))[1]
    assert first.base_offset == 3 and first.last_offset == 5
    # max_bytes smaller than one batch still returns that one batch
    assert len(list(scan_batches(log.read(0, 1)))) == 1
    # upto: only whole batches below it
    got = [h.last_offset for _, h in scan_batches(log.read(0, 1 << 20, upto=7))]
    assert got and max(got) < 7
    assert log.read(9, 1000, upto=9) == b""
    assert values_of(log) == sent
    log.delete_before(30)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(29, 1000)
    assert values_of(log, 30) == sent[30:]


def test_reads_stay_in_one_segment_and_cover_everything(store_factory):
    s = store_factory(segment_bytes=300)
    s.create_topic("t")
    log = s.get_log("t", 0)
    fill(log, 30)
    for seg in log.segments[:-1]:
        data = log.read(seg.base_offset, 1 << 20)
        assert len(data) == seg.size  # exactly the whole segment, nothing from the next


def test_offset_for_timestamp(store_factory):
    s = store_factory(segment_bytes=400, index_interval_bytes=64)
    s.create_topic("t")
    log = s.get_log("t", 0)
    fill(log, 50, per_batch=2, ts0=10_000)  # batch i at ts 10000 + 10 i
    assert log.offset_for_timestamp(0).offset == 0
    hit = log.offset_for_timestamp(10_000 + 10 * 17 + 1)
    assert (hit.offset, hit.timestamp) == (36, 10_180)
    assert log.offset_for_timestamp(10_000 + 10 * 49).offset == 98
    assert log.offset_for_timestamp(10_000 + 10 * 49 + 1) is None


def test_offset_for_timestamp_within_batch(store_factory):
    from logbroker.records import build_batch

    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([build_batch([(b"a", None, (), 100), (b"b", None, (), 300), (b"c", None, (), 200)])])
    assert log.offset_for_timestamp(150).offset == 1
    assert log.offset_for_timestamp(250).offset == 1
    assert log.offset_for_timestamp(301) is None


def test_roll_on_size_and_age(store_factory):
    s = store_factory(segment_bytes=1000, segment_ms=1000)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"x" * 100])], now=0)
    log.append([batch([b"x" * 100])], now=10)
    assert len(log.segments) == 1
    log.append([batch([b"x" * 100])], now=2000)  # aged: rolls first
    assert [seg.base_offset for seg in log.segments] == [0, 2]
    for i in range(8):
        log.append([batch([b"y" * 150])], now=2000 + i)
    assert len(log.segments) >= 3
    assert all(seg.size <= 1000 for seg in log.segments)


def test_truncate_to(store_factory):
    s = store_factory(segment_bytes=300)
    s.create_topic("t")
    log = s.get_log("t", 0)
    sent = fill(log, 30)
    log.truncate_to(40)  # offset 40 is inside batch 39..41: the batch goes
    assert log.log_end_offset == 39 and log.high_watermark == 39
    assert values_of(log) == sent[:39]
    info = log.append([batch([b"new"])])
    assert info.first_offset == 39
    assert values_of(log)[-1] == b"new"
    log.truncate_to(1000)  # past the end: nothing happens
    assert log.log_end_offset == 40
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0) and values_of(log) == []


def test_delete_before_keeps_active_and_moves_start(store_factory):
    s = store_factory(segment_bytes=300, file_delete_delay_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    fill(log, 30)
    n = len(log.segments)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_before(log.log_end_offset + 1)
    doomed = log.delete_before(log.log_end_offset)
    assert len(doomed) == n - 1 and len(log.segments) == 1
    assert log.log_start_offset == log.log_end_offset
    assert all(seg.path.endswith(".deleted") for seg in doomed)
    assert log.purge_deleted() == n - 1


def test_leader_epochs(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"a"])], leader_epoch=1)
    log.append([batch([b"b", b"c"])], leader_epoch=1)
    log.append([batch([b"d"])], leader_epoch=4)
    assert log.epochs == [(1, 0), (4, 3)]
    with pytest.raises(InvalidRequestError):
        log.append([batch([b"e"])], leader_epoch=2)
    log.truncate_to(3)
    assert log.epochs == [(1, 0)]


def test_group_commit_shares_fsyncs(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    per_thread, threads = 50, 8
    errors = []

    def produce(t):
        try:
            for i in range(per_thread):
                log.append([batch([b"t%d-%d" % (t, i)])])
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    workers = [threading.Thread(target=produce, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert not errors
    assert log.log_end_offset == per_thread * threads
    assert log.recovery_point == log.log_end_offset
    assert log.fsyncs < per_thread * threads  # appends shared fsyncs
    assert sorted(values_of(log)) == sorted(b"t%d-%d" % (t, i) for t in range(threads)
                                            for i in range(per_thread))


def test_lazy_flush_does_not_fsync_per_append(store_factory):
    s = store_factory(flush="lazy")
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(20):
        log.append([batch([b"%d" % i])])
    assert log.fsyncs == 0 and log.recovery_point == 0 and log.high_watermark == 20
    log.flush()
    assert log.fsyncs == 1 and log.recovery_point == 20


def test_file_descriptors_are_bounded(tmp_path):
    from logbroker.storage.config import LogConfig, StorageConfig
    from logbroker.storage.store import Store

    with Store.open(str(tmp_path / "d"), StorageConfig(log=LogConfig(), max_open_files=8)) as s:
        for t in range(40):
            s.create_topic(f"t{t}")
            s.get_log(f"t{t}", 0).append([batch([b"v%d" % t])])
        assert s.files.open_count() <= 8
        for t in range(40):
            assert values_of(s.get_log(f"t{t}", 0)) == [b"v%d" % t]
        assert s.files.open_count() <= 8


def test_decoded_records_carry_stamped_offsets(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"a"])])
    log.append([batch([b"b", b"c"])])
    data = log.read(1, 1 << 20)
    recs = decode_batch(data).records()
    assert [(r.offset, r.value) for r in recs] == [(1, b"b"), (2, b"c")]
