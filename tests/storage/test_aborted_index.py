"""The aborted-transaction index (storage/aborted_index.py) over a real
LMDB file: its search against a brute-force model, rows in LMDB and pending
alike, truncation and the log start moving."""

from __future__ import annotations

import random

from logbroker.storage.aborted_index import AbortedIndex
from logbroker.storage.metastore import MetaStore
from logbroker.storage.txn_state import TxnState


def model(aborted, start, end):
    return sorted(((t.producer_id, t.first_offset) for t in aborted
                   if t.last_offset >= start and t.first_offset < end), key=lambda x: (x[1], x[0]))


def test_search_matches_a_model_through_persists_truncation_and_retention(tmp_path):
    meta = MetaStore(str(tmp_path / "m.lmdb"), map_size=16 << 20)
    rng = random.Random(5)
    idx, state, everything = AbortedIndex(meta, 1), TxnState(), []
    offset = 0
    for step in range(600):
        pid = rng.randrange(6)
        if pid in state.open and rng.random() < 0.4:
            txn = state.on_marker(pid, 0, rng.random() < 0.3, 0, offset)
            if txn is not None:
                idx.add(txn)
                everything.append(txn)
        else:
            state.on_transactional(pid, 0, offset)
        offset += 1
        if step % 97 == 0:
            with meta.write() as w:
                idx.persist(w, offset)
        if step % 50 == 0:
            for _ in range(20):
                a = rng.randrange(offset + 1)
                b = rng.randrange(a, offset + 2)
                assert idx.search(a, b) == model(everything, a, b), (a, b)
    assert len(everything) > 20
    long_one = max(everything, key=lambda t: t.last_offset - t.first_offset)
    assert (long_one.producer_id, long_one.first_offset) in idx.search(long_one.first_offset,
                                                                      long_one.first_offset + 1)
    cut = offset // 2
    idx.truncate(cut)
    everything = [t for t in everything if t.last_offset < cut]
    assert idx.search(0, offset) == model(everything, 0, offset)
    idx.delete_before(cut // 2)
    everything = [t for t in everything if t.last_offset >= cut // 2]
    with meta.write() as w:
        idx.persist(w, cut)
    again = AbortedIndex(meta, 1)
    assert again.covered() == cut
    for a, b in [(0, cut), (cut // 3, cut // 2), (cut // 2, cut)]:
        assert again.search(a, b) == idx.search(a, b) == model(everything, a, b)
    meta.close()
