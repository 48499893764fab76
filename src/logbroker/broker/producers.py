"""Idempotent producer state of one partition (Kafka's ProducerStateManager, small).

For each producer id the partition remembers its epoch and its last five
batches (sequence range -> offsets). A retried batch that matches one of
them is a duplicate and gets its original offsets; a batch that skips
sequence numbers is refused. After a restart the state is rebuilt from the
headers of the log's tail the first time an idempotent producer writes,
which is where any retry still in flight must point.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from ..errors import InvalidProducerEpochError, OutOfOrderSequenceError
from ..records.format import BatchHeader

KEEP = 5
TAIL_SCAN_BYTES = 64 << 20


@dataclass(frozen=True)
class _Batch:
    first_seq: int
    last_seq: int
    base_offset: int


class ProducerStates:
    def __init__(self) -> None:
        self._states: dict[int, tuple[int, deque]] = {}
        self.loaded = False

    def load(self, headers) -> None:
        """Rebuild from batch headers in log order (the tail of the log)."""
        for h in headers:
            if h.producer_id >= 0 and h.base_sequence >= 0:
                self.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                            h.base_offset)
        self.loaded = True

    def check(self, header: BatchHeader) -> "int | None":
        """The original base offset if ``header``'s batch is a duplicate, None
        if it may be appended; raises for a stale epoch or a sequence gap."""
        pid, epoch, seq = header.producer_id, header.producer_epoch, header.base_sequence
        state = self._states.get(pid)
        if state is None:
            return None
        known_epoch, batches = state
        if epoch < known_epoch:
            raise InvalidProducerEpochError(f"producer {pid} epoch {epoch} is older than {known_epoch}")
        if epoch > known_epoch:
            if seq != 0:
                raise OutOfOrderSequenceError(f"producer {pid} new epoch {epoch} must start at "
                                              f"sequence 0, got {seq}")
            return None
        last_seq = seq + header.record_count - 1
        for b in batches:
            if b.first_seq == seq and b.last_seq == last_seq:
                return b.base_offset
        expected = batches[-1].last_seq + 1
        if seq != expected:
            raise OutOfOrderSequenceError(f"producer {pid} sent sequence {seq}, expected {expected}")
        return None

    def record(self, pid: int, epoch: int, seq: int, count: int, base_offset: int) -> None:
        state = self._states.get(pid)
        if state is None or state[0] != epoch:
            state = (epoch, deque(maxlen=KEEP))
            self._states[pid] = state
        state[1].append(_Batch(seq, seq + count - 1, base_offset))

    def clear(self) -> None:
        self._states.clear()
        self.loaded = False
