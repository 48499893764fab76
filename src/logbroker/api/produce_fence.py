"""A connection's produce fences: a batch refused before it was written
holds back the batches of its producer that followed it on the same
connection, so a producer may pipeline a partition's batches from its
first (decision 110).

A leader takes the first batch of a producer it has no state for whatever
its sequence (the state may have expired or been cut away: Kafka's rule
too). So if batch ``s`` of a partition is refused with a retriable error
before it is written (NOT_LEADER from a leader still opening its log,
UNKNOWN_TOPIC_OR_PARTITION from a broker that has not learned of the topic
yet) while the producer's next batch ``s + n`` is already on its way in a
later request, that batch would be written as the producer's first and
the retried ``s`` would meet OUT_OF_ORDER_SEQUENCE: records acknowledged
out of order, or failed. A producer's requests to one broker travel in
order over one connection and the broker handles them in order, so the
connection remembers, per partition and refused producer id, the epoch and
the sequence that follows the refused batches: a batch of that producer
starting exactly there is refused with the same error (and the fence moves
past it); any other batch of that producer there (the retry of ``s``, a
new epoch) lifts the fence and is handled as usual. Other producers'
batches pass. The client resends a partition's failed batches in order
once all have come back (client/producer/delivery.py), so the retry lifts
the fence.

Cost: nothing on the hot path (``session.produce_fences`` stays None until
a refusal); once a connection has fences, each part's batch headers are
read (``records.walker.scan_fields``). Bounded: ``MAX_FENCES`` per
connection, the oldest dropped first.
"""

from __future__ import annotations

from ..errors import CorruptRecordError, LogbrokerError
from ..records.walker import scan_fields
from ..storage.incoming import part_buffers

MAX_FENCES = 1024  # fenced partitions one connection keeps
_SEQ_MASK = 0x7FFFFFFF
_PRODUCER = slice(9, 13)  # producer id, epoch, base sequence, record count in HEADER's fields


class ProduceFences:
    """The fences of one connection (module docstring)."""

    __slots__ = ("_fences",)

    def __init__(self) -> None:
        self._fences: dict = {}  # (topic, partition, producer id) -> (epoch, next sequence, exc)

    def __len__(self) -> int:
        return len(self._fences)

    def check(self, topic: str, partition: int, data) -> None:
        """Raise the fenced error if the part ``data`` continues a refused
        batch of its producer on this connection; lift that producer's
        fence of the partition if it does not."""
        got = _sequences(data)
        if got is None:
            return
        key = (topic, partition, got[0])
        fence = self._fences.get(key)
        if fence is None:
            return
        epoch, after, exc = fence
        if got[1] == epoch and got[2] == after:
            self._fences[key] = (epoch, got[3], exc)
            raise exc.__class__(f"{exc.message} (an earlier batch of producer {got[0]} on this "
                                f"connection was refused: send again in order)")
        del self._fences[key]

    def refused(self, topic: str, partition: int, data, exc: LogbrokerError) -> None:
        """The part ``data`` was refused with ``exc`` before anything of it
        was written: fence its producer's next batches (an idempotent
        producer's retriable refusals only)."""
        got = _sequences(data)
        if got is None or got[0] < 0 or not exc.retriable:
            return
        key = (topic, partition, got[0])
        old = self._fences.get(key)
        if old is None:
            if len(self._fences) >= MAX_FENCES:
                del self._fences[next(iter(self._fences))]
        elif old[0] == got[1]:
            exc = old[2]  # refused by the fence itself: the first refusal's error stays
        self._fences[key] = (got[1], got[3], exc)


def _sequences(data) -> "tuple[int, int, int, int] | None":
    """(producer id, epoch, first sequence, the sequence after the last
    batch) of a produce part's whole batches, read from their headers; None
    when there is none or a header is malformed (storage refuses that part
    for itself)."""
    first, after = None, 0
    try:
        for buf in part_buffers(data):
            for _, fields in scan_fields(buf):
                pid, epoch, seq, count = fields[_PRODUCER]
                if first is None:
                    first = (pid, epoch, seq)
                after = (seq + count) & _SEQ_MASK
    except CorruptRecordError:
        return None
    return None if first is None else (*first, after)
