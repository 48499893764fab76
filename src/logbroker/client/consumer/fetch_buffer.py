"""Consumer-side state: positions per partition and fetched, undecoded data.

No I/O and no asyncio: the fetch loop (``fetcher.py``) calls ``plan()`` and
``absorb()`` on the I/O side; ``take()`` runs in the thread that polls and
decodes there (CRC check + bulk record decoding), so the I/O side only walks
batch headers. One lock guards the shared state; decoding happens outside it.

Positions: ``position`` is the next offset ``poll()`` returns (what
``commit()`` commits); ``fetch_pos`` the next offset to fetch (ahead of
``position`` by what is buffered). ``seek`` sets both and bumps the
partition's generation ``gen``, which discards buffered and in-flight data
fetched for the old position. A partition reset to either end (``earliest``
/ ``latest``, no committed offset) is fetched at EARLIEST / LATEST with no
position yet (``fetch_from_end``): the offset the answer says it read from
(``FetchResponse.resolved``) becomes its position.

Corruption contract: a batch whose CRC (checked in ``take``) or header
(checked in ``absorb``) is bad raises ``CorruptRecordError`` naming topic,
partition and offset, after every record before it was returned. The
partition's position stays at the bad batch, so every later poll raises
again, until the application seeks past it.

Transactions (records/txn_filter.py): control batches are never returned, and under
read_committed neither are aborted transactions' batches (by the fetch
answer's ``txn`` list); the position moves past them as past records, so
``position()`` and ``commit()`` never point at a marker the application
would wait on.
"""

from __future__ import annotations

import threading
from collections import deque

from ...errors import CorruptRecordError, LogbrokerError
from ...protocol import gc_pause
from ...records import format as fmt
from ...records.walker import scan_fields
from .records import ConsumerRecord, batches_into
from ...records.txn_filter import BatchFilter

_BASE, _LAST_DELTA = fmt.F_BASE_OFFSET, fmt.F_LAST_OFFSET_DELTA  # read_fields indexes
_UNCOMMITTED = BatchFilter()  # read_uncommitted skips control batches only: one filter serves all


class PartitionState:
    """One assigned partition's positions. Every change to what fetching it
    needs (positions, generation, error, stall) goes through ``seek``,
    ``fail`` or the buffer's methods, which mark it in ``changes`` (its
    buffer's ``changed``): the fetcher looks only at marked states
    (fetcher.py), so its work per fetch is O(partitions that changed)."""

    __slots__ = ("topic", "partition", "position", "fetch_pos", "gen", "reset", "error",
                 "high_watermark", "log_start", "stalled", "last_stable_offset", "changes",
                 "unresolved")

    def __init__(self, topic: str, partition: int, changes: "dict | None" = None,
                 unresolved: "dict | None" = None) -> None:
        self.changes = {} if changes is None else changes
        # its buffer's states that may lack a position (the fetcher resolves those only)
        self.unresolved = {} if unresolved is None else unresolved
        self.unresolved[self] = None
        self.topic, self.partition = topic, partition
        self.position: "int | None" = None  # None: to be resolved (committed / reset policy)
        self.fetch_pos: "int | None" = None
        self.gen = 0
        self.reset: "str | None" = None  # after OFFSET_OUT_OF_RANGE: the policy to apply
        self.error: "LogbrokerError | None" = None  # raised by poll until a seek
        self.high_watermark = -1
        self.log_start = -1
        self.stalled = False  # a corrupt batch is buffered: fetch nothing more
        self.last_stable_offset = -1  # read_committed: the LSO of the last answer

    def seek(self, offset: "int | None") -> None:
        self.position = self.fetch_pos = offset
        self.gen += 1
        self.error, self.reset, self.stalled = None, None, False
        self.changes[self] = None
        if offset is None:
            self.unresolved[self] = None

    def refetch(self) -> None:
        """Drop what is buffered or in flight and fetch again from the
        position (awaiting a fetch: from the same end, its reset kept)."""
        if self.position is not None:
            self.seek(self.position)
        else:
            self.gen += 1
            self.changes[self] = None

    def fetch_from_end(self, spec: int) -> None:
        """Resolve the position by fetching at ``spec`` (EARLIEST or LATEST):
        the broker reads from the log start or the HW (LSO read committed)
        and the offset its answer names becomes the position
        (``FetchBuffer.absorb``), with no ListOffsets before it."""
        self.fetch_pos = spec
        self.changes[self] = None

    def fail(self, exc: LogbrokerError) -> None:
        """Stop fetching: ``poll`` raises ``exc`` until a seek."""
        self.error = exc
        self.changes[self] = None

    @property
    def fetchable(self) -> bool:
        return self.fetch_pos is not None and self.error is None and not self.stalled


