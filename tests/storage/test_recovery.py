"""Crash recovery: torn tails, garbage, zeroed tails, lost or bad index,
damage below the recovery point, and a clean reopen that reads no data."""

from __future__ import annotations

import os
import shutil

import lmdb
import pytest

from tests.support.fixtures import batch, crash, open_store, values_of
from logbroker.errors import PartitionOfflineError
from logbroker.storage.metastore import PID_U64


def write_unflushed_tail(path, n_batches=5, **settings):
    """A store whose last batches lie past the persisted recovery point."""
    s = open_store(path, **settings)
    s.create_topic("t")
    log = s.get_log("t", 0)
    sent = []
    for i in range(n_batches):
        vals = [b"v%d-%d" % (i, j) for j in range(4)]
        log.append([batch(vals)])
        sent.append(vals)
    seg = log.active.path
    last_start = log.active.size - len(batch(sent[-1]))
    crash(s)
    return seg, last_start, sent


def reopen_values(path):
    s = open_store(path)
    try:
        log = s.get_log("t", 0)
        assert log.offline is None, log.offline
        return values_of(log), log.log_end_offset, log.active.size
    finally:
        s.close()


def test_torn_write_at_every_byte_of_the_last_batch(tmp_path):
    src = tmp_path / "src"
    seg, last_start, sent = write_unflushed_tail(src)
    end = os.path.getsize(seg)
    expected = [v for vals in sent[:-1] for v in vals]
    for cut in range(last_start, end):
        work = tmp_path / "w"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        with open(work / "t-0" / os.path.basename(seg), "r+b") as fh:
            fh.truncate(cut)
        values, leo, size = reopen_values(work)
        assert values == expected, cut
        assert (leo, size) == (len(expected), last_start), cut
    # the untouched copy recovers everything
    assert reopen_values(src)[0] == [v for vals in sent for v in vals]


@pytest.mark.parametrize("damage", ["garbage", "zeros", "flipped", "half-header"])
def test_damaged_tail_recovers_the_valid_prefix(tmp_path, damage):
    seg, last_start, sent = write_unflushed_tail(tmp_path)
    with open(seg, "r+b") as fh:
        if damage == "garbage":
            fh.seek(0, 2)
            fh.write(os.urandom(300))
        elif damage == "zeros":
            fh.seek(last_start)
            fh.write(b"\0" * (os.path.getsize(seg) - last_start))
        elif damage == "flipped":
            fh.seek(os.path.getsize(seg) - 3)
            byte = fh.read(1)
            fh.seek(-1, 1)
            fh.write(bytes([byte[0] ^ 0x55]))
        else:
            fh.seek(0, 2)
            fh.write(batch([b"next"])[:30])
    keep = sent if damage in ("garbage", "half-header") else sent[:-1]
    values, leo, _ = reopen_values(tmp_path)
    assert values == [v for vals in keep for v in vals]
    assert leo == 4 * len(keep)


def _with_later_segment(tmp_path):
    """An unflushed tail plus the next segment, as a crash during a roll leaves them."""
    from logbroker.records import stamp

    seg, last_start, sent = write_unflushed_tail(tmp_path)
    leo = 4 * len(sent)
    later = os.path.join(os.path.dirname(seg), f"{leo:020d}.log")
    raw = batch([b"later"])
    with open(later, "wb") as fh:
        fh.write(stamp(raw, leo, 0) + raw[16:])
    return seg, last_start, sent, later


def test_later_segments_after_a_torn_batch_are_dropped(tmp_path):
    """A crash in the middle of a roll: the new segment exists, the old one's
    tail is torn. Everything from the tear on goes, later segment included."""
    seg, last_start, sent, later = _with_later_segment(tmp_path)
    with open(seg, "r+b") as fh:
        fh.truncate(last_start + 20)
    values, end, _ = reopen_values(tmp_path)
    assert values == [v for vals in sent[:-1] for v in vals]
    assert end == 4 * len(sent) - 4
    assert not os.path.exists(later)


def test_a_later_segment_that_continues_the_log_is_kept(tmp_path):
    seg, last_start, sent, later = _with_later_segment(tmp_path)
    values, end, _ = reopen_values(tmp_path)
    assert values[-1] == b"later" and end == 4 * len(sent) + 1


def test_corruption_below_recovery_point_takes_partition_offline(tmp_path):
    s = open_store(tmp_path, segment_bytes=400)
    s.create_topic("t")
    s.create_topic("other")
    log = s.get_log("t", 0)
    for i in range(20):
        log.append([batch([b"y%02d" % i] * 4)])
    s.get_log("other", 0).append([batch([b"fine"])])
    sealed = log.segments[0]
    path, size = sealed.path, sealed.size
    crash(s)
    with open(path, "r+b") as fh:
        fh.truncate(size - 10)  # flushed, sealed data shrank
    s = open_store(tmp_path, segment_bytes=400)
    log = s.get_log("t", 0)
    assert isinstance(log.offline, PartitionOfflineError)
    msg = str(log.offline)
    assert os.path.basename(path) in msg and "byte" in msg and "offset" in msg
    with pytest.raises(PartitionOfflineError):
        log.read(0, 100)
    assert os.path.getsize(path) == size - 10  # nothing was truncated
    assert values_of(s.get_log("other", 0)) == [b"fine"]  # the rest serves
    s.close()
    assert not os.path.exists(tmp_path / ".clean_shutdown")  # offline is not clean


