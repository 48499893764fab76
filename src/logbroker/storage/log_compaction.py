"""The Log's side of compaction (a mixin of ``Log``, kept apart so log.py
stays one concept): what the compactor (storage/compaction.py) reads of a
log's history and the swap of a compacted group under the log's lock."""

from __future__ import annotations

from .cleaner_state import CleanerState
from .swap import Cleaned, SwapFailed, install


class CompactionSupport:
    """Mixed into ``Log``: uses its lock, segments, index and failure path."""

    @property
    def cuts(self) -> int:
        """Truncations and resets so far: a compaction pass that read the
        log under another count is void (its key map may name records that
        are gone)."""
        return self._segs.cuts

    def install_cleaned(self, cleaned: "Cleaned | None", state: "CleanerState | None",
                        cuts: int, now: "int | None" = None) -> bool:
        """Swap a compacted group in (storage/swap.py, steps 2-4; with
        ``cleaned`` None only ``state`` is stored), under the lock: appends
        and reads wait only for a few renames and one LMDB commit. False
        when the log changed since the compactor read it (nothing done).
        A failure after the swap's commit point takes the partition
        offline (the loader finishes the swap at the next start)."""
        with self._lock:
            self._check_online()
            try:
                done = install(self._segs, self.index, self.meta, self.pid, cleaned, state, cuts,
                               self._deadline(now))
            except SwapFailed as exc:
                raise self._fail(str(exc)) from None
            if done and cleaned is not None:
                self._checkpoint_locked()
            return done
