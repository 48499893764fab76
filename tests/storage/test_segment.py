"""Segment files and the descriptor cache."""

from __future__ import annotations

import os
import time

import pytest

from tests.support.fixtures import batch
from logbroker.errors import CorruptRecordError
from logbroker.records import stamp
from logbroker.storage.files import FileCache
from logbroker.storage.segment import Segment, parse_segment_name, segment_name


def stamped(values, offset):
    raw = batch(values)
    return stamp(raw, offset, 0) + raw[16:]


def test_segment_names():
    assert segment_name(42) == "00000000000000000042.log"
    assert parse_segment_name("00000000000000000042.log") == 42
    for bad in ("42.log", "00000000000000000042.log.deleted", "0000000000000000004x.log", "a.txt"):
        assert parse_segment_name(bad) is None


def test_write_many_buffers_and_scan_across_chunks(tmp_path):
    files = FileCache(4)
    seg = Segment.create(str(tmp_path), 0, files)
    with pytest.raises(FileExistsError):
        Segment.create(str(tmp_path), 0, files)
    blobs = [stamped([b"v%d" % i, b"x" * (i % 50)], 2 * i) for i in range(1500)]
    seg.write([memoryview(b) for b in blobs], sum(map(len, blobs)))  # > IOV_MAX buffers
    assert seg.size == os.path.getsize(seg.path) == sum(map(len, blobs))
    for chunk in (61, 100, 4096, 1 << 20):  # a batch larger than the chunk is read whole
        got = [(pos, h.base_offset) for pos, h in seg.scan(0, chunk=chunk)]
        assert [o for _, o in got] == [2 * i for i in range(1500)]
    assert seg.read(0, len(blobs[0])) == blobs[0]


def test_scan_stops_at_incomplete_tail_and_names_the_position_of_damage(tmp_path):
    files = FileCache(4)
    seg = Segment.create(str(tmp_path), 0, files)
    good = stamped([b"a"], 0) + stamped([b"b"], 1)
    seg.write([good, stamped([b"c"], 2)[:30]], len(good) + 30)
    assert [h.base_offset for _, h in seg.scan()] == [0, 1]
    seg.truncate(len(good))
    seg.write([b"\0" * 70], 70)
    with pytest.raises(CorruptRecordError) as err:
        list(seg.scan())
    assert err.value.position == len(good) and seg.path in str(err.value)


def test_file_cache_bounds_idle_descriptors_and_never_closes_one_in_use(tmp_path):
    cache = FileCache(2)
    segs = [Segment.create(str(tmp_path), i, cache) for i in range(5)]
    for s in segs:
        s.write([b"x" * 10], 10)
    assert cache.open_count() <= 2
    with cache.fd(segs[0], segs[0].path) as fd0:
        for s in segs[1:]:
            s.read(0, 10)
        assert os.pread(fd0, 10, 0) == b"x" * 10  # still open although least recent
        cache.forget(segs[0])  # closing is deferred until the user is done
        assert os.pread(fd0, 10, 0) == b"x" * 10
    with pytest.raises(OSError):
        os.fstat(fd0)
    assert cache.open_count() <= 2


def _small_files(tmp_path, n: int) -> tuple[list, list[str]]:
    """``n`` one-byte files and an owner object for each."""
    paths = []
    for i in range(n):
        path = tmp_path / f"f{i}"
        path.write_bytes(b"x")
        paths.append(str(path))
    return [object() for _ in paths], paths


def test_a_full_cache_keeps_its_recent_descriptors_and_opens_a_newcomer_for_one_use(tmp_path):
    """Decision 117: six files used round-robin through three slots. The
    first three keep theirs (found open on every later pass) and the others
    are opened for one use each; plain LRU (a slot given up however
    recent: ``admit_idle_s=0``) opened every file on every pass."""
    owners, paths = _small_files(tmp_path, 6)
    for admit, opens in ((3600.0, 6 + 3 + 3), (0.0, 18)):
        files = FileCache(3, admit_idle_s=admit)
        for _ in range(3):
            for owner, path in zip(owners, paths):
                with files.fd(owner, path) as fd:
                    assert os.pread(fd, 1, 0) == b"x"
        assert files.opens == opens and files.open_count() == 3
        files.close_all()
    files = FileCache(3, admit_idle_s=3600.0)
    for owner, path in zip(owners[:3], paths):
        with files.fd(owner, path):
            pass
    with files.fd(owners[3], paths[3]) as fd:  # opened for this use only
        assert os.pread(fd, 1, 0) == b"x"
    with pytest.raises(OSError):
        os.fstat(fd)
    files.admit_idle_s = 0.0  # the slots' holders went quiet: the next newcomer takes one
    with files.fd(owners[4], paths[4]):
        pass
    with files.fd(owners[4], paths[4]):
        pass
    assert files.opens == 5 and files.open_count() == 3


def test_descriptors_unused_for_a_while_are_closed_and_one_in_use_is_kept(tmp_path):
    files = FileCache(100)
    owners, paths = _small_files(tmp_path, 4)
    for owner, path in zip(owners, paths):
        with files.fd(owner, path):
            pass
    assert files.close_idle(idle_s=3600) == 0 and files.open_count() == 4  # all recent
    with files.fd(owners[0], paths[0]) as fd:  # in use: never closed under its user
        assert files.close_idle(idle_s=0, now=time.monotonic() + 1) == 3
        assert files.open_count() == 1 and os.read(fd, 1) == b"x"
    assert files.close_idle(idle_s=0, now=time.monotonic() + 1) == 1
    assert files.open_count() == 0
    with files.fd(owners[1], paths[1]) as fd:  # reopened when used again
        assert os.read(fd, 1) == b"x"
