"""Transactions in a real partition log (storage/log.py with txn_store.py):
opening by transactional batches of both magics, markers, LSO, the aborted
index, the follower's copy, restarts (clean and crashed), truncation,
reset, retention and DeleteRecords."""

from __future__ import annotations

import os

import pytest

from tests.support.compaction import compact_all, keyed, open_compacted, records_of
from tests.support.fixtures import crash, open_store
from logbroker.errors import (InvalidProducerEpochError, InvalidRecordError,
                              OutOfOrderSequenceError, TransactionCoordinatorFencedError)
from logbroker.kafka.record_batch import KafkaRecord, build_batch as kafka_build
from logbroker.records import format as fmt
from logbroker.records.builder import build_batch
from logbroker.records.control import marker_batch
from logbroker.storage.metastore import FILENAME, MetaStore
from logbroker.storage.retention import apply_retention


def tx(pid, seq, n=1, epoch=0, ts=1_000_000):
    return build_batch([(b"v%d" % i, None, (), ts) for i in range(n)], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq, transactional=True)


def ktx(pid, seq, n=1, epoch=0, ts=1_000_000):
    recs = [KafkaRecord(i, 0, b"k", b"v") for i in range(n)]
    return kafka_build(recs, base_timestamp=ts, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, attributes=fmt.KAFKA_TRANSACTIONAL)


def plain(n=1, ts=1_000_000):
    return build_batch([(b"p", None, (), ts)] * n)


