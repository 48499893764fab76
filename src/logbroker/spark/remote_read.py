"""A task's read from running brokers (``option("bootstrap", ...)``):
``fetch_batches(split)`` sends Fetch requests to the partition's leader from
``start`` until ``end``; the response carries segment bytes, walked and
CRC-checked with the same code as the files (``scan_batches``,
``decode_batch(verify=True)``), so the Arrow columns are built the same way.
A task follows a leader change (metadata refresh, retry) until
``REQUEST_TIMEOUT_MS`` passes without progress, then fails naming the
partition and offset; it never returns a record from beyond the planned
range (remote.py plans it)."""

from __future__ import annotations

import asyncio
import time
from typing import Iterator

from ..client.net.cluster_meta import reroutes
from ..client.net.routing import Router
from ..client.settings import TlsSettings, client_options
from ..errors import LogbrokerError, OffsetOutOfRangeError, for_code
from ..protocol import messages as m
from ..records import format as fmt
from ..records.decoder import RecordBatch, decode_batch
from ..records.txn_filter import BatchFilter
from ..records.walker import scan_batches
from .options import SparkSourceError, Split, data_loss

FETCH_BYTES = 8 << 20  # per Fetch; doubled (to MAX_FETCH_BYTES) for a batch bigger than that
MAX_FETCH_BYTES = 64 << 20
REQUEST_TIMEOUT_MS = 30_000
ATTEMPT_S = 3.0  # s for one Fetch attempt (connecting included)
RETRY_PAUSE = 0.05  # s between attempts while a partition has no leader (doubling to 1 s)


class _SplitFetcher:
    """Fetches of one split from its partition's leader, on a private loop."""

    def __init__(self, split: Split) -> None:
        self.split, self.tp = split, (split.topic, split.partition)
        self.aborted: tuple = ()  # the last answer's aborted (producer id, first offset) pairs
        self.loop = asyncio.new_event_loop()
        opts = client_options(split.bootstrap, "logbroker-spark", REQUEST_TIMEOUT_MS, 5_000,
                              tls=TlsSettings(**dict(split.client)))
        self.router = self.loop.run_until_complete(self._router(opts))

    async def _router(self, opts) -> Router:
        router = Router(opts)
        router.track([self.split.topic])
        return router

    def close(self) -> None:
        try:
            self.loop.run_until_complete(self.router.aclose())
        finally:
            self.loop.close()

    def fetch(self, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        """``(segment bytes from offset, high watermark, log start)``; with the
        split's read_committed, fetched with isolation 1 (bytes up to the last
        stable offset; ``aborted`` then holds the answer's aborted pairs)."""
        return self.loop.run_until_complete(self._fetch(offset, max_bytes))

    async def _fetch(self, offset: int, max_bytes: int) -> tuple[bytes, int, int]:
        topic, partition = self.tp
        deadline = time.monotonic() + REQUEST_TIMEOUT_MS / 1000
        pause, last, stale = RETRY_PAUSE, None, False
        while time.monotonic() < deadline:
            leader = None
            try:
                if stale or self.tp not in self.router.cache.leaders:
                    await self.router.refresh(force=True)  # paced by the router
                leader = self.router.cache.leaders.get(self.tp)
                if leader is not None:  # a short try per attempt: a dead leader is asked again
                    resp = await self.router.call(leader, m.Fetch(  # only after a refresh
                        max_wait_ms=0, min_bytes=0, max_bytes=max_bytes,
                        parts=((topic, partition, offset, max_bytes),),
                        isolation=1 if self.split.read_committed else 0),
                        timeout=min(ATTEMPT_S, max(deadline - time.monotonic(), 0.1)))
                    _, _, code, message, hw, lso, _ = resp.parts[0]
                    if not code:
                        self.aborted = resp.txn[0].aborted if resp.txn else ()
                        return (resp.payload[0] if resp.payload else b""), hw, lso
                    last = for_code(code)(message)
                    if isinstance(last, OffsetOutOfRangeError) or not reroutes(last):
                        raise last
            except LogbrokerError as exc:
                if isinstance(exc, OffsetOutOfRangeError) or not (exc.retriable or reroutes(exc)):
                    raise
                last = exc
            stale = True
            self.router.invalidate([self.tp], broker=leader)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)
        raise SparkSourceError(f"{topic}-{partition}: no answer for offset {offset} from its "
                               f"leader within {REQUEST_TIMEOUT_MS / 1000:.0f} s (last: {last})")


def fetch_batches(split: Split) -> Iterator[tuple[fmt.BatchHeader, RecordBatch]]:
    """CRC-checked batches overlapping [split.start, split.end) from the
    partition's leader (the remote twin of ``scan.iter_batches``)."""
    fetcher = _SplitFetcher(split)
    try:
        yield from _walk(fetcher, split)
    finally:
        fetcher.close()


def _walk(fetcher: _SplitFetcher, split: Split) -> Iterator[tuple[fmt.BatchHeader, RecordBatch]]:
    name, fail = f"{split.topic}-{split.partition}", split.fail_on_data_loss
    expect, max_bytes = split.start, FETCH_BYTES
    hide = BatchFilter(() if split.read_committed else None)  # aborted pairs come with each answer
    stalled_since = None
    while expect < split.end:
        data = view = batch = None  # the last answer's buffer is free for the next one
        try:
            data, hw, lso = fetcher.fetch(expect, max_bytes)
            hide.extend(fetcher.aborted)
        except OffsetOutOfRangeError as exc:
            data_loss(fail, f"{name} offsets from {expect} are gone ({exc.message})")
            return
        if expect < lso:
            data_loss(fail, f"{name} offsets [{expect}, {lso}) were deleted by retention")
            expect = lso
            continue
        moved = False
        view = memoryview(data)
        for pos, header in scan_batches(view):
            if header.next_offset <= expect:
                continue
            if header.base_offset >= split.end:
                return
            if header.base_offset > expect and not split.compacted:
                data_loss(fail, f"{name} offsets [{expect}, {header.base_offset}) are missing")
            if hide.skip_header(header):  # a marker, or an aborted transaction's batch
                expect, moved = header.next_offset, True
                if expect >= split.end:
                    return
                continue
            batch = decode_batch(view[pos:pos + header.size], verify=True, header=header)
            yield header, batch
            expect, moved = header.next_offset, True
            if expect >= split.end:
                return
        if moved:
            stalled_since, max_bytes = None, FETCH_BYTES
            continue
        if data and max_bytes < MAX_FETCH_BYTES:  # a batch bigger than what we asked for
            max_bytes *= 2
            continue
        # nothing at expect yet: a new leader whose high watermark is catching up
        now = time.monotonic()
        stalled_since = stalled_since or now
        if now - stalled_since > REQUEST_TIMEOUT_MS / 1000:
            raise SparkSourceError(f"{name}: offset {expect} not readable from the leader within "
                                   f"{REQUEST_TIMEOUT_MS / 1000:.0f} s (its high watermark: {hw}, "
                                   f"planned end {split.end})")
        time.sleep(RETRY_PAUSE)
