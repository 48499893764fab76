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

from ..errors import InvalidProducerEpochError, InvalidRequestError, OutOfOrderSequenceError
from ..records.format import BatchHeader

KEEP = 5
TAIL_SCAN_BYTES = 64 << 20


class ProducerStates:
    """Not thread-safe: the Log calls it under its lock."""

    # one per partition (50,000 on a broker): slots, no instance dict
    __slots__ = ("_states", "loaded")

    def __init__(self) -> None:
        # producer -> (epoch, then its last batches oldest first, each three ints:
        # first sequence, last sequence, base offset): one flat tuple, no object per
        # batch (a broker of 50,000 partitions holds one per partition per producer)
        self._states: dict[int, tuple] = {}
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
        overlay: dict[int, tuple] = {}
        out: list["int | None"] = []
        last = len(headers) - 1
        for i, h in enumerate(headers):
            pid = h.producer_id
            if pid < 0:
                out.append(None)
                continue
            state = overlay.get(pid) or self._states.get(pid)
            dup = _check(state, h)
            if dup is not None and dup < 0:
                raise InvalidRequestError(f"producer {pid} sent the batch with sequence "
                                          f"{h.base_sequence} twice in one request")
            if dup is None and i < last:  # what the call's later batches are checked against
                overlay[pid] = _kept(state, h.producer_epoch, h.base_sequence,
                                     h.base_sequence + h.record_count - 1, -1)
            out.append(dup)
        return out

    def record(self, pid: int, epoch: int, seq: int, count: int, base_offset: int) -> None:
        self._states[pid] = _kept(self._states.get(pid), epoch, seq, seq + count - 1, base_offset)

    def bump(self, pid: int, epoch: int) -> None:
        """A marker (or the transaction state) says ``pid`` is at ``epoch``:
        a newer epoch starts afresh (its first batch must have sequence 0);
        batches of older epochs are fenced from now on."""
        state = self._states.get(pid)
        if state is None or state[0] < epoch:
            self._states[pid] = (epoch,)

    def epoch_of(self, pid: int) -> int:
        """The epoch known for ``pid`` (-1 when none)."""
        state = self._states.get(pid)
        return -1 if state is None else state[0]

    def clear(self) -> None:
        self._states.clear()
        self.loaded = False


def _kept(state: "tuple | None", epoch: int, first: int, last: int, base: int) -> tuple:
    """The state after batch (``first``..``last`` at ``base``) of ``epoch``:
    the batches kept when the epoch is the state's, the oldest dropped
    beyond ``KEEP``."""
    kept = state[1:] if state is not None and state[0] == epoch else ()
    return (epoch, *(kept + (first, last, base))[-3 * KEEP:])


def _check(state: "tuple | None", header: BatchHeader) -> "int | None":
    """The original base offset if ``header``'s batch duplicates one of
    ``state``'s, None if it may be appended; raises for a stale epoch or a gap."""
    if state is None:
        return None
    pid, epoch, seq = header.producer_id, header.producer_epoch, header.base_sequence
    known_epoch = state[0]
    if epoch < known_epoch:
        raise InvalidProducerEpochError(f"producer {pid} epoch {epoch} is older than {known_epoch}")
    if epoch > known_epoch:
        if seq != 0:
            raise OutOfOrderSequenceError(f"producer {pid} new epoch {epoch} must start at "
                                          f"sequence 0, got {seq}")
        return None
    if len(state) == 1:  # the epoch a marker set: the producer starts its sequences again
        if seq != 0:
            raise OutOfOrderSequenceError(f"producer {pid} epoch {epoch} must start at "
                                          f"sequence 0, got {seq}")
        return None
    last_seq = seq + header.record_count - 1
    for i in range(1, len(state), 3):
        if state[i] == seq and state[i + 1] == last_seq:
            return state[i + 2]
    expected = state[-2] + 1
    if seq != expected:
        raise OutOfOrderSequenceError(f"producer {pid} sent sequence {seq}, expected {expected}")
    return None