class _Chunk:
    """One partition's data of one fetch answer: ``batches`` lists the whole
    batches as ``(position, header fields)``; ``next`` the first not decoded
    yet; ``error`` is raised after them (a bad header ended the walk)."""

    __slots__ = ("state", "gen", "data", "bytes", "batches", "next", "error", "nbytes", "filter")

    def __init__(self, state, gen, data, batches, error, nbytes, filter) -> None:
        self.state, self.gen, self.data, self.batches = state, gen, data, batches
        self.next, self.error, self.nbytes, self.bytes = 0, error, nbytes, None
        self.filter = filter  # BatchFilter: the batches not for the application


class FetchBuffer:
    def __init__(self, prefetch_bytes: int, read_committed: bool = False) -> None:
        self.read_committed = read_committed
        self.lock = threading.Lock()
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.changed: dict[PartitionState, None] = {}  # states the fetcher has to look at again
        self.unresolved: dict[PartitionState, None] = {}  # states that may lack a position
        self.prefetch_bytes = prefetch_bytes
        self.buffered = 0
        self._chunks: deque[_Chunk] = deque()
        self._current: "tuple | None" = None  # (state, gen, records, index) being returned
        self._deferred: "tuple | None" = None  # (error, state, gen): raise at the next take
        self._failing: "PartitionState | None" = None  # a state with an error, if any

    # -- assignment and positions (caller's thread) ---------------------------------------------
    def assign(self, tps) -> None:
        gc_pause.pause()  # 10,000 long-lived states: no collection meanwhile would free any
        try:
            with self.lock:
                old, changed = self.states, self.changed
                self.states = {tp: old.get(tp) or PartitionState(*tp, changed, self.unresolved)
                               for tp in tps}
                for tp, st in self.states.items():
                    if old.get(tp) is not st:
                        changed[st] = None
                for tp, st in old.items():
                    if tp not in self.states:
                        st.gen += 1  # drop what is buffered or in flight for it
                        changed[st] = None
        finally:
            gc_pause.resume()

    def without_position(self) -> list:
        """The assigned states without a position and without an error, in
        O(states that lost their position since they were last found with
        one), not O(assigned): the fetch loop asks at every turn (lock held
        by the caller)."""
        unresolved, states, out = self.unresolved, self.states, []
        for st in list(unresolved):
            if st.position is not None or states.get((st.topic, st.partition)) is not st:
                del unresolved[st]  # resolved, or no longer assigned
            elif st.error is None and st.fetch_pos is None:  # (else a fetch resolves it)
                out.append(st)
        return out

    def take_changed(self) -> list:
        """The states changed since the last call (lock held by the caller)."""
        out = list(self.changed)
        self.changed.clear()
        return out

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

    def reset(self, tps, policy: str) -> None:
        """Forget the positions of ``tps`` (assigned pairs) and resolve them
        by ``policy`` ("earliest" / "latest") when the fetch loop or
        ``position()`` next resolves positions, skipping committed offsets."""
        with self.lock:
            for tp in tps:
                st = self.states[tp]
                st.seek(None)
                st.reset = policy

    # -- I/O side -----------------------------------------------------------------------------------
    @property
    def full(self) -> bool:
        """``prefetch_bytes`` are buffered: fetch nothing more for now."""
        return self.buffered >= self.prefetch_bytes

    def absorb(self, parts: list, gens: list, payloads, txn=(), resolved=(),
               resolved_gens=()) -> list:
        """Buffer one fetch response's data; returns ``(state, error)`` for
        parts that failed (for the fetch loop to handle). ``txn``: the
        answer's ``(topic, partition, last_stable_offset, aborted)`` rows
        (read_committed); ``resolved``: its ``(topic, partition, offset)``
        rows for parts fetched at EARLIEST / LATEST (``fetch_from_end``),
        of generations ``resolved_gens``: the position from there on."""
        failed = []
        txn_of = {(row[0], row[1]): row for row in txn} if txn else {}
        with self.lock:
            for (topic, partition, offset), gen in zip(resolved, resolved_gens):
                st = self.states.get((topic, partition))
                if st is not None and st.gen == gen and st.position is None:
                    st.position = st.fetch_pos = offset
                    st.reset = None
                    self.changed[st] = None  # fetched from ``offset`` on
            for (topic, partition, err, msg, hw, log_start, nbytes), gen, data in zip(
                    parts, gens, payloads):
                st = self.states.get((topic, partition))
                if st is None or st.gen != gen:
                    continue  # seeked or unassigned meanwhile
                if hw >= 0:  # -1: not read (a throttled answer: quotas)
                    st.high_watermark, st.log_start = hw, log_start
                row = txn_of.get((topic, partition))
                if row is not None and row[2] >= 0:
                    st.last_stable_offset = row[2]
                if err:
                    failed.append((st, err, msg))
                elif nbytes:
                    self._add(st, memoryview(data), nbytes, BatchFilter(
                        row[3] if row is not None else ()) if self.read_committed else _UNCOMMITTED)
        return failed

    def _add(self, st: PartitionState, data: memoryview, nbytes: int,
             batch_filter: BatchFilter) -> None:
        batches, offset, error = _walk(data, nbytes)
        if error is not None:
            error = _corrupt(st, st.fetch_pos if offset is None else offset, error)
        elif not batches:
            error = _corrupt(st, st.fetch_pos, CorruptRecordError(
                f"the broker returned {nbytes} bytes without a whole batch"))
        if batches:
            st.fetch_pos = offset
        st.stalled = error is not None
        self.changed[st] = None
        self._chunks.append(_Chunk(st, st.gen, data, batches, error, nbytes, batch_filter))
        self.buffered += nbytes

    # -- caller's side ------------------------------------------------------------------------------
    def take(self, max_records: int, check_crcs: bool = True) -> list[ConsumerRecord]:
        """Up to ``max_records`` buffered records in order, advancing
        positions; raises ``CorruptRecordError`` as the module says.

        The cyclic GC is paused while the records are built (protocol/gc_pause.py):
        they are thousands of tracked tuples that hold no cycle, and the
        collector's gen-1 and gen-2 passes over them cost ~25 ms of decoding
        100,000 records."""
        deferred, self._deferred = self._deferred, None
        if deferred is not None and deferred[1].gen == deferred[2]:
            raise deferred[0]
        gc_pause.pause()
        try:
            return self._take(max_records, check_crcs)
        finally:
            gc_pause.resume()

    def _take(self, max_records: int, check_crcs: bool) -> list:
        out: list = []
        while len(out) < max_records:
            cur = self._current
            if cur is not None and cur[0].gen == cur[1] and cur[3] < len(cur[2]):
                st, gen, records, i, error = cur
                piece = records[i:i + max_records - len(out)]
                out += piece
                self._current = (st, gen, records, i + len(piece), error)
                st.position = piece[-1].offset + 1
                continue
            try:
                if not self._next_records(max_records - len(out), check_crcs):
                    break
            except CorruptRecordError as exc:
                if not out:
                    raise
                st = self.states.get((exc.topic, exc.partition))
                self._deferred = (exc, st, st.gen if st else -1)  # raised by the next take
                break
        return out

    def _next_records(self, want: int, check_crcs: bool) -> bool:
        """Decode buffered batches (at least ``want`` records unless a chunk
        ends first) into ``_current``; False when nothing is buffered. Raises
        the error of a chunk whose records before the damage were taken."""
        cur, self._current = self._current, None
        if cur is not None and cur[4] is not None:
            with self.lock:
                if cur[0].gen == cur[1]:
                    self._raise_at(cur[0], cur[4])
        while True:
            with self.lock:
                if not self._chunks:
                    return False
                chunk = self._chunks[0]
                st = chunk.state
                done = st.gen != chunk.gen or chunk.next >= len(chunk.batches)
                if done:
                    self._chunks.popleft()
                    self.buffered -= chunk.nbytes
                    if st.gen != chunk.gen or chunk.error is None:
                        continue
                start = st.position
            records, error, passed = ([], chunk.error, None) if done else self._decode(
                chunk, start, want, check_crcs)
            if passed is not None and not records:
                with self.lock:  # only skipped batches: the position moves past them
                    if st.gen == chunk.gen and st.position is not None and st.position < passed:
                        st.position = passed
                if error is None:
                    continue
            if records or error is not None:
                self._current = (st, chunk.gen, records, 0, error)
                if records:
                    return True
                with self.lock:
                    self._current = None
                    if st.gen == chunk.gen:
                        self._raise_at(st, error)

    @staticmethod
    def _decode(chunk: _Chunk, start: int, want: int, check_crcs: bool) -> tuple:
        """(records from ``chunk``'s next batches with offset >= ``start``,
        at least ``want`` unless the chunk ends; the error to raise after
        them: a damaged batch's, else at the chunk's end its walk's; the
        offset after the batches skipped (records/txn_filter.py) before any record,
        or None). A batch to skip that follows records is left for the next
        call, so the position moves past it only once they are taken."""
        st, batches, out = chunk.state, chunk.batches, []
        data = chunk.bytes
        if data is None:
            data = chunk.bytes = bytes(chunk.data)  # one copy; the records are slices of it
        i, passed, exc = batches_into(out, data, batches, chunk.next, want, st.topic,
                                      st.partition, start, check_crcs, chunk.filter.skip_fields)
        if exc is not None:
            chunk.next = len(batches)
            fields = batches[i][1]
            return out, _corrupt(st, max(fields[_BASE], start), exc,
                                 fields[_BASE] + fields[_LAST_DELTA] + 1), passed
        chunk.next = i
        return out, chunk.error if i >= len(batches) else None, passed

    def _raise_at(self, st: PartitionState, error: CorruptRecordError) -> None:
        """Refetch from the position next time (lock held), then raise."""
        st.seek(st.position)
        raise error

    def errors(self) -> "LogbrokerError | None":
        """A partition error poll must raise (first one), if any: O(1)
        while none is (each poll asks)."""
        if self._failing is None:
            return None
        st = self._failing
        if st.error is not None and self.states.get((st.topic, st.partition)) is st:
            return st.error
        with self.lock:  # that one was cleared (a seek) or unassigned: look for another
            self._failing = next((st for st in self.states.values() if st.error is not None),
                                 None)
            return None if self._failing is None else self._failing.error

    def failed(self, st: PartitionState, exc: LogbrokerError) -> None:
        """``st`` stops fetching; poll raises ``exc`` (lock held by the caller)."""
        st.fail(exc)
        if self._failing is None:
            self._failing = st

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


def _walk(data, nbytes: int) -> tuple:
    """(``(position, header fields)`` of the whole batches at the start of
    ``data[:nbytes]``, the offset after the last one (None: no batch), the
    ``CorruptRecordError`` of a bad header that ended the walk or None).
    An incomplete trailing batch ends the walk silently (``walker.scan_fields``)."""
    batches: list = []
    try:
        batches.extend(scan_fields(data, 0, nbytes))
        error = None
    except CorruptRecordError as exc:
        error = exc
    if not batches:
        return batches, None, error
    fields = batches[-1][1]
    return batches, fields[fmt.F_BASE_OFFSET] + fields[fmt.F_LAST_OFFSET_DELTA] + 1, error
