"""Consumer-side state: positions per partition and fetched, undecoded data.

No I/O and no asyncio: the fetch loop (``fetcher.py``) calls ``plan()`` and
``absorb()`` on the I/O side; ``take()`` runs in the thread that polls and
decodes there (CRC check + bulk record decoding), so the I/O side only walks
batch headers. One lock guards the shared state; decoding happens outside it.

Positions: ``position`` is the next offset ``poll()`` returns (what
``commit()`` commits); ``fetch_pos`` the next offset to fetch (ahead of
``position`` by what is buffered). ``seek`` sets both and bumps the
partition's generation ``gen``, which discards buffered and in-flight data
fetched for the old position.

Corruption contract: a batch whose CRC (checked in ``take``) or header
(checked in ``absorb``) is bad raises ``CorruptRecordError`` naming topic,
partition and offset, after every record before it was returned. The
partition's position stays at the bad batch, so every later poll raises
again, until the application seeks past it.
"""

from __future__ import annotations

import threading
from collections import deque

from ..errors import CorruptRecordError, LogbrokerError
from ..records import decode_batch, scan_batches
from .records import ConsumerRecord, batch_records


class PartitionState:
    __slots__ = ("topic", "partition", "position", "fetch_pos", "gen", "reset", "error",
                 "high_watermark", "log_start", "stalled")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition
        self.position: "int | None" = None  # None: to be resolved (committed / reset policy)
        self.fetch_pos: "int | None" = None
        self.gen = 0
        self.reset: "str | None" = None  # after OFFSET_OUT_OF_RANGE: the policy to apply
        self.error: "LogbrokerError | None" = None  # raised by poll until a seek
        self.high_watermark = -1
        self.log_start = -1
        self.stalled = False  # a corrupt batch is buffered: fetch nothing more

    def seek(self, offset: "int | None") -> None:
        self.position = self.fetch_pos = offset
        self.gen += 1
        self.error, self.reset, self.stalled = None, None, False


class _Chunk:
    __slots__ = ("state", "gen", "data", "batches", "next", "error", "nbytes")

    def __init__(self, state, gen, data, batches, error, nbytes) -> None:
        self.state, self.gen, self.data, self.batches = state, gen, data, batches
        self.next, self.error, self.nbytes = 0, error, nbytes


