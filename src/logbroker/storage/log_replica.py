"""The Log's leader-epoch calls of replication (a mixin of ``Log``, kept
apart so log.py stays one concept): Kafka's OffsetForLeaderEpoch and the
epoch a new leader starts."""

from __future__ import annotations


class ReplicaSupport:
    """Mixed into ``Log``: uses its lock, segments and epoch history."""

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: ``(e, end)``, ``e`` the largest epoch
        <= ``epoch`` in the history, ``end`` the start offset of the next newer
        epoch there, or the log end if ``e`` is the newest; ``(-1, -1)`` when
        no epoch <= ``epoch`` is known (an empty history, or only newer ones)."""
        with self._lock:
            self._check_online()
            return self._epochs.end_offset_for(epoch, self._segs.log_end)

    def assign_epoch(self, epoch: int) -> None:
        """Become leader in ``epoch``: ``(epoch, log end)`` enters the history
        at once, before any batch of it is written, and is checkpointed before
        this returns (recovery keeps an epoch that starts at the log end). No-op
        if ``epoch`` is the newest already; FencedLeaderEpochError if older."""
        with self._lock:
            self._check_online()
            if self._epochs.assign(epoch, self._segs.log_end, self.name):
                self._checkpoint_locked()
