"""Where a read or a fetch slice starts: at a batch's first offset (the
header there is checked alone), inside a batch or after an index hint (a
walk), and the damage or stale index each of those can meet."""

from __future__ import annotations

import pytest

from tests.support.fixtures import batch
from logbroker.errors import PartitionOfflineError
from logbroker.records import scan_batches


def _filled(store_factory, n_batches=40, per_batch=3):
    s = store_factory(segment_bytes=500, index_interval_bytes=100)
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(n_batches):
        log.append([batch([b"v%03d-%d" % (i, j) for j in range(per_batch)])])
    return s, log


def _first_offset(data: bytes) -> int:
    return next(scan_batches(data, verify=True))[1].base_offset


def test_every_offset_starts_at_the_batch_holding_it_in_reads_and_slices(store_factory):
    s, log = _filled(store_factory)
    assert len(log.segments) > 3
    for offset in range(log.log_end_offset):
        want = offset - offset % 3  # the batch holding it
        assert _first_offset(log.read(offset, 1 << 20)) == want
        piece = log.slice(offset, 1 << 20)
        assert _first_offset(piece.read()) == want
        assert piece.read() == log.read(offset, 1 << 20)  # whole batches of one segment
    assert log.slice(log.log_end_offset, 1 << 20) is None
    s.close()


def test_a_stale_index_entry_at_a_batch_start_is_caught_and_the_index_rebuilt(store_factory):
    """The entry promises offset 3 where the batch of offset 6 lies: the
    batch found there holds the offset read (4 < 9) but not the one
    promised, so the index is rebuilt and the read starts at batch 3."""
    s = store_factory(index_interval_bytes=1 << 20)  # one entry: offset 0 at byte 0
    s.create_topic("t")
    log = s.get_log("t", 0)
    for i in range(5):
        log.append([batch([b"v%03d-%d" % (i, j) for j in range(3)])])
    seg = log.segments[0]
    positions = [pos for pos, _ in scan_batches(seg.read(0, seg.size))]
    log.index.add(3, seg.base_offset, positions[2], 0)
    assert _first_offset(log.read(4, 1 << 20)) == 3
    log.index.add(3, seg.base_offset, positions[2], 0)
    assert _first_offset(log.slice(4, 1 << 20).read()) == 3
    assert log.offline is None
    s.close()


def test_a_damaged_header_at_a_batch_start_takes_the_partition_offline(store_factory, tmp_path):
    s, log = _filled(store_factory)
    seg = log.segments[1]
    second = [pos for pos, _ in scan_batches(seg.read(0, seg.size))][1]
    with open(seg.path, "r+b") as fh:
        fh.seek(second + 16)  # magic
        fh.write(b"\x63")
    with pytest.raises(PartitionOfflineError) as err:
        log.slice(seg.base_offset + 3, 1 << 20)
    assert f"byte {second}: unknown magic 99" in str(err.value)
    assert f"next readable offset {log.segments[2].base_offset}" in str(err.value)
    s.close()


def test_a_whole_segment_from_its_base_is_sliced_without_reading_a_header(store_factory,
                                                                        monkeypatch):
    """A consumer starting at the beginning of thousands of partitions: a
    slice from a segment's base offset of a whole segment below the limit
    that fits the bytes asked for reads nothing; any other slice still
    finds its start in the file."""
    from logbroker.storage.segment import Segment

    s, log = _filled(store_factory)
    expected = [(seg.base_offset, log.read(seg.base_offset, 1 << 20)) for seg in log.segments]
    real_read = Segment.read
    reads = []
    monkeypatch.setattr(Segment, "read", lambda seg, pos, size: reads.append(pos) or
                        real_read(seg, pos, size))
    for base, data in expected:
        piece = log.slice(base, 1 << 20)
        assert (piece.position, piece.size) == (0, piece.segment.size)
        assert real_read(piece.segment, piece.position, piece.size) == data
    assert reads == []
    first = log.segments[0]
    assert log.slice(3, 1 << 20).position > 0 and reads  # not a segment's base: a header read
    reads.clear()
    assert log.slice(0, 10).size < first.size and reads  # does not fit: the first batch alone
    reads.clear()
    assert log.slice(0, 1 << 20, upto=4).size < first.size and reads
    s.close()
