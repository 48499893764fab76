"""A fetch session's sweep (api/fetch_session.py) over a real store: it
looks at ``SWEEP_SLICE`` of the session's partitions each time, going on
where it stopped, so its cost per second does not grow with the session;
a partition answered with the log's offsets is not reported again, a
deleted one is."""

from __future__ import annotations

from logbroker.api import fetch_session as fsmod
from logbroker.api.fetch_session import FetchSession
from logbroker.broker.config import BrokerConfig
from logbroker.durability import DataNotifier
from logbroker.metadata.local import LocalMetadata
from logbroker.protocol.parts import FetchedPart
from logbroker.storage.store import Store


def test_the_sweep_takes_a_slice_of_the_session_each_time(tmp_path, monkeypatch):
    store = Store.open(str(tmp_path / "d"))
    try:
        store.create_topic("t", 5)
        meta = LocalMetadata(store, BrokerConfig(), None, 0)
        monkeypatch.setattr(fsmod, "SWEEP_SLICE", 2)
        notifier = DataNotifier()
        fs = FetchSession(notifier)
        assert fs.open([("t", q, 0, 1 << 20) for q in range(5)])
        assert notifier.watching == 5
        # never answered: every partition differs from what its client was told
        rounds = [fs.sweep(meta, False, now) for now in range(3)]
        assert [len(r) for r in rounds] == [2, 2, 1]
        assert sorted(tp for r in rounds for tp in r) == [("t", q) for q in range(5)]
        # answered with the logs' offsets: nothing to report any more
        lg = store.get_log("t", 0)
        fs.answered([FetchedPart("t", q, 0, "", lg.high_watermark, lg.log_start_offset, 0)
                     for q in range(5)], [b""] * 5, None, full=True)
        assert [fs.sweep(meta, False, now) for now in range(3, 6)] == [[], [], []]
        store.delete_topic("t")
        gone = [tp for now in range(6, 9) for tp in fs.sweep(meta, False, now)]
        assert sorted(gone) == [("t", q) for q in range(5)]
        fs.close()
        assert notifier.watching == 0
    finally:
        store.close()


def test_a_part_named_at_the_end_it_was_told_is_not_read_again(tmp_path):
    """A consumer's next fetch names each part the last one returned, now at
    its end: with nothing new (and no other offset moved) the session holds
    the offset without a read; a part behind its end, one whose log grew
    meanwhile and one of a deleted topic are read."""
    from logbroker.records.encoder import encode_batch

    store = Store.open(str(tmp_path / "d"))
    try:
        store.create_topic("t", 4)
        for q in range(4):
            store.get_log("t", q).append(encode_batch([1, 2], [None, None], [b"a", b"b"], {}),
                                         sync=True)
        meta = LocalMetadata(store, BrokerConfig(), None, 0)
        fs = FetchSession(DataNotifier())
        assert fs.open([("t", q, 0, 1 << 20) for q in range(4)])
        fs.answered([FetchedPart("t", q, 0, "", 2, 0, 10) for q in range(4)], [b"x"] * 4, None,
                    full=True)
        # the next fetch: parts 0-2 at their end (2), part 3 still behind it
        assert fs.update([("t", 0, 2, 1 << 20), ("t", 1, 2, 1 << 20), ("t", 2, 2, 1 << 20),
                          ("t", 3, 1, 1 << 20)], [])
        store.get_log("t", 1).append(encode_batch([3], [None], [b"c"], {}), sync=True)
        named = dict.fromkeys(("t", q) for q in range(4))
        assert list(fs.to_read(named, meta, False)) == [("t", 1), ("t", 3)]
        # read committed compares the LSO it was told: never told one (-2), so read
        assert list(fs.to_read(named, meta, True)) == [("t", q) for q in range(4)]
        store.delete_topic("t")
        assert list(fs.to_read(named, meta, False)) == [("t", q) for q in range(4)]
    finally:
        store.close()