def test_header_damage_found_on_read_goes_offline(tmp_path):
    s = open_store(tmp_path)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(10):
        log.append([batch([b"z"])])
    path = log.active.path
    s.close()
    with open(path, "r+b") as fh:
        fh.seek(16)
        fh.write(b"\x09")  # magic of the first batch
    s = open_store(tmp_path)
    log = s.get_log("t", 0)
    with pytest.raises(PartitionOfflineError) as err:
        log.read(0, 1000)
    assert "byte 0" in str(err.value) and os.path.basename(path) in str(err.value)
    s.close()


def test_clean_reopen_reads_no_segment_data(tmp_path, monkeypatch):
    s = open_store(tmp_path, segment_bytes=1000)
    s.create_topic("t", 3)
    for p in range(3):
        for i in range(30):
            s.get_log("t", p).append([batch([b"q%d" % i])])
    s.close()
    from logbroker.storage.segment import Segment

    def no_reads(*a, **k):
        raise AssertionError("a clean reopen must not read segment data")

    monkeypatch.setattr(Segment, "read", no_reads)
    s = open_store(tmp_path, segment_bytes=1000)
    assert s.was_clean
    assert [s.get_log("t", p).log_end_offset for p in range(3)] == [30, 30, 30]
    monkeypatch.undo()
    assert values_of(s.get_log("t", 1)) == [b"q%d" % i for i in range(30)]
    s.close()


def test_crash_recovery_scans_only_past_the_recovery_point(tmp_path, monkeypatch):
    s = open_store(tmp_path, segment_bytes=600)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(40):
        log.append([batch([b"w%d" % i])])
    log.checkpoint()
    rp_seg = log.active.base_offset
    log.append([batch([b"tail"])])
    crash(s)
    from logbroker.storage.segment import Segment

    scanned = []
    real_scan = Segment.scan

    def spy(self, position=0, end=None, **kw):
        scanned.append((self.base_offset, position))
        return real_scan(self, position, end, **kw)

    monkeypatch.setattr(Segment, "scan", spy)
    s = open_store(tmp_path, segment_bytes=600)
    assert not s.was_clean
    assert {base for base, _ in scanned} == {rp_seg}
    assert values_of(s.get_log("t", 0))[-1] == b"tail"
    s.close()


def _drop_index_rows(path, pid_rows=None):
    env = lmdb.open(str(path / "meta.lmdb"), subdir=False, max_dbs=16)
    db = env.open_db(b"oidx")
    with env.begin(write=True) as txn:
        if pid_rows is None:
            txn.drop(db, delete=False)
        else:
            for key, value in pid_rows:
                txn.put(key, value, db=db)
    env.close()


def test_deleted_index_is_rebuilt_on_clean_open(tmp_path):
    s = open_store(tmp_path, segment_bytes=500)
    s.create_topic("t")
    for i in range(40):
        s.get_log("t", 0).append([batch([b"i%d" % i])])
    s.close()
    _drop_index_rows(tmp_path)
    s = open_store(tmp_path, segment_bytes=500)
    log = s.get_log("t", 0)
    assert all(log.index.has(seg.base_offset) for seg in log.segments if seg.size)
    assert values_of(log) == [b"i%d" % i for i in range(40)]
    s.close()


def test_corrupt_index_entry_is_detected_and_rebuilt(tmp_path):
    import struct

    s = open_store(tmp_path, index_interval_bytes=1)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(40):
        log.append([batch([b"c%d" % i])])
    pid, base = log.pid, log.active.base_offset
    s.close()
    # offset 20's entry now points into the middle of another batch
    _drop_index_rows(tmp_path, [(PID_U64.pack(pid, 20), struct.pack(">QI", base, 77))])
    s = open_store(tmp_path, index_interval_bytes=1)
    log = s.get_log("t", 0)
    assert values_of(log, 20)[0] == b"c20"
    assert log.offline is None
    entry = log.index.lookup(20)
    assert entry[0] == 20 and entry[2] != 77
    s.close()


def test_missing_meta_lmdb_rebuilds_from_segments(tmp_path):
    s = open_store(tmp_path, segment_bytes=500)
    s.create_topic("t", 2)
    for i in range(30):
        s.get_log("t", 1).append([batch([b"m%d" % i])])
    s.close()
    for name in ("meta.lmdb", "meta.lmdb-lock"):
        os.unlink(tmp_path / name)
    s = open_store(tmp_path, segment_bytes=500)
    assert s.topics.get("t").partitions == 2
    assert values_of(s.get_log("t", 1)) == [b"m%d" % i for i in range(30)]
    s.close()


def test_leader_epochs_are_not_written_per_append_and_survive_a_crash(tmp_path):
    s = open_store(tmp_path)
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([batch([b"a", b"b"])], leader_epoch=0)
    log.checkpoint()  # epoch 0 reaches LMDB here
    writes = []
    real = s.meta.write
    s.meta.write = lambda *a, **k: (writes.append(1), real(*a, **k))[1]
    log.append([batch([b"c"])], leader_epoch=2)
    log.append([batch([b"d"])], leader_epoch=2)
    log.append([batch([b"e"])], leader_epoch=5)
    log.flush()
    assert writes == []  # the append path never commits to LMDB
    assert log.epochs == [(0, 0), (2, 2), (5, 4)]
    crash(s)
    s = open_store(tmp_path)  # epochs 2 and 5 come back from the batch headers past the RP
    try:
        assert s.get_log("t", 0).epochs == [(0, 0), (2, 2), (5, 4)]
        s.get_log("t", 0).append([batch([b"f"])], leader_epoch=5)
    finally:
        s.close()
    s = open_store(tmp_path)  # a clean reopen reads them from LMDB
    try:
        assert s.get_log("t", 0).epochs == [(0, 0), (2, 2), (5, 4)]
        assert values_of(s.get_log("t", 0)) == [b"a", b"b", b"c", b"d", b"e", b"f"]
    finally:
        s.close()
