"""Storage under faults an operator meets: a full disk, a missing segment, damage
found on read, and appends refused as a whole (idempotent producer state is
checked inside the append, before anything is written)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.fixtures import batch, crash, open_store, values_of
from logbroker.errors import (CorruptRecordError, OutOfOrderSequenceError, PartitionOfflineError,
                              StorageError)
from logbroker.records import build_batch


def idem(values, seq: int, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch([(v, None, (), 1_000_000) for v in values], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


# -- an append is checked whole -------------------------------------------------------------
def test_a_bad_second_batch_refuses_the_whole_append(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    bad = bytearray(batch([b"x"]))
    bad[-1] ^= 0xFF  # CRC mismatch
    for first in (batch([b"a"]), idem([b"a"], 0)):
        with pytest.raises(CorruptRecordError):
            log.append([first, bytes(bad)])
        assert log.log_end_offset == 0
    # one buffer holding both batches (as a produce part arrives) is refused the same way
    with pytest.raises(CorruptRecordError):
        log.append(idem([b"a"], 0) + bytes(bad))
    assert log.log_end_offset == 0


def test_a_sequence_gap_in_a_later_batch_refuses_the_whole_append(store_factory):
    s = store_factory()
    s.create_topic("t")
    log = s.get_log("t", 0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append([idem([b"a", b"b"], 0), idem([b"c"], 5)])
    assert log.log_end_offset == 0
    # the same batches in order are accepted, and a retry of both is deduplicated
    info = log.append([idem([b"a", b"b"], 0), idem([b"c"], 2)])
    assert (info.first_offset, info.last_offset, log.log_end_offset) == (0, 2, 3)
    again = log.append([idem([b"a", b"b"], 0), idem([b"c"], 2)])
    assert (again.first_offset, again.last_offset, again.batches) == (0, 2, 0)
    assert log.log_end_offset == 3 and values_of(log) == [b"a", b"b", b"c"]


def test_producer_state_survives_a_restart_and_a_truncation(tmp_path):
    s = open_store(tmp_path / "d")
    s.create_topic("t")
    log = s.get_log("t", 0)
    log.append([idem([b"a"], 0)])
    log.append([idem([b"b"], 1)])
    s.close()
    s = open_store(tmp_path / "d")
    log = s.get_log("t", 0)
    assert log.append([idem([b"b"], 1)]).first_offset == 1  # a retry after restart: deduplicated
    log.truncate_to(1)  # the batch at 1 is gone: its sequence may be written again
    assert log.append([idem([b"b"], 1)]).first_offset == 1
    assert values_of(log) == [b"a", b"b"]
    s.close()


# -- a missing segment ----------------------------------------------------------------------
@pytest.mark.parametrize("clean", [True, False])
def test_a_missing_middle_segment_is_caught_at_open(tmp_path, clean):
    s = open_store(tmp_path / "d", segment_bytes=200)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(12):
        log.append([batch([b"value-%02d" % i] * 3)])
    segs = [seg.path for seg in log.segments]
    assert len(segs) >= 4
    ends = [(seg.base_offset, log.segment_end(seg)) for seg in log.segments]
    s.close() if clean else crash(s)
    os.unlink(segs[1])
    s = open_store(tmp_path / "d")
    log = s.get_log("t", 0)
    assert isinstance(log.offline, PartitionOfflineError)
    msg = str(log.offline)
    assert "missing" in msg and os.path.basename(segs[0]) in msg, msg
    assert f"[{ends[1][0]}, {ends[1][1]})" in msg, msg  # the lost offsets, exactly
    with pytest.raises(PartitionOfflineError):
        log.read(0, 1000)
    s.close()


# -- damage found on a read names where reading can resume -------------------------------------
def test_damage_found_on_read_names_the_next_readable_offset(tmp_path):
    s = open_store(tmp_path / "d", segment_bytes=300)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(12):
        log.append([batch([b"value-%02d" % i] * 3)])
    first, second = log.segments[0], log.segments[1]
    s.close()
    with open(first.path, "r+b") as fh:  # an invalid magic in the segment's first batch
        fh.seek(16)
        fh.write(b"\x63")
    s = open_store(tmp_path / "d")
    log = s.get_log("t", 0)
    assert log.offline is None  # clean open reads no data
    with pytest.raises(PartitionOfflineError) as err:
        log.read(0, 1000)
    assert f"next readable offset {second.base_offset}" in str(err.value), err.value
    s.close()


# -- a full disk -------------------------------------------------------------------------------
@pytest.fixture
def small_disk(tmp_path):
    """A 2 MiB tmpfs (root only; the suite runs as root in CI)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_full_disk_refuses_appends_and_recovers_by_itself(small_disk):
    s = open_store(small_disk / "data", segment_bytes=8 << 20)
    s.create_topic("t")
    log = s.get_log("t", 0)
    filler = small_disk / "filler"
    st = os.statvfs(small_disk)
    with open(filler, "wb") as fh:  # leave about 200 KiB free
        fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - (200 << 10)))
    acked, refused = [], 0
    for i in range(400):
        vals = [b"%05d" % i + b"x" * 4000]
        try:
            log.append([batch(vals)])
            acked += vals
        except StorageError as exc:
            refused += 1
            assert "nothing was written" in exc.message
    assert acked and refused, (len(acked), refused)
    assert log.offline is None and log.log_end_offset == len(acked)
    os.unlink(filler)  # space comes back: so does the partition, by itself
    log.append([batch([b"after"])])
    assert values_of(log) == acked + [b"after"]
    s.close()
    assert os.path.exists(small_disk / "data" / ".clean_shutdown")
    s = open_store(small_disk / "data")
    assert values_of(s.get_log("t", 0)) == acked + [b"after"]
    s.close()
