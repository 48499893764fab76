"""Topic ids (storage/topic_ids.py): random and stored for a new topic,
derived from the name for one stored before ids existed."""

from __future__ import annotations

import msgpack

from logbroker.storage.metastore import MetaStore
from logbroker.storage.topic_ids import derived_topic_id, new_topic_id
from logbroker.storage.topics import TopicConfig, TopicStore


def test_a_topic_stored_without_an_id_gets_the_same_derived_one_everywhere(tmp_path):
    store = TopicStore(MetaStore(str(tmp_path / "meta.lmdb")))
    with store.meta.write() as txn:  # as a broker before topic ids wrote it
        txn.put(b"old", msgpack.packb({"partitions": 2, "overrides": {}}),
                db=store.meta.db("topics"))
    assert store.get("old").id == derived_topic_id("old") == TopicConfig("old", 2).id
    fresh = new_topic_id()
    store.put(TopicConfig("new", 1, {}, fresh))
    assert store.get("new").id == fresh != derived_topic_id("new")
