"""What an idle partition costs in the broker's heap (issue 32: 50,000
partitions in <= 300 MB). Its objects have no instance dicts, its flusher
shares a striped condition, its producer state is tuples; an empty
partition held ~4.3 KB of Python objects before, ~2.1 KB now."""

from __future__ import annotations

import gc
import tracemalloc

from logbroker.storage.config import StorageConfig
from logbroker.storage.store import Store

PARTITIONS = 2000
BYTES_EACH = 2800  # Python objects per empty partition, at most


def test_an_empty_partition_holds_a_few_kilobytes_of_objects(tmp_path):
    store = Store.open(str(tmp_path / "d"), StorageConfig())
    try:
        store.create_topic("warm", 10)  # first-use caches and imports out of the figure
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            store.create_topic("t", PARTITIONS)
            gc.collect()
            each = (tracemalloc.get_traced_memory()[0] - before) / PARTITIONS
        finally:
            tracemalloc.stop()
        assert 0 < each <= BYTES_EACH, f"{each:.0f} B per empty partition"
    finally:
        store.close()
