"""Storage primitives of replication: a follower's append of the leader's batches
(byte for byte), the epoch history (assign, end offset for an epoch, KIP-101
truncation), restarting a log at any offset, partitions hosted one by one, and a
follower log's crash recovery."""

from __future__ import annotations

import os

import pytest

from tests.support.fixtures import batch, crash, open_store, values_of
from logbroker.errors import (CorruptRecordError, FencedLeaderEpochError, InvalidRequestError,
                              OffsetOutOfRangeError, OutOfOrderSequenceError,
                              TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from logbroker.records import build_batch, format as fmt
from logbroker.records.walker import scan_batches, whole_batches
from logbroker.storage.log import Log


def idem(values, seq: int, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch([(v, None, (), 1_000_000) for v in values], producer_id=pid,
                       producer_epoch=epoch, base_sequence=seq)


def new_log(path, topic: str = "t", *, replicated: bool = False, **settings) -> Log:
    """A log in a store of its own at ``path`` (closed by the test's store list)."""
    s = open_store(path, **settings)
    OPENED.append(s)
    s.create_topic(topic)
    lg = s.get_log(topic, 0)
    lg.set_replicated(replicated)
    return lg


OPENED: list = []


@pytest.fixture(autouse=True)
def _close_stores():
    yield
    while OPENED:
        s = OPENED.pop()
        try:
            s.close()
        except Exception:  # noqa: BLE001 - a crashed store is closed already
            pass


def files_of(lg: Log) -> list[tuple[str, bytes]]:
    """(file name, bytes) of every segment, oldest first."""
    out = []
    for seg in lg.segments:
        with open(seg.path, "rb") as fh:
            out.append((os.path.basename(seg.path), fh.read()))
    return out


def replicate(leader: Log, follower: Log, max_bytes: int = 1 << 20, *, hint: bool = False) -> int:
    """Fetch from ``leader`` at the follower's log end until it has everything:
    ``read`` (whole batches of one segment), or with ``hint`` a ``slice`` that
    may end inside a batch, cut by ``whole_batches``, and the slice's segment
    base. Returns the number of appends."""
    calls = 0
    while follower.log_end_offset < leader.log_end_offset:
        at = follower.log_end_offset
        if hint:
            sl = leader.slice(at, max_bytes)
            follower.append_replicated(whole_batches(sl.read()), segment_base=sl.segment.base_offset)
        else:
            follower.append_replicated(leader.read(at, max_bytes))
        calls += 1
    return calls


def fill_leader(leader: Log) -> None:
    """Several epochs, producers, multi-batch appends, size rolls."""
    for i in range(6):
        leader.append([batch([b"a%02d" % i] * 4)], leader_epoch=1)
    leader.append([idem([b"p0", b"p1"], 0), idem([b"p2"], 2), batch([b"x"])], leader_epoch=1)
    for i in range(5):
        leader.append([idem([b"q%02d" % i], 3 + i), idem([b"r%02d" % i], i, pid=8)], leader_epoch=3)
    for i in range(4):
        leader.append([batch([b"z%02d" % i] * 3), batch([b"y"])], leader_epoch=4)


# -- byte-identical replication -------------------------------------------------------------
def test_a_follower_of_whole_segment_reads_is_byte_identical(tmp_path):
    leader = new_log(tmp_path / "l", segment_bytes=600)
    follower = new_log(tmp_path / "f", replicated=True, segment_bytes=600)
    fill_leader(leader)
    assert len(leader.segments) >= 4
    replicate(leader, follower)  # read() stops at the segment end: one leader segment a call
    assert files_of(follower) == files_of(leader)
    assert follower.epochs == leader.epochs == [(1, 0), (3, 28), (4, 38)]
    assert follower.log_end_offset == leader.log_end_offset == 54
    assert follower.high_watermark == 0  # the leader's HW comes by set_high_watermark only
    follower.set_high_watermark(leader.high_watermark)
    assert values_of(follower) == values_of(leader)


def test_with_the_leaders_segment_base_any_fetch_size_gives_identical_segments(tmp_path):
    leader = new_log(tmp_path / "l", segment_bytes=600)
    follower = new_log(tmp_path / "f", replicated=True, segment_bytes=600)
    fill_leader(leader)
    leader.roll()  # a roll that no size rule would make
    leader.append([batch([b"after-roll"])], leader_epoch=4)
    leader.append([batch([b"aged"])], leader_epoch=4, now=leader.active.created_ms + 10**10)
    calls = replicate(leader, follower, max_bytes=150, hint=True)  # slices end inside batches
    assert calls > len(leader.segments)
    assert files_of(follower) == files_of(leader)
    assert follower.epochs == leader.epochs


def test_without_the_hint_a_follower_rolls_by_its_own_rules(tmp_path):
    leader = new_log(tmp_path / "l", segment_bytes=600)
    follower = new_log(tmp_path / "f", replicated=True, segment_bytes=600)
    fill_leader(leader)
    leader.roll()
    leader.append([batch([b"after-roll"])], leader_epoch=4)
    replicate(leader, follower)
    # the same bytes, but the explicit roll is the leader's own
    assert b"".join(b for _, b in files_of(follower)) == b"".join(b for _, b in files_of(leader))
    assert len(follower.segments) == len(leader.segments) - 1


def test_append_replicated_fsyncs_per_sync_and_never_moves_the_hw(tmp_path):
    leader = new_log(tmp_path / "l")
    leader.append([batch([b"a"]), batch([b"b"])], leader_epoch=2)
    follower = new_log(tmp_path / "f", replicated=True)
    info = follower.append_replicated(leader.read(0, 1 << 20), sync=False)
    assert (info.first_offset, info.last_offset, info.batches) == (0, 1, 2)
    assert follower.fsyncs == 0 and follower.recovery_point == 0
    leader.append([batch([b"c"])], leader_epoch=2)
    follower.append_replicated(leader.read(2, 1 << 20))  # fsync policy: durable on return
    assert follower.fsyncs == 1 and follower.recovery_point == 3
    assert follower.high_watermark == 0
    lazy = new_log(tmp_path / "z", replicated=True, flush="lazy")
    lazy.append_replicated(leader.read(0, 1 << 20))
    assert lazy.high_watermark == 0 and lazy.fsyncs == 0


# -- refusals ------------------------------------------------------------------------------
def restamp(raw: bytes, base: int, epoch: int) -> bytes:
    return fmt.stamp(raw, base, epoch) + raw[fmt.STAMP_SIZE:]


def test_refused_replicated_appends_write_nothing(tmp_path):
    leader = new_log(tmp_path / "l")
    leader.append([batch([b"a", b"b"])], leader_epoch=3)
    leader.append([batch([b"c"])], leader_epoch=3)
    follower = new_log(tmp_path / "f", replicated=True)
    follower.append_replicated(leader.read(0, 1 << 20))
    before = (files_of(follower), follower.epochs, follower.log_end_offset)
    nxt = batch([b"d", b"e"])
    bad_crc = bytearray(restamp(nxt, 3, 3))
    bad_crc[-1] ^= 0xFF
    cases = {
        "overlap with the log": [restamp(nxt, 2, 3)],
        "overlap inside the call": [restamp(nxt, 3, 3), restamp(batch([b"f"]), 4, 3)],
        "older epoch": [restamp(nxt, 3, 2)],
        "epochs going back inside the call": [restamp(nxt, 3, 5), restamp(batch([b"f"]), 5, 4)],
        "a bad CRC after a good batch": [restamp(batch([b"f"]), 3, 3), bytes(bad_crc)],
        "not whole batches": [restamp(nxt, 3, 3)[:-1]],
    }
    for why, batches in cases.items():
        err = CorruptRecordError if "CRC" in why or "whole" in why else InvalidRequestError
        with pytest.raises(err):
            follower.append_replicated(batches)
        assert (files_of(follower), follower.epochs, follower.log_end_offset) == before, why
    with pytest.raises(InvalidRequestError, match="start at offset 2, below the log end 3"):
        follower.append_replicated(restamp(nxt, 2, 3))  # (a gap is taken: compacted leaders)
    follower.append_replicated(restamp(nxt, 3, 3))  # the right one is taken
    assert follower.log_end_offset == 5


def test_a_leaders_batch_is_taken_whatever_max_batch_bytes_says(tmp_path):
    leader = new_log(tmp_path / "l", max_batch_bytes=4096)
    leader.append([batch([b"v" * 1000])], leader_epoch=1)
    follower = new_log(tmp_path / "f", replicated=True, max_batch_bytes=64)
    follower.append_replicated(leader.read(0, 1 << 20))
    assert files_of(follower) == files_of(leader)


def test_gaps_between_batches_are_kept_as_the_leader_has_them(tmp_path):
    follower = new_log(tmp_path / "f", replicated=True)
    follower.append_replicated([restamp(batch([b"a"]), 0, 1), restamp(batch([b"b"]), 5, 1)])
    assert follower.log_end_offset == 6
    assert follower.read(3, 1 << 20)[:8] == (5).to_bytes(8, "big")  # in a gap: the next batch


# -- producer state on a promoted follower -------------------------------------------------
def test_a_promoted_follower_deduplicates_a_retry(tmp_path):
    leader = new_log(tmp_path / "l")
    leader.append([idem([b"a"], 0)], leader_epoch=1)
    leader.append([idem([b"b", b"c"], 1), batch([b"plain"])], leader_epoch=1)
    follower = new_log(tmp_path / "f", replicated=True)
    replicate(leader, follower)
    follower.assign_epoch(2)  # promoted
    again = follower.append([idem([b"b", b"c"], 1)], leader_epoch=2)
    assert (again.first_offset, again.last_offset, again.batches) == (1, 2, 0)
    with pytest.raises(OutOfOrderSequenceError):
        follower.append([idem([b"e"], 9)], leader_epoch=2)
    assert follower.append([idem([b"d"], 3)], leader_epoch=2).first_offset == 4


def test_replicated_batches_update_a_former_leaders_producer_state(tmp_path):
    """B led in epoch 1 (its producer state is loaded), follows A in epoch 2 and
    leads again in epoch 3: A's batches must be in B's state, not only B's own."""
    b = new_log(tmp_path / "b")
    b.append([idem([b"a"], 0)], leader_epoch=1)
    a = new_log(tmp_path / "a", replicated=True)
    replicate(b, a)
    a.assign_epoch(2)
    a.append([idem([b"b"], 1)], leader_epoch=2)
    a.append([idem([b"c"], 2)], leader_epoch=2)
    b.set_replicated(True)
    replicate(a, b)
    b.assign_epoch(3)
    retry = b.append([idem([b"c"], 2)], leader_epoch=3)  # a retry of what A took
    assert (retry.first_offset, retry.batches) == (2, 0)
    assert b.log_end_offset == 3 and values_of(b) == [b"a", b"b", b"c"]


# -- leader epochs ---------------------------------------------------------------------------
def test_end_offset_for_epoch(tmp_path):
    lg = new_log(tmp_path / "l")
    assert lg.end_offset_for_epoch(0) == (-1, -1)  # empty history
    assert lg.end_offset_for_epoch(5) == (-1, -1)
    lg.append([batch([b"a"] * 5)], leader_epoch=1)
    lg.append([batch([b"b"] * 4)], leader_epoch=3)
    lg.append([batch([b"c"] * 3)], leader_epoch=6)
    assert lg.epochs == [(1, 0), (3, 5), (6, 9)] and lg.log_end_offset == 12
    expected = {0: (-1, -1), 1: (1, 5), 2: (1, 5), 3: (3, 9), 5: (3, 9), 6: (6, 12), 99: (6, 12)}
    assert {e: lg.end_offset_for_epoch(e) for e in expected} == expected
    lg.assign_epoch(8)
    assert lg.end_offset_for_epoch(7) == (6, 12) and lg.end_offset_for_epoch(8) == (8, 12)
    lg.truncate_to(9)
    assert lg.end_offset_for_epoch(7) == (3, 9)
    with pytest.raises(InvalidRequestError):  # (-1, -1)'s offset is no place to truncate to
        lg.truncate_to(lg.end_offset_for_epoch(0)[1])
    assert lg.log_end_offset == 9 and [s.base_offset for s in lg.segments] == [0]


def test_assign_epoch(tmp_path):
    lg = new_log(tmp_path / "l")
    lg.append([batch([b"a", b"b"])], leader_epoch=1)
    lg.assign_epoch(3)
    assert lg.epochs == [(1, 0), (3, 2)]
    lg.assign_epoch(3)  # no-op
    with pytest.raises(FencedLeaderEpochError):
        lg.assign_epoch(2)
    lg.assign_epoch(4)  # a leader that wrote nothing in 3: one entry per start offset
    assert lg.epochs == [(1, 0), (4, 2)]
    lg.append([batch([b"c"])], leader_epoch=4)
    lg.append([batch([b"d"])], leader_epoch=5)
    assert lg.epochs == [(1, 0), (4, 2), (5, 3)]
    with pytest.raises(InvalidRequestError):
        lg.append([batch([b"e"])], leader_epoch=4)


def test_an_assigned_epoch_survives_a_crash_and_a_clean_restart(tmp_path):
    s = open_store(tmp_path / "d")
    s.create_topic("t")
    lg = s.get_log("t", 0)
    lg.append([batch([b"a", b"b"])], leader_epoch=1)
    lg.assign_epoch(4)
    crash(s)  # nothing flushed or checkpointed since, but assign_epoch checkpointed
    s = open_store(tmp_path / "d")
    assert s.get_log("t", 0).epochs == [(1, 0), (4, 2)]
    s.close()
    s = open_store(tmp_path / "d")
    assert s.get_log("t", 0).epochs == [(1, 0), (4, 2)]
    s.close()


def test_an_empty_newer_epoch_gives_way_to_the_current_leaders_batches(tmp_path):
    """B was elected in epoch 5 and wrote nothing; A, the leader of epoch 6,
    has epoch-4 batches past B's end: B takes them (Kafka drops such entries)."""
    a = new_log(tmp_path / "a")
    a.append([batch([b"x", b"y"])], leader_epoch=4)
    b = new_log(tmp_path / "b", replicated=True)
    b.append_replicated(a.read(0, 1 << 20))
    a.append([batch([b"z"])], leader_epoch=4)  # never reached B
    b.assign_epoch(5)
    a.assign_epoch(6)
    assert b.end_offset_for_epoch(4) == (4, 2)
    b.append_replicated(a.read(2, 1 << 20))
    assert b.epochs == [(4, 0)] and b.log_end_offset == 3
    a.append([batch([b"w"])], leader_epoch=6)
    b.append_replicated(a.read(3, 1 << 20))
    assert b.epochs == a.epochs == [(4, 0), (6, 3)]
    assert files_of(b) == files_of(a)
    # an epoch that holds data never gives way
    with pytest.raises(InvalidRequestError):
        b.append_replicated(restamp(batch([b"v"]), 4, 5))


def test_divergent_logs_converge_by_truncating_to_the_leaders_epoch_end(tmp_path):
    """KIP-101: A led epoch 1 and wrote past what B replicated; B leads epoch 2.
    A truncates to B's end offset for A's latest epoch, then replicates."""
    a = new_log(tmp_path / "a", segment_bytes=400)
    b = new_log(tmp_path / "b", replicated=True, segment_bytes=400)
    for i in range(6):
        a.append([batch([b"common-%d" % i] * 2)], leader_epoch=1)
    replicate(a, b, hint=True)
    for i in range(4):
        a.append([batch([b"lost-%d" % i] * 3)], leader_epoch=1)  # never replicated
    b.assign_epoch(2)
    for i in range(5):
        b.append([batch([b"new-%d" % i])], leader_epoch=2)
    a.set_replicated(True)
    epoch, end = b.end_offset_for_epoch(a.epochs[-1][0])
    assert (epoch, end) == (1, 12)
    a.truncate_to(min(end, a.end_offset_for_epoch(epoch)[1]))
    replicate(b, a, max_bytes=100, hint=True)
    assert files_of(a) == files_of(b)
    assert a.epochs == b.epochs == [(1, 0), (2, 12)]


def test_a_divergence_at_a_segment_start_leaves_no_empty_segment(tmp_path):
    """A rolled, then wrote what B never got; B went on in its segment. A cut
    at a segment's first batch makes the segment before it active again, so
    A's files still match B's once A has replicated."""
    s = open_store(tmp_path / "a")
    s.create_topic("t")
    a = s.get_log("t", 0)
    b = new_log(tmp_path / "b", replicated=True)
    a.append([batch([b"common"] * 4)], leader_epoch=1)
    replicate(a, b, hint=True)
    a.roll()
    a.append([batch([b"lost"] * 2)], leader_epoch=1, sync=False)  # the recovery point stays
    a.append([batch([b"lost"] * 2)], leader_epoch=1, sync=False)  # at the new segment's start
    b.assign_epoch(2)
    b.append([batch([b"new"] * 3)], leader_epoch=2)
    epoch, end = b.end_offset_for_epoch(1)
    assert (epoch, end) == (1, 4) and a.segments[-1].base_offset == 4
    a.set_replicated(True)
    a.truncate_to(end)
    assert [seg.base_offset for seg in a.segments] == [0] and a.recovery_point == 4
    crash(s)  # the truncation is durable and its recovery point names a live segment
    s = open_store(tmp_path / "a")
    try:
        a = s.get_log("t", 0)
        assert a.offline is None and a.log_end_offset == 4
        a.set_replicated(True)
        replicate(b, a, hint=True)
        assert files_of(a) == files_of(b)
    finally:
        s.close()


def test_a_divergent_epoch_the_leader_never_had_is_cut(tmp_path):
    """KIP-279: A led epoch 2 briefly (nothing replicated); B, which had only
    epoch 1, leads epoch 3. B answers A's epoch 2 with its epoch 1's end."""
    a = new_log(tmp_path / "a")
    b = new_log(tmp_path / "b", replicated=True)
    a.append([batch([b"one"] * 3)], leader_epoch=1)
    replicate(a, b)
    a.append([batch([b"two"] * 2)], leader_epoch=2)
    b.assign_epoch(3)
    b.append([batch([b"three"])], leader_epoch=3)
    a.set_replicated(True)
    epoch, end = b.end_offset_for_epoch(a.epochs[-1][0])
    assert (epoch, end) == (1, 3)
    a.truncate_to(min(end, a.end_offset_for_epoch(epoch)[1]))
    assert a.epochs == [(1, 0)] and a.log_end_offset == 3
    replicate(b, a)
    assert files_of(a) == files_of(b) and a.epochs == b.epochs == [(1, 0), (3, 3)]


# -- reset_to --------------------------------------------------------------------------------
def test_reset_to_restarts_the_log_anywhere_and_durably(tmp_path):
    s = open_store(tmp_path / "d", segment_bytes=300, file_delete_delay_ms=0)
    s.create_topic("t")
    lg = s.get_log("t", 0)
    for i in range(10):
        lg.append([idem([b"v%d" % i], i)], leader_epoch=2)
    old = [seg.path for seg in lg.segments]
    assert len(old) > 2
    lg.reset_to(1000)
    assert (lg.log_start_offset, lg.log_end_offset, lg.high_watermark) == (1000, 1000, 1000)
    assert lg.epochs == [] and len(lg.segments) == 1
    assert lg.read(1000, 1 << 20) == b""
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(5, 1 << 20)
    assert not any(os.path.exists(p) for p in old)
    lg.purge_deleted()
    assert sorted(os.listdir(lg.directory)) == ["00000000000000001000.log"]
    # the producer state went with the data: sequence 10 is no longer expected
    assert lg.append([idem([b"w"], 0)], leader_epoch=3).first_offset == 1000
    crash(s)
    s = open_store(tmp_path / "d")
    lg = s.get_log("t", 0)
    assert (lg.offline, lg.log_start_offset, lg.log_end_offset) == (None, 1000, 1001)
    assert lg.epochs == [(3, 1000)] and values_of(lg) == [b"w"]
    lg.reset_to(3)  # below the log start too
    assert (lg.log_start_offset, lg.log_end_offset, lg.epochs) == (3, 3, [])
    s.close()
    s = open_store(tmp_path / "d")
    assert s.get_log("t", 0).log_start_offset == s.get_log("t", 0).log_end_offset == 3
    s.close()
    with pytest.raises(InvalidRequestError):
        new_log(tmp_path / "e").reset_to(-1)


def test_a_crash_inside_reset_to_reopens_at_the_new_offset(tmp_path, monkeypatch):
    s = open_store(tmp_path / "d", segment_bytes=300)
    s.create_topic("t")
    lg = s.get_log("t", 0)
    for i in range(10):
        lg.append([batch([b"v%d" % i] * 3)], leader_epoch=1)
    lg.checkpoint()
    monkeypatch.setattr(Log, "_checkpoint_locked", lambda self, clean=False: None)
    lg.reset_to(5000)  # files renamed and created; the checkpoint never happens
    monkeypatch.undo()
    crash(s)
    s = open_store(tmp_path / "d")
    lg = s.get_log("t", 0)
    assert lg.offline is None
    assert (lg.log_start_offset, lg.log_end_offset) == (5000, 5000)
    assert lg.epochs == []
    lg.append([batch([b"x"])], leader_epoch=2)
    assert values_of(lg) == [b"x"]
    s.close()


def test_a_follower_far_behind_restarts_at_the_leaders_log_start(tmp_path):
    leader = new_log(tmp_path / "l", segment_bytes=300)
    for i in range(12):
        leader.append([batch([b"v%d" % i] * 3)], leader_epoch=1)
    leader.delete_before(leader.segments[2].base_offset)
    follower = new_log(tmp_path / "f", replicated=True, segment_bytes=300)
    follower.append_replicated(restamp(batch([b"old"]), 0, 0))
    with pytest.raises(OffsetOutOfRangeError):
        leader.read(follower.log_end_offset, 1 << 20)
    follower.reset_to(leader.log_start_offset)
    replicate(leader, follower, hint=True)
    assert files_of(follower) == files_of(leader)
    assert follower.epochs == [(1, leader.log_start_offset)]


# -- replicated mode -------------------------------------------------------------------------
def test_set_replicated_hands_the_hw_over_and_back(tmp_path):
    lg = new_log(tmp_path / "l")
    lg.append([batch([b"a"])])
    assert lg.high_watermark == 1
    lg.set_replicated(True)
    lg.append([batch([b"b"])])
    assert lg.high_watermark == 1 and lg.recovery_point == 2
    lg.set_high_watermark(2)
    assert lg.high_watermark == 2
    lg.set_high_watermark(1)  # the replication layer may also move it back (a new leader)
    lg.append([batch([b"c"])], sync=False)
    lg.set_replicated(False)  # single node again: the HW is the durable end at once
    assert lg.high_watermark == 2
    lg.flush()
    assert lg.high_watermark == 3


# -- partitions hosted one by one -------------------------------------------------------------
def test_ensure_and_drop_partition(tmp_path):
    s = open_store(tmp_path / "d")
    OPENED.append(s)
    lg = s.ensure_partition("c", 2, {"segment_bytes": 1024})
    assert s.ensure_partition("c", 2, {"segment_bytes": 1024}) is lg
    assert lg.config.segment_bytes == 1024 and lg.name == "c-2"
    topic = s.topics.get("c")
    assert (topic.partitions, topic.overrides) == (3, {"segment_bytes": 1024})
    with pytest.raises(UnknownTopicOrPartitionError):
        s.get_log("c", 0)
    lg.append([batch([b"x"])])
    p0 = s.ensure_partition("c", 0, {"segment_bytes": 1024})
    assert s.topics.get("c").partitions == 3
    with pytest.raises(TopicAlreadyExistsError):
        s.create_topic("c")
    s.close()
    OPENED.remove(s)
    s = open_store(tmp_path / "d")  # a restart opens what is hosted, no more
    OPENED.append(s)
    assert sorted(lg.name for lg in s.logs()) == ["c-0", "c-2"]
    assert s.get_log("c", 2).log_end_offset == 1 and s.get_log("c", 2).config.segment_bytes == 1024
    directory, p0_dir = s.get_log("c", 2).directory, p0.directory
    assert s.drop_partition("c", 2) is True
    assert not os.path.exists(directory)
    assert s.meta.partition_id("c-2", create=False) is None
    assert s.topics.get("c") is not None  # partition 0 is still hosted
    assert s.drop_partition("c", 2) is False
    assert s.drop_partition("c", 0) is True
    assert s.topics.get("c") is None and not os.path.exists(p0_dir)
    again = s.ensure_partition("c", 2, {})  # hosted again: a fresh, empty log
    assert again.log_end_offset == 0 and again.config.segment_bytes != 1024


def test_a_store_opened_for_a_cluster_leaves_every_hw_to_replication(tmp_path):
    from logbroker.storage.config import LogConfig, StorageConfig
    from logbroker.storage.store import Store

    config = StorageConfig(log=LogConfig(), map_size=64 << 20)
    s = Store.open(str(tmp_path / "d"), config, auto_hw=False)
    OPENED.append(s)
    s.create_topic("t")
    for lg in (s.get_log("t", 0), s.ensure_partition("u", 1, {})):
        lg.append([batch([b"a"])])
        assert lg.high_watermark == 0 and lg.recovery_point == 1
        lg.set_high_watermark(1)
    s.close()
    OPENED.remove(s)
    s = Store.open(str(tmp_path / "d"), config, auto_hw=False)
    OPENED.append(s)
    assert [lg.high_watermark for lg in s.logs()] == [1, 1]
    s.get_log("u", 1).append([batch([b"b"])])
    assert s.get_log("u", 1).high_watermark == 1


# -- a follower's crash recovery ---------------------------------------------------------------
def test_a_crashed_follower_rebuilds_epochs_and_producer_state_from_headers(tmp_path):
    leader = new_log(tmp_path / "l")
    fill_leader(leader)
    s = open_store(tmp_path / "f")
    s.create_topic("t")
    follower = s.get_log("t", 0)
    follower.set_replicated(True)
    follower.append_replicated(leader.read(0, 200))  # epoch 1 reaches LMDB with the checkpoint
    follower.checkpoint()
    replicate(leader, follower)
    assert follower.epochs == leader.epochs
    crash(s)  # no checkpoint since epoch 1
    s = open_store(tmp_path / "f")
    try:
        follower = s.get_log("t", 0)
        assert follower.offline is None and follower.log_end_offset == leader.log_end_offset
        assert follower.epochs == leader.epochs == [(1, 0), (3, 28), (4, 38)]
        assert files_of(follower) == files_of(leader)
        follower.assign_epoch(5)
        retry = follower.append([idem([b"q04"], 7), idem([b"r04"], 4, pid=8)], leader_epoch=5)
        assert retry.batches == 0 and retry.first_offset == 36
        assert follower.append([idem([b"next"], 5, pid=8)], leader_epoch=5).first_offset == 54
    finally:
        s.close()


# -- whole_batches ----------------------------------------------------------------------------
def test_whole_batches_keeps_the_complete_prefix():
    one, two = batch([b"a", b"b"]), batch([b"c"])
    both = one + two
    assert bytes(whole_batches(both)) == both
    for cut in (1, len(two) - 1, len(two) - fmt.HEADER_SIZE + 1):
        assert bytes(whole_batches(both[:-cut])) == one
    assert len(whole_batches(one[:fmt.HEADER_SIZE - 1])) == 0
    assert len(whole_batches(b"")) == 0
    assert [p for p, _ in scan_batches(whole_batches(memoryview(both)[:-1]))] == [0]
    with pytest.raises(CorruptRecordError):
        whole_batches(one + b"\xff" * fmt.HEADER_SIZE)


def test_a_follower_never_rolls_by_age(tmp_path):
    with open_store(tmp_path / "d", segment_ms=1) as store:
        store.create_topic("t", 1)
        lg = store.get_log("t", 0)
        lg.append(batch([b"a"]))
        lg.set_follower(True)
        assert not lg.roll_if_aged(lg.segments[-1].created_ms + 10_000)
        assert len(lg.segments) == 1
        lg.set_follower(False)
        assert lg.roll_if_aged(lg.segments[-1].created_ms + 10_000) and len(lg.segments) == 2
