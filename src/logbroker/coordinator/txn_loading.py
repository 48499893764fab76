"""Rebuild a transaction coordinator's view of one transaction state
partition from its log: every record from the log start to the high
watermark, the newest of an id winning (a tombstone forgets it) — the same
answer before and after compaction. Chunked, yielding to the event loop
between chunks."""

from __future__ import annotations

import asyncio

from ..records.walker import split_batches
from ..storage.log import Log
from .txn_records import read_batch
from .txn_state import DEAD, TxnState

CHUNK_BYTES = 1 << 20


async def load_txns(lg: Log) -> dict[str, TxnState]:
    """The transactional ids of ``lg`` as of its high watermark."""
    txns: dict[str, TxnState] = {}
    offset, end = lg.log_start_offset, lg.high_watermark
    while offset < end:
        data = lg.read(offset, CHUNK_BYTES, upto=end)
        if not data:
            break
        for batch, header in split_batches(data):
            for st in read_batch(batch):
                if st.state == DEAD:
                    txns.pop(st.transactional_id, None)
                else:
                    txns[st.transactional_id] = st
            offset = header.base_offset + header.last_offset_delta + 1
        await asyncio.sleep(0)
    return txns
