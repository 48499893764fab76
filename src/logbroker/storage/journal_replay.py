"""The journal's recovery (storage/journal.py): its files read in order,
each DATA entry of a live generation that continues its log appended
again, the rest skipped (docs/storage.md, "the journal").
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import CorruptRecordError
from ..records import scan_batches
from . import journal_format as jf

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replayed:
    """What a replay found: files and whole entries read, batches appended
    again, entries skipped (held already, void, or of no log here), torn
    file tails, and the logs that grew (to make durable)."""

    files: int
    entries: int
    appended: int
    skipped: int
    torn: int
    logs: tuple


def replay_files(paths: list, logs_by_pid: dict) -> Replayed:
    """Replay the journal files ``paths`` (in the order written) onto the
    logs ``logs_by_pid`` (partition id -> Log, every log of the store)."""
    entries, torn = [], 0
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        found, end = jf.decode(data)
        if end < len(data):
            torn += 1
            log.warning("journal %s: torn at byte %d of %d (never acknowledged); "
                        "%d entries before it", path, end, len(data), len(found))
        entries += found
    void = {}
    for e in entries:
        if e.kind == jf.CUT and e.generation > void.get(e.pid, -1):
            void[e.pid] = e.generation
    grown, appended, skipped = {}, 0, 0
    for e in entries:
        if e.kind != jf.DATA:
            continue
        lg = logs_by_pid.get(e.pid)
        if lg is None or e.generation < void.get(e.pid, -1) or lg.offline is not None \
                or jf.name_crc(lg.name) != e.name_crc or lg.log_end_offset >= e.end:
            skipped += 1
            continue
        n = _extend(lg, e)
        if n:
            appended += n
            grown[e.pid] = lg
        else:
            skipped += 1
    return Replayed(len(paths), len(entries), appended, skipped, torn,
                    tuple(grown.values()))


def _extend(lg, e: jf.Entry) -> int:
    """Append ``e``'s batches from ``lg``'s end on; the batches appended
    (0: the entry does not continue the log there: skipped, logged)."""
    start, at, restart = lg.log_end_offset, None, None
    try:
        for pos, h in scan_batches(e.payload, verify=False):
            if h.base_offset >= start:
                at = pos if h.base_offset == start else None
                break
            if h.next_offset > start and start == lg.log_start_offset:
                # recovery restarted the log empty at its start, inside this batch
                at, restart = pos, h.base_offset
                break
    except CorruptRecordError:  # the CRC held, so written so: append_replicated says why
        at = 0 if e.base == start else None
    if at is None:
        log.warning("journal: %s ends at %d, an entry holds [%d, %d): skipped", lg.name, start,
                    e.base, e.end)
        return 0
    try:
        if restart is not None:  # the batch goes back whole, the log start stays
            lg.reset_to(restart)
        info = lg.append_replicated(e.payload[at:], sync=False)
        if restart is not None:
            lg.delete_before(start)
    except Exception as exc:  # noqa: BLE001 - a damaged entry must not stop the others
        log.warning("journal: replaying [%d, %d) onto %s failed: %s", e.base, e.end, lg.name, exc)
        return 0
    return info.batches
