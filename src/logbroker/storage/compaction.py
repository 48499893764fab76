"""Log compaction (Kafka's log cleaner, small): keep the newest record per
key in sealed segments; docs/storage.md (Compaction) tells the whole story.

A pass over one log:

1. Plan (``plan_pass``): the cleanable segments are the sealed ones wholly
   below ``min(last stable offset, recovery point)`` (the LSO: the high
   watermark, or the oldest open transaction's first offset; nothing at or
   past it is cleaned) whose newest record is at
   least ``min_compaction_lag_ms`` old (the first one that is not ends
   them). A pass is due when the dirty part (segments ending above the
   clean point) is at least ``min_cleanable_dirty_percent`` of them, or
   when tombstones became old enough to go since the last pass.
2. Key map (``_build_map``): key -> offset of its newest record, from the
   clean point up to ``min(high watermark, recovery point)``, the active
   segment included (a key's newest value may be there). Bounded
   (``KeyMap``): when full, the map ends at that batch and the pass cleans
   the prefix of the dirty section it covers.
3. Clean (``_clean_group``): groups of consecutive cleanable segments
   (from the log start to the segment where the map ends, each group at
   most ``segment_bytes`` before cleaning) are rewritten one by one. A
   record goes if the map holds a newer record of its key, or if it is a
   tombstone (null value) below the tombstone horizon (first cleaned more
   than ``delete_retention_ms`` ago, ``CleanerState``). Records without a
   key are kept. Offsets are kept (gaps); a batch that lost records becomes
   one batch per run of kept records (``records.compact.encode_runs``).
   Transactions: a batch of an aborted transaction goes whole and never
   counts in the key map; control batches (markers) are kept whole and
   count in nothing (Kafka removes markers later; we keep them: a few
   bytes per transaction, and the aborted index keeps naming them).
4. Swap (``Log.install_cleaned``, storage/swap.py): crash-safe, under the
   Log's lock for a few renames; the new clean point and tombstone history
   are stored with the last group.

Every step reads sealed segment files without the Log's lock (they do not
change; a truncation or retention that does change them voids the pass at
the swap). A pass is a generator yielding the bytes it read, so
``Compactor.tick`` spends a byte budget per tick and resumes it later.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Iterator

from ..records import format as fmt
from ..records.compact import encode_runs
from ..records.decoder import readable
from ..records.walker import scan_file
from .cleaner_state import CleanerState, load_state
from .index import PartitionIndex
from .keymap import KeyMap
from .segment import Segment
from .swap import Cleaned, CleanedWriter

log = logging.getLogger(__name__)
WINDOW = 1 << 20


@dataclass(frozen=True)
class PassPlan:
    """What one pass works on, fixed when it starts."""

    cleanable: tuple[tuple[Segment, int, int], ...]  # (segment, size, end offset), oldest first
    scan: tuple[Segment, ...]  # segments the key map reads (from the clean point's one)
    clean_point: int
    map_limit: int  # the key map covers offsets below this
    horizon: int  # tombstones below this offset go
    cuts: int
    state: CleanerState
    now: int


def plan_pass(plog, now: int) -> "PassPlan | None":
    """The next pass over ``plog`` (a Log), or None when none is due."""
    cfg, state = plog.config, load_state(plog.meta, plog.pid)
    cuts, segs = plog.cuts, plog.segments
    limit = min(plog.last_stable_offset, plog.recovery_point)  # the LSO is at most the HW
    cleanable = []
    for seg, nxt in zip(segs, segs[1:]):
        if nxt.base_offset > limit or seg.max_timestamp > now - cfg.min_compaction_lag_ms:
            break
        cleanable.append((seg, seg.size, nxt.base_offset))
    point = max(min(state.clean_point, plog.log_end_offset), plog.log_start_offset)
    horizon = min(state.tombstone_horizon(now, cfg.delete_retention_ms), point)
    total = sum(size for _, size, _ in cleanable)
    dirty = sum(size for _, size, end in cleanable if end > point)
    due = dirty > 0 and dirty * 100 >= cfg.min_cleanable_dirty_percent * total
    if not cleanable or not (due or horizon > state.tombstones_below):
        return None
    scan = tuple(s for s in segs if plog.segment_end(s) > point and s.base_offset < limit)
    return PassPlan(tuple(cleanable), scan, point, limit, horizon, cuts, state, now)


def run_pass(plog, plan: PassPlan, map_bytes: int) -> Iterator[int]:
    """Run ``plan`` over ``plog``: a generator yielding bytes read as it
    goes (so a caller can stop between batches and resume later). Ends
    early, without error, when the log changed under it."""
    keymap = KeyMap(map_bytes)
    aborted = Aborted(plog.aborted_in(plog.log_start_offset, plan.map_limit))
    map_end = yield from _build_map(plan, keymap, aborted)
    chosen = [c for c in plan.cleanable if c[0].base_offset < max(map_end, plan.clean_point + 1)]
    if not chosen:
        return
    groups = _groups(chosen, plog.config.segment_bytes)
    point = max(plan.clean_point, min(map_end, chosen[-1][2]))
    cfg = plog.config
    state = plan.state.after_pass(point, plan.now, cfg.delete_retention_ms, plan.horizon)
    for i, group in enumerate(groups):
        cleaned = yield from _clean_group(plog, group, keymap, plan.horizon, aborted)
        last = i == len(groups) - 1
        if cleaned is None and not last:
            continue
        if not plog.install_cleaned(cleaned, state if last else None, plan.cuts):
            log.info("%s: the log changed during compaction; the pass is dropped", plog.name)
            return


class Aborted:
    """The aborted transactions of a pass (``AbortedTxn``s), by producer:
    whether a transactional batch's records were aborted."""

    def __init__(self, txns) -> None:
        self._by_producer: dict[int, list] = {}
        for t in txns:
            self._by_producer.setdefault(t.producer_id, []).append((t.first_offset, t.last_offset))

    def holds(self, header: fmt.BatchHeader) -> bool:
        return any(first <= header.base_offset <= last
                   for first, last in self._by_producer.get(header.producer_id, ()))


