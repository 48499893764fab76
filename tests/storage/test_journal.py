"""The write-ahead journal (storage/journal.py) on real logs: one write makes
many logs durable, and a power cut that loses every segment write not yet
synced (the files cut back to their stored recovery points) loses no
record the journal acknowledged; cuts void older entries, a checkpoint
retires the files, a topic made again under a deleted one's name gets
none of its entries, and the entry codec stops at a torn tail."""

from __future__ import annotations

import os

import pytest

from logbroker.records import build_batch
from logbroker.storage import journal_format as jf
from logbroker.storage.journal import Journal
from logbroker.storage.segments import JOURNAL_HOLD_BYTES
from tests.support.fixtures import batch, crash, open_store, values_of


def power_cut(store) -> None:
    """A crash that also loses what only the page cache held: every log's
    active segment cut back to its stored (fsynced) recovery point."""
    cuts = []
    for lg in store.logs():
        rp = lg.flushed_point
        if rp.segment == lg.active.base_offset:
            cuts.append((lg.active.path, rp.position))
    crash(store)
    for path, position in cuts:
        with open(path, "r+b") as fh:
            fh.truncate(position)


def filled(store, n: int, topic: str = "j", rounds: int = 1) -> list:
    if topic not in [t.name for t in store.topics.list()]:
        store.create_topic(topic, partitions=n)
    logs = [store.get_log(topic, p) for p in range(n)]
    for r in range(rounds):
        for p, lg in enumerate(logs):
            lg.append([batch([b"%s-%d-%d" % (topic.encode(), p, r)])], sync=False)
    return logs


def test_one_write_makes_many_logs_durable_and_a_power_cut_keeps_them(tmp_path):
    store = open_store(tmp_path)
    logs = filled(store, 12, rounds=3)
    commits = store.journal.commits
    assert all(err is None for _, err in store.journal.flush(logs))
    assert store.journal.commits == commits + 1  # one write and one fdatasync for all 12
    for lg in logs:
        assert lg.recovery_point == lg.log_end_offset == 3 == lg.high_watermark
        assert lg.flushed_point.offset == 0  # the files are not synced: the journal holds it
    power_cut(store)
    store = open_store(tmp_path)
    try:
        for p in range(12):
            lg = store.get_log("j", p)
            assert values_of(lg) == [b"j-%d-%d" % (p, r) for r in range(3)]
            assert lg.high_watermark == 3 and lg.flushed_point.offset == 3
        assert os.listdir(store.journal.directory) == []  # replayed, made durable, retired
    finally:
        store.close()


def test_without_the_journal_a_power_cut_loses_the_unsynced_tail(tmp_path):
    """The check above can fail: the same cut without the journal's write loses the records."""
    store = open_store(tmp_path)
    filled(store, 3)
    power_cut(store)
    store = open_store(tmp_path)
    try:
        assert [store.get_log("j", p).log_end_offset for p in range(3)] == [0, 0, 0]
    finally:
        store.close()


def test_a_kill_without_power_cut_replays_nothing_twice(tmp_path):
    store = open_store(tmp_path)
    logs = filled(store, 4, rounds=2)
    store.journal.flush(logs)
    filled(store, 4, rounds=1)  # more, not journaled: the page cache keeps them
    crash(store)
    store = open_store(tmp_path)
    try:
        for p in range(4):
            assert values_of(store.get_log("j", p)) == [b"j-%d-0" % p, b"j-%d-1" % p,
                                                        b"j-%d-0" % p]
    finally:
        store.close()


def test_a_cut_voids_the_older_entries(tmp_path):
    store = open_store(tmp_path)
    [lg] = filled(store, 1, rounds=3)
    store.journal.flush([lg])
    lg.truncate_to(1)  # a follower's divergence: offsets 1 and 2 go, durably
    lg.append([batch([b"new-1"]), batch([b"new-2"])], sync=False)
    store.journal.flush([lg])
    power_cut(store)
    store = open_store(tmp_path)
    try:
        assert values_of(store.get_log("j", 0)) == [b"j-0-0", b"new-1", b"new-2"]
    finally:
        store.close()


def test_a_write_racing_a_cut_drops_what_it_took(tmp_path):
    store = open_store(tmp_path)
    [lg] = filled(store, 1, rounds=2)
    generation, held = lg.journal_take()  # taken ...
    lg.truncate_to(0)  # ... then cut before it is written
    store.journal._write([(lg, generation, held)])
    assert lg.recovery_point == 0
    power_cut(store)
    store = open_store(tmp_path)
    try:
        assert store.get_log("j", 0).log_end_offset == 0
    finally:
        store.close()


def test_a_checkpoint_retires_the_files_and_moves_the_recovery_points(tmp_path):
    store = open_store(tmp_path)
    logs = filled(store, 5)
    store.journal.flush(logs)
    assert os.listdir(store.journal.directory)
    assert store.journal.checkpoint() == 5
    assert os.listdir(store.journal.directory) == []
    assert [lg.flushed_point.offset for lg in logs] == [1] * 5
    power_cut(store)
    store = open_store(tmp_path)
    try:
        assert [store.get_log("j", p).log_end_offset for p in range(5)] == [1] * 5
    finally:
        store.close()