def test_transactions_open_close_lso_and_aborted_both_magics(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([plain(2)])                       # 0-1
    log.append([tx(1, 0, 2)])                    # 2-3 opens producer 1
    log.append([ktx(2, 0, 3)])                   # 4-6 opens producer 2 (a Kafka batch)
    log.append([tx(1, 2)])                       # 7
    assert log.open_transactions() == [(1, 0, 2), (2, 0, 4)]
    assert log.last_stable_offset == 2 and log.high_watermark == 8
    info = log.append_marker(1, 0, False, 0, 0)  # 8: abort producer 1
    assert info.first_offset == 8 and log.last_stable_offset == 4
    log.append_marker(2, 0, True, 0, 0)          # 9: commit producer 2
    assert log.open_transactions() == [] and log.last_stable_offset == log.high_watermark == 10
    assert log.aborted_transactions(0, 10) == [(1, 2)]
    assert log.aborted_transactions(9, 10) == []  # the marker lies below 9
    assert log.aborted_transactions(0, 2) == []   # its records start at 2
    assert log.aborted_transactions(8, 9) == [(1, 2)]
    log.append_marker(3, 0, False, 0, 0)  # nothing open for producer 3: written all the same
    assert log.log_end_offset == 11 and log.aborted_transactions(0, 11) == [(1, 2)]


def test_produce_refuses_control_batches_and_transactional_ones_without_producer(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    with pytest.raises(InvalidRecordError, match="control"):
        log.append([marker_batch(1, 0, True, 0, 5)])
    with pytest.raises(InvalidRecordError):
        log.append([build_batch([b"x"], transactional=True)])
    with pytest.raises(InvalidRecordError):
        log.append([kafka_build([KafkaRecord(0, 0, b"k", b"v")], producer_id=1,
                                producer_epoch=0, attributes=fmt.KAFKA_TRANSACTIONAL)])
    assert log.log_end_offset == 0


def test_marker_fencing_and_zombie_batches(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([tx(1, 0, epoch=3)])
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(1, 2, True, 0, 0)
    log.append_marker(1, 4, False, 5, 0)  # the coordinator aborts with the epoch bumped
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(1, 4, True, 4, 0)
    end = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):  # the zombie at epoch 3 is fenced
        log.append([tx(1, 1, epoch=3)])
    with pytest.raises(OutOfOrderSequenceError):  # the new epoch starts at sequence 0
        log.append([tx(1, 5, epoch=4)])
    assert log.log_end_offset == end
    log.append([tx(1, 0, epoch=4)])
    assert log.open_transactions() == [(1, 4, end)]


def test_follower_derives_the_same_state(store_factory, tmp_path):
    s = store_factory()
    s.create_topic("t")
    s.create_topic("f")
    leader, follower = s.get_log("t", 0), s.get_log("f", 0)
    leader.append([tx(1, 0, 2), plain()])
    leader.append([ktx(2, 0)])
    leader.append_marker(1, 0, False, 0, 0)
    leader.append([tx(3, 0)])
    follower.append_replicated(leader.read(0, 1 << 20))
    follower.set_high_watermark(leader.log_end_offset)
    assert follower.open_transactions() == leader.open_transactions() == [(2, 0, 3), (3, 0, 5)]
    assert follower.aborted_transactions(0, 10) == leader.aborted_transactions(0, 10) == [(1, 0)]
    assert follower.last_stable_offset == leader.last_stable_offset == 3


def _build(log):
    log.append([tx(1, 0, 2)])            # 0-1
    log.append([plain()])                # 2
    log.append_marker(1, 0, False, 0, 0)  # 3: aborted [0, 3]
    log.append([tx(2, 0)])               # 4 open
    log.append([tx(1, 2)])               # 5 open
    log.append_marker(1, 0, True, 1, 0)  # 6 commit
    log.append([tx(3, 0)])               # 7 open


EXPECT_OPEN = [(2, 0, 4), (3, 0, 7)]


@pytest.mark.parametrize("how", ["clean", "crash", "crash-lazy"])
def test_state_survives_a_restart(tmp_path, how):
    settings = {"segment_bytes": 300}
    if how == "crash-lazy":
        settings["flush"] = "lazy"
    s = open_store(tmp_path, **settings)
    s.create_topic("t")
    log = s.get_log("t", 0)
    _build(log)
    if how == "crash-lazy":
        log.flush()
    assert len(log.segments) > 2
    if how == "clean":
        s.close()
    else:
        crash(s)
    s = open_store(tmp_path, **settings)
    log = s.get_log("t", 0)
    assert log.log_end_offset == 8
    assert log.open_transactions() == EXPECT_OPEN
    assert log.aborted_transactions(0, 8) == [(1, 0)]
    with pytest.raises(TransactionCoordinatorFencedError):  # the coordinator epoch is known
        log.append_marker(1, 0, True, 0, 0)
    log.append_marker(2, 0, False, 2, 0)  # 8
    log.append_marker(3, 0, True, 2, 0)   # 9
    assert log.open_transactions() == [] and log.aborted_transactions(0, 10) == [(1, 0), (2, 4)]
    s.close()


def test_lost_derived_tables_are_rebuilt_from_the_log(tmp_path):
    s = open_store(tmp_path, segment_bytes=300)
    s.create_topic("t")
    _build(s.get_log("t", 0))
    s.close()
    meta = MetaStore(str(tmp_path / FILENAME), map_size=64 << 20)
    meta.drop_derived()  # the aborted index (and the offset index) lost while stopped
    meta.close()
    s = open_store(tmp_path, segment_bytes=300)
    log = s.get_log("t", 0)
    assert log.open_transactions() == EXPECT_OPEN and log.aborted_transactions(0, 8) == [(1, 0)]
    s.close()


def test_truncation_and_reset_rewind_the_state(store_factory):
    s = store_factory(segment_bytes=300)
    s.create_topic("t")
    log = s.get_log("t", 0)
    _build(log)
    log.truncate_to(6)  # the commit at 6 and producer 3's batch go
    assert log.open_transactions() == [(2, 0, 4), (1, 0, 5)]
    assert log.aborted_transactions(0, 6) == [(1, 0)]
    log.truncate_to(3)  # the abort marker goes: producer 1 open again
    assert log.open_transactions() == [(1, 0, 0)] and log.aborted_transactions(0, 3) == []
    assert log.last_stable_offset == 0
    log.reset_to(50)
    assert log.open_transactions() == [] and log.last_stable_offset == 50


def test_retention_keeps_segments_of_open_transactions(store_factory):
    s = store_factory(segment_bytes=200, retention_ms=0)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([plain()])
    log.append([tx(1, 0)])  # opens at 1
    for _ in range(6):
        log.append([plain()])
    assert len(log.segments) > 3
    apply_retention(log, now=10**13)
    assert log.log_start_offset <= 1 and log.segments[0].base_offset <= 1
    log.append_marker(1, 0, False, 0, 0)
    apply_retention(log, now=10**13)
    assert log.log_start_offset == 9  # the marker's segment rolled by age and went too
    assert log.aborted_transactions(0, log.log_end_offset) == []  # entries below the log start go


def test_delete_records_keeps_open_transactions(tmp_path):
    s = open_store(tmp_path, segment_bytes=200)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([tx(1, 0)])
    for _ in range(6):
        log.append([plain()])
    log.delete_before(5)
    assert log.log_start_offset == 5 and log.open_transactions() == [(1, 0, 0)]
    assert log.last_stable_offset == 5  # never below the log start
    s.close()
    s = open_store(tmp_path, segment_bytes=200)
    log = s.get_log("t", 0)
    assert log.open_transactions() == [(1, 0, 0)]
    log.append_marker(1, 0, True, 0, 0)
    assert log.open_transactions() == [] and log.last_stable_offset == log.high_watermark
    s.close()


def test_compaction_drops_aborted_records_keeps_markers_and_stops_at_the_lso(tmp_path):
    with open_compacted(tmp_path / "d") as s:
        s.create_topic("t")
        lg = s.get_log("t", 0)
        lg.append([keyed([(b"a", b"a0"), (b"b", b"b0")])])                     # 0-1
        lg.append([keyed([(b"a", b"aborted")], producer_id=1, producer_epoch=0,
                         base_sequence=0, transactional=True)])                 # 2
        lg.append_marker(1, 0, False, 0, 0, now=1_000)                                    # 3
        lg.append([keyed([(b"b", b"b1")], producer_id=2, producer_epoch=0,
                         base_sequence=0, transactional=True)])                 # 4
        lg.append_marker(2, 0, True, 0, 0, now=1_000)                                     # 5
        for i in range(12):
            lg.append([keyed([(b"c", b"c%d" % i)])])                            # 6-17
        lg.append([keyed([(b"a", b"open")], producer_id=3, producer_epoch=0,
                         base_sequence=0, transactional=True)])                 # 18: open
        for i in range(12):
            lg.append([keyed([(b"d", b"d%d" % i)])])                            # 19-30
        lg.roll()
        assert lg.last_stable_offset == 18
        compact_all(s)
        after = records_of(lg)
        kept = {o: v for o, _, v in after}
        assert 2 not in kept                      # the aborted record went
        assert kept[0] == b"a0"                   # not superseded by the aborted one
        assert 1 not in kept and kept[4] == b"b1"  # the committed one superseded b0
        assert 3 in kept and 5 in kept            # the markers stay
        assert all(o in kept for o in range(18, 31))  # nothing at or past the LSO is cleaned
        assert lg.aborted_transactions(0, 31) == [(1, 2)]


def test_a_lost_unflushed_marker_reopens_its_transaction(tmp_path):
    s = open_store(tmp_path, flush="lazy")
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([tx(1, 0)])
    log.append([plain()])
    log.flush()
    rp = log.flushed_point
    log.append_marker(1, 0, False, 0, 0)  # not flushed...
    log.checkpoint()                        # ...but a snapshot at the log end (2 + 1) is stored
    assert log.open_transactions() == [] and log.aborted_transactions(0, 3) == [(1, 0)]
    path = log.active.path
    crash(s)
    os.truncate(path, rp.position)  # the page cache lost the unflushed marker too
    s = open_store(tmp_path, flush="lazy")
    log = s.get_log("t", 0)
    assert log.log_end_offset == 2
    assert log.open_transactions() == [(1, 0, 0)] and log.aborted_transactions(0, 2) == []
    log.append_marker(1, 0, True, 0, 0)
    assert log.open_transactions() == [] and log.aborted_transactions(0, 3) == []
    s.close()