def _skipped(header: fmt.BatchHeader, aborted: Aborted) -> "str | None":
    """"control" for a marker (kept, never in the key map), "aborted" for a
    batch of an aborted transaction (dropped, never in the key map), else None."""
    if not header.attributes & fmt.TXN_BITS:
        return None
    transactional, control = fmt.txn_flags(header.magic, header.attributes)
    if control:
        return "control"
    return "aborted" if transactional and aborted.holds(header) else None


def _build_map(plan: PassPlan, keymap: KeyMap, aborted: Aborted) -> Iterator[int]:
    """Fill ``keymap`` from the clean point; returns (as a generator's
    value) the offset it covers up to. Markers and aborted transactional
    records supersede nothing."""
    for seg in plan.scan:
        for _, header, data in scan_file(seg.read, 0, seg.size, window=WINDOW, verify=True):
            if header.next_offset <= plan.clean_point:
                continue
            if header.next_offset > plan.map_limit:
                return plan.map_limit
            if _skipped(header, aborted):
                yield header.size
                continue
            batch = readable(data)
            keys = batch.keys.tolist() if batch is not None else []  # unreadable: supersedes none
            if len(keymap) and not keymap.fits(keys):
                return header.base_offset
            keymap.put_all(keys, header.base_offset)
            yield header.size
    return plan.map_limit


def _groups(chosen: list, max_bytes: int) -> list[list]:
    """Consecutive runs of ``(segment, size, end)`` of at most ``max_bytes``
    (a larger segment alone)."""
    groups, size = [], 0
    for item in chosen:
        if groups and size + item[1] <= max_bytes:
            groups[-1].append(item)
            size += item[1]
        else:
            groups.append([item])
            size = item[1]
    return groups


