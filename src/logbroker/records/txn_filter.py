"""Which batches a reader skips: control batches always, and under
read_committed the batches of aborted transactions (Kafka's rule). The one
filter of every reader: our Consumer (client/consumer/fetch_buffer.py) and
Spark's readers (spark/scan.py over segment files, spark/remote_read.py
over Fetch; the JVM's SplitReader is its Java twin).

Pure: it looks at batch headers only (magic, attributes, producer id,
offsets), never at records. Control batches (a transaction's commit or
abort marker) are found by their header bits (``format.txn_flags``: ours
0x0800 transactional / 0x1000 control, Kafka's magic 2 0x10 / 0x20) and are
never records for the application, in either isolation.

read_committed: a fetch answer lists, per partition, the aborted
transactions with records in the returned range as ``(producer_id,
first_offset)``. Walking the batches in offset order, an aborted
transaction becomes *active* once a batch reaches its first offset; a
transactional batch of a producer with an active aborted transaction is
dropped; that producer's next control batch (its abort marker) ends it.
Any control batch of the producer may end it: a producer has one
transaction open at a time, and the marker that closes the open one is
the first marker after its first offset (so reading the marker's type is
not needed). Every batch of the answer must be shown to ``skip`` in order
(those before the consumer's position too), so the markers are seen.
"""

from __future__ import annotations

from . import format as fmt

TRANSACTIONAL, CONTROL = fmt.TRANSACTIONAL, fmt.CONTROL
txn_flags = fmt.txn_flags  # (transactional, control) of a header of either magic
_PRODUCER_ID = 9  # index of the producer id in format.read_fields' tuple
TXN_BITS = fmt.TRANSACTIONAL | fmt.CONTROL | fmt.KAFKA_TRANSACTIONAL | fmt.KAFKA_CONTROL


class BatchFilter:
    """One partition's batches of one fetch answer. ``aborted`` None:
    read_uncommitted (only control batches are skipped); else the answer's
    ``(producer_id, first_offset)`` list."""

    __slots__ = ("_pending", "_next", "_active", "_committed", "_known")

    def __init__(self, aborted=None) -> None:
        self._committed = aborted is not None
        self._pending: list = []  # (first offset, producer id), sorted
        self._next = 0
        self._active: set = set()
        self._known: set = set()
        self.extend(aborted or ())

    def extend(self, aborted) -> None:
        """More ``(producer_id, first_offset)`` pairs, as each Fetch answer of a
        walk brings those of its range (a pair seen before is ignored)."""
        fresh = [(int(f), int(p)) for p, f in aborted if (p, f) not in self._known]
        if fresh:
            self._known.update((p, f) for f, p in fresh)
            self._pending = sorted(self._pending[self._next:] + fresh)
            self._next = 0

    def skip(self, magic: int, attributes: int, producer_id: int, last_offset: int) -> bool:
        """Whether the batch ending at ``last_offset`` is not for the
        application (call for every batch, in offset order)."""
        transactional, control = txn_flags(magic, attributes)
        if self._committed and producer_id >= 0 and (transactional or control):
            pending = self._pending
            while self._next < len(pending) and pending[self._next][0] <= last_offset:
                self._active.add(pending[self._next][1])
                self._next += 1
            if control:
                self._active.discard(producer_id)
            elif producer_id in self._active:
                return True
        return control

    def skip_fields(self, fields: tuple) -> bool:
        """``skip`` for a ``format.read_fields`` tuple (a batch with no
        transaction bit of either magic is kept at once: the common case)."""
        if not fields[fmt.F_ATTRIBUTES] & TXN_BITS:
            return False
        return self.skip(fields[fmt.F_MAGIC], fields[fmt.F_ATTRIBUTES], fields[_PRODUCER_ID],
                         fields[fmt.F_BASE_OFFSET] + fields[fmt.F_LAST_OFFSET_DELTA])

    def skip_header(self, header: fmt.BatchHeader) -> bool:
        """``skip`` for a ``BatchHeader``."""
        if not header.attributes & TXN_BITS:
            return False
        return self.skip(header.magic, header.attributes, header.producer_id, header.last_offset)

    def idle(self) -> bool:
        """read_uncommitted with nothing to drop but control batches."""
        return not self._committed
