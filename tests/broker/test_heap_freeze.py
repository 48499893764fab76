"""The broker keeps its long-lived state out of the cyclic GC's full
collections (decision 104): the logs a topic's creation makes are frozen
slice by slice (``gc.freeze``), so a full collection while serving walks
only what came after (at 10,000 partitions they had taken up to 280 ms of
the event loop's GIL each)."""

from __future__ import annotations

import asyncio
import gc
from concurrent.futures import ThreadPoolExecutor

from logbroker.metadata.local import SLICE, create_in_slices


def test_the_partitions_a_creation_makes_leave_the_full_collections(store_factory):
    s = store_factory()
    made = s.begin_topic("frozen", SLICE * 2, {})
    executor = ThreadPoolExecutor(1)
    gc.unfreeze()
    try:
        asyncio.run(create_in_slices(s, made, executor))
        frozen = gc.get_freeze_count()
        log = s.get_log("frozen", SLICE * 2 - 1)
        assert frozen > 0 and log.log_end_offset == 0
        for generation in (0, 1, 2):  # in the permanent one, which no collection walks
            assert not any(o is log for o in gc.get_objects(generation))
    finally:
        gc.unfreeze()
        executor.shutdown()