class FetchBuffer:
    def __init__(self, prefetch_bytes: int) -> None:
        self.lock = threading.Lock()
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.prefetch_bytes = prefetch_bytes
        self.buffered = 0
        self._chunks: deque[_Chunk] = deque()
        self._current: "tuple | None" = None  # (state, gen, records, index) being returned
        self._deferred: "tuple | None" = None  # (error, state, gen): raise at the next take

    # -- assignment and positions (caller's thread) ---------------------------------------------
    def assign(self, tps) -> None:
        with self.lock:
            old = self.states
            self.states = {tp: old.get(tp) or PartitionState(*tp) for tp in tps}
            for tp, st in old.items():
                if tp not in self.states:
                    st.gen += 1  # drop what is buffered or in flight for it

    def state(self, topic: str, partition: int) -> PartitionState:
        st = self.states.get((topic, partition))
        if st is None:
            raise ValueError(f"{topic}[{partition}] is not assigned to this consumer")
        return st

    def seek(self, topic: str, partition: int, offset: "int | None") -> None:
        if offset is not None and (type(offset) is not int or offset < 0):
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        with self.lock:
            self.state(topic, partition).seek(offset)

    # -- I/O side -----------------------------------------------------------------------------------
    def plan(self, max_partition_bytes: int) -> list:
        """Fetch parts ``(topic, partition, offset, max_bytes)`` and their
        generations; nothing while ``prefetch_bytes`` are buffered."""
        with self.lock:
            if self.buffered >= self.prefetch_bytes:
                return []
            return [((st.topic, st.partition, st.fetch_pos, max_partition_bytes), st.gen)
                    for st in self.states.values()
                    if st.fetch_pos is not None and st.error is None and not st.stalled]

    def absorb(self, parts: list, gens: list, payloads) -> list:
        """Buffer one fetch response's data; returns ``(state, error)`` for
        parts that failed (for the fetch loop to handle)."""
        failed = []
        with self.lock:
            for (topic, partition, err, msg, hw, log_start, nbytes), gen, data in zip(
                    parts, gens, payloads):
                st = self.states.get((topic, partition))
                if st is None or st.gen != gen:
                    continue  # seeked or unassigned meanwhile
                st.high_watermark, st.log_start = hw, log_start
                if err:
                    failed.append((st, err, msg))
                elif nbytes:
                    self._add(st, memoryview(data), nbytes)
        return failed

    def _add(self, st: PartitionState, data: memoryview, nbytes: int) -> None:
        batches, error, offset = [], None, st.fetch_pos
        try:  # a slice may end inside its last batch: the walk stops before it
            for pos, header in scan_batches(data, 0, nbytes, verify=False):
                batches.append((pos, header.size, header.base_offset, header.next_offset))
                offset = header.next_offset
        except CorruptRecordError as exc:
            error = _corrupt(st, offset, exc)
        if not batches and error is None:
            error = _corrupt(st, offset, CorruptRecordError(
                f"the broker returned {nbytes} bytes without a whole batch"))
        if batches:
            st.fetch_pos = offset
        st.stalled = error is not None
        self._chunks.append(_Chunk(st, st.gen, data, batches, error, nbytes))
        self.buffered += nbytes

    # -- caller's side ------------------------------------------------------------------------------
    def take(self, max_records: int, check_crcs: bool = True) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records in order, advancing
        positions; raises ``CorruptRecordError`` as the module says."""
        deferred, self._deferred = self._deferred, None
        if deferred is not None and deferred[1].gen == deferred[2]:
            raise deferred[0]
        out: list = []
        while len(out) < max_records:
            cur = self._current
            if cur is not None:
                st, gen, records, i = cur
                if st.gen == gen and i < len(records):
                    piece = records[i:i + max_records - len(out)]
                    out += piece
                    self._current = (st, gen, records, i + len(piece))
                    st.position = piece[-1].offset + 1
                    continue
                self._current = None
            try:
                if not self._next_batch(check_crcs):
                    break
            except CorruptRecordError as exc:
                if not out:
                    raise
                st = self.states.get((exc.topic, exc.partition))
                self._deferred = (exc, st, st.gen if st else -1)  # raised by the next take
                break
        return out

    def _next_batch(self, check_crcs: bool) -> bool:
        """Decode the next buffered batch into ``_current``; False when none."""
        while True:
            with self.lock:
                if not self._chunks:
                    return False
                chunk = self._chunks[0]
                st = chunk.state
                if st.gen != chunk.gen or chunk.next >= len(chunk.batches):
                    if st.gen == chunk.gen and chunk.error is not None:
                        self._raise_at(st, chunk.error)
                    self._chunks.popleft()
                    self.buffered -= chunk.nbytes
                    continue
                pos, size, base, next_offset = chunk.batches[chunk.next]
                chunk.next += 1
                start = st.position
            if next_offset <= start:
                continue  # records before the position (a seek inside a batch)
            try:
                batch = decode_batch(chunk.data[pos:pos + size], verify=check_crcs)
                records = batch_records(batch, st.topic, st.partition, start)
            except CorruptRecordError as exc:
                with self.lock:
                    if st.gen == chunk.gen:
                        self._raise_at(st, _corrupt(st, max(base, start), exc, next_offset))
                continue
            self._current = (st, chunk.gen, records, 0)
            return True

    def _raise_at(self, st: PartitionState, error: CorruptRecordError) -> None:
        """Refetch from the position next time (lock held), then raise."""
        st.seek(st.position)
        raise error

    def errors(self) -> "LogbrokerError | None":
        """A partition error poll must raise (first one), if any."""
        for st in self.states.values():
            if st.error is not None:
                return st.error
        return None

    def clear(self) -> None:
        with self.lock:
            self._chunks.clear()
            self._current = None
            self.buffered = 0


def _corrupt(st: PartitionState, offset, exc: CorruptRecordError,
             next_offset: "int | None" = None) -> CorruptRecordError:
    """The error a consumer raises; names where reading can resume (the next
    batch's offset) when the damaged batch's header is intact."""
    resume = f"; the next readable offset is {next_offset} (seek there to skip it)" \
        if next_offset is not None else ""
    err = CorruptRecordError(f"{st.topic}[{st.partition}] offset {offset}: {exc.message}{resume}")
    err.topic, err.partition, err.offset, err.next_offset = st.topic, st.partition, offset, next_offset
    return err
