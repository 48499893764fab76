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