def test_a_topic_made_again_under_a_deleted_ones_name_gets_none_of_its_entries(tmp_path):
    store = open_store(tmp_path)
    store.journal.flush(filled(store, 2, rounds=2))
    store.delete_topic("j")
    store.create_topic("j", partitions=2)
    lg = store.get_log("j", 0)
    lg.append([batch([b"fresh"])], sync=False)
    store.journal.flush([lg])
    power_cut(store)
    store = open_store(tmp_path)
    try:
        assert values_of(store.get_log("j", 0)) == [b"fresh"]
        assert store.get_log("j", 1).log_end_offset == 0
    finally:
        store.close()


def test_a_log_past_its_hold_is_synced_through_its_file(tmp_path):
    store = open_store(tmp_path)
    store.create_topic("big")
    lg = store.get_log("big", 0)
    value = b"x" * 100_000
    while lg.log_end_offset * len(value) <= JOURNAL_HOLD_BYTES:
        lg.append([build_batch([(value, None, (), 1)])], sync=False)
    assert lg.journal_take()[1] is None  # let go of: only a file sync covers it
    assert store.journal.flush([lg]) == [(lg, None)]
    assert lg.flushed_point.offset == lg.log_end_offset
    store.close()


def test_the_codec_stops_at_a_torn_or_damaged_tail():
    payload = batch([b"a", b"b"])
    first = jf.data_head(7, jf.name_crc("t-0"), 0, 0, 2, [payload], len(payload)) + payload
    second = jf.cut_entry(7, jf.name_crc("t-0"), 1)
    whole = first + second
    entries, end = jf.decode(whole)
    assert end == len(whole)
    assert [(e.kind, e.pid, e.base, e.end, bytes(e.payload)) for e in entries] == [
        (jf.DATA, 7, 0, 2, payload), (jf.CUT, 7, 0, 0, b"")]
    for cut in range(len(first), len(whole)):
        entries, end = jf.decode(whole[:cut])
        assert (len(entries), end) == (1, len(first)), cut
    damaged = bytearray(whole)
    damaged[len(first) - 1] ^= 1  # the payload's last byte: the first entry's CRC fails
    assert jf.decode(bytes(damaged)) == ([], 0)


def test_a_torn_file_replays_its_whole_entries(tmp_path):
    store = open_store(tmp_path)
    logs = filled(store, 2)
    store.journal.flush(logs[:1])
    store.journal.flush(logs[1:])
    [name] = os.listdir(store.journal.directory)
    path = os.path.join(store.journal.directory, name)
    power_cut(store)
    with open(path, "r+b") as fh:  # the second write torn: it was never acknowledged
        fh.truncate(os.path.getsize(path) - 3)
    store = open_store(tmp_path)
    try:
        assert [store.get_log("j", p).log_end_offset for p in range(2)] == [1, 0]
    finally:
        store.close()


@pytest.mark.parametrize("on", [True, False])
def test_the_journal_can_be_turned_off_and_its_files_still_replay(tmp_path, on):
    from logbroker.storage.config import LogConfig, StorageConfig
    from logbroker.storage.store import Store

    store = open_store(tmp_path)
    store.journal.flush(filled(store, 3))
    power_cut(store)
    store = Store.open(str(tmp_path), StorageConfig(log=LogConfig(), map_size=64 << 20,
                                                    journal=on))
    try:
        assert [store.get_log("j", p).log_end_offset for p in range(3)] == [1] * 3
        assert (store.journal is not None) is on
    finally:
        store.close()


def test_an_idle_journal_writes_nothing(tmp_path):
    journal = Journal(str(tmp_path))
    try:
        assert journal.flush([]) == [] and journal.commits == 0
        assert journal.checkpoint() == 0 and os.listdir(journal.directory) == []
    finally:
        journal.close()


def test_a_log_restarted_inside_a_batch_gets_that_batch_back(tmp_path):
    """Its start was moved inside a journaled batch, then the power cut
    took the batch: recovery restarts the log empty at its start, and the
    replay puts the batch back whole below it (the start stays)."""
    store = open_store(tmp_path)
    store.create_topic("j")
    lg = store.get_log("j", 0)
    lg.append([batch([b"first", b"second"])], sync=False)
    store.journal.flush([lg])
    lg.delete_before(1)
    power_cut(store)
    store = open_store(tmp_path)
    try:
        lg = store.get_log("j", 0)
        assert (lg.log_start_offset, lg.log_end_offset) == (1, 2)
        assert values_of(lg, 1) == [b"second"]
    finally:
        store.close()


def test_a_file_in_the_journals_place_is_a_clear_error(tmp_path):
    from logbroker.errors import StorageError

    (tmp_path / "journal").write_text("not a directory")
    with pytest.raises(StorageError, match="journal"):
        open_store(tmp_path)
    (tmp_path / "journal").unlink()
    open_store(tmp_path).close()  # the lock and LMDB were released
