"""Idempotent producer state of one partition (Kafka's ProducerStateManager, small).

For each producer id the partition remembers its epoch and its last five
batches (sequence range -> offsets). A retried batch that matches one of
them is a duplicate and gets its original offsets; a batch that skips
sequence numbers is refused. After a restart the state is rebuilt from the
headers of the log's tail the first time an idempotent producer writes,
which is where any retry still in flight must point. The Log checks every
batch of an append here under its lock before it writes any of them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import InvalidProducerEpochError, InvalidRequestError, OutOfOrderSequenceError
from ..records.format import BatchHeader

KEEP = 5
TAIL_SCAN_BYTES = 64 << 20


@dataclass(frozen=True, slots=True)
class _Batch:
    first_seq: int
    last_seq: int
    base_offset: int


class ProducerStates:
    """Not thread-safe: the Log calls it under its lock."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_states", "loaded")

    def __init__(self) -> None:
        # producer -> (epoch, its last batches: a tuple of at most KEEP, oldest first;
        # a tuple, not a deque: a partition per producer holds one, ~80 B against ~620)
        self._states: dict[int, tuple[int, tuple]] = {}
        self.loaded = False

    def load(self, headers) -> None:
        """Rebuild from batch headers in log order (the tail of the log)."""
        self._states.clear()
        for h in headers:
            if h.producer_id >= 0 and h.base_sequence >= 0:
                self.record(h.producer_id, h.producer_epoch, h.base_sequence, h.record_count,
                            h.base_offset)
        self.loaded = True

    def check_all(self, headers) -> list["int | None"]:
        """Check every batch of one append before any is written: for each,
        its original base offset if it is a retried duplicate, None if it
        must be appended. Each batch is checked against the state as the
        earlier batches of the same call leave it. Raises (nothing changed)
        for a stale epoch or a sequence gap in any of them."""
        overlay: dict[int, tuple[int, tuple]] = {}
        out: list["int | None"] = []
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                out.append(None)
                continue
            state = overlay.get(pid) or self._states.get(pid)
            dup = _check(state, h)
            if dup is not None and dup < 0:
                raise InvalidRequestError(f"producer {pid} sent the batch with sequence "
                                          f"{h.base_sequence} twice in one request")
            if dup is None:
                kept = state[1] if state and state[0] == h.producer_epoch else ()
                batch = _Batch(h.base_sequence, h.base_sequence + h.record_count - 1, -1)
                overlay[pid] = (h.producer_epoch, _kept(kept, batch))
            out.append(dup)
        return out

    def record(self, pid: int, epoch: int, seq: int, count: int, base_offset: int) -> None:
        state = self._states.get(pid)
        kept = state[1] if state is not None and state[0] == epoch else ()
        self._states[pid] = (epoch, _kept(kept, _Batch(seq, seq + count - 1, base_offset)))

    def bump(self, pid: int, epoch: int) -> None:
        """A marker (or the transaction state) says ``pid`` is at ``epoch``:
        a newer epoch starts afresh (its first batch must have sequence 0);
        batches of older epochs are fenced from now on."""
        state = self._states.get(pid)
        if state is None or state[0] < epoch:
            self._states[pid] = (epoch, ())

    def epoch_of(self, pid: int) -> int:
        """The epoch known for ``pid`` (-1 when none)."""
        state = self._states.get(pid)
        return -1 if state is None else state[0]

    def clear(self) -> None:
        self._states.clear()
        self.loaded = False


def _kept(batches: tuple, batch: _Batch) -> tuple:
    """``batches`` then ``batch``, the oldest dropped beyond ``KEEP``."""
    return (batches + (batch,))[-KEEP:]


def _check(state: "tuple[int, tuple] | None", header: BatchHeader) -> "int | None":
    """The original base offset if ``header``'s batch duplicates one of
    ``state``'s, None if it may be appended; raises for a stale epoch or a gap."""
    if state is None:
        return None
    pid, epoch, seq = header.producer_id, header.producer_epoch, header.base_sequence
    known_epoch, batches = state
    if epoch < known_epoch:
        raise InvalidProducerEpochError(f"producer {pid} epoch {epoch} is older than {known_epoch}")
    if epoch > known_epoch:
        if seq != 0:
            raise OutOfOrderSequenceError(f"producer {pid} new epoch {epoch} must start at "
                                          f"sequence 0, got {seq}")
        return None
    if not batches:  # the epoch a marker set: the producer starts its sequences again
        if seq != 0:
            raise OutOfOrderSequenceError(f"producer {pid} epoch {epoch} must start at "
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