def _clean_group(plog, group: list, keymap: KeyMap, horizon: int,
                 aborted: Aborted) -> Iterator[int]:
    """Write the group's cleaned file; returns (as the generator's value)
    a ``Cleaned`` ready to swap in, or None when a one-segment group loses
    nothing (nothing to swap)."""
    first = group[0][0]
    writer = CleanedWriter(first.directory, first.base_offset, group[-1][2])
    index = PartitionIndex(plog.meta, plog.pid, plog.config.index_interval_bytes)  # entries only
    removed, max_ts = 0, -1
    try:
        for seg, size, _ in group:
            for _, header, data in scan_file(seg.read, 0, size, window=WINDOW, verify=True):
                skip = _skipped(header, aborted)
                if skip == "aborted":
                    pieces, dropped = [], header.record_count
                elif skip == "control":
                    pieces, dropped = [bytes(data)], 0
                else:
                    pieces, dropped = _kept(data, keymap, horizon)
                removed += dropped
                for piece in pieces:
                    h = fmt.read_header(piece, 0)
                    index.on_batch(h.base_offset, first.base_offset, writer.size, h.size,
                                   h.max_timestamp)
                    max_ts = max(max_ts, h.max_timestamp)
                    writer.write(piece)
                yield header.size
        if removed == 0 and len(group) == 1:
            writer.abandon()
            return None
        writer.finish()
    except BaseException:
        writer.abandon()
        raise
    return Cleaned(tuple(s for s, _, _ in group), tuple(n for _, n, _ in group), writer,
                   tuple(index.pending), max_ts)


def _kept(data, keymap: KeyMap, horizon: int) -> tuple[list[bytes], int]:
    """The batch ``data`` as the batches that keep its surviving records,
    and how many records went. A Kafka batch whose records do not decode
    (``kafka_v2.readable``) is kept whole: nothing unreadable is dropped."""
    batch = readable(data)
    if batch is None:
        return [bytes(data)], 0
    base = batch.header.base_offset
    keys, nulls = batch.keys.tolist(), batch.values.null_flags()
    latest = keymap.latest
    keep = [key is None or (latest(key) <= base + i and not (nulls[i] and base + i < horizon))
            for i, key in enumerate(keys)]
    return encode_runs(data, batch, keep), keep.count(False)


class Compactor:
    """Runs compaction passes over a store's logs, a byte budget per tick.
    Not thread-safe: ``Store.tick`` calls it from one thread at a time."""

    def __init__(self, bytes_per_tick: int, map_bytes: int) -> None:
        self.bytes_per_tick, self.map_bytes = bytes_per_tick, map_bytes
        self._jobs: dict = {}  # Log -> running pass (a generator)
        self._retry: dict = {}  # Log -> (not before, backoff ms) after a failure

    def tick(self, logs: list, now: int) -> int:
        """Advance passes until ``bytes_per_tick`` bytes were read; returns
        the bytes read. A failing pass is logged, dropped and retried later
        with a backoff (up to 10 minutes); it never raises."""
        spent = 0
        for gone in [lg for lg in self._jobs if lg not in logs]:
            self._jobs.pop(gone).close()
        for plog in logs:
            if spent >= self.bytes_per_tick:
                break
            if not plog.config.compacts or plog.offline is not None \
                    or self._retry.get(plog, (0, 0))[0] > now:
                continue
            spent += self._advance(plog, now, self.bytes_per_tick - spent)
        return spent

    def _advance(self, plog, now: int, budget: int) -> int:
        spent = 0
        try:
            job = self._jobs.get(plog)
            if job is None:
                plan = plan_pass(plog, now)
                if plan is None:
                    return 0
                job = self._jobs[plog] = run_pass(plog, plan, self.map_bytes)
            for n in job:
                spent += n
                if spent >= budget:
                    return spent
            self._jobs.pop(plog, None)
            self._retry.pop(plog, None)
        except Exception:  # noqa: BLE001 - a background pass must never stop the others
            self._jobs.pop(plog, None)
            delay = min(600_000, 2 * self._retry.get(plog, (0, 5_000))[1])
            self._retry[plog] = (now + delay, delay)
            log.exception("compaction of %s failed; retrying in %d s", plog.name, delay // 1000)
        return spent
