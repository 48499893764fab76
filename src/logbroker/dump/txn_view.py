"""What ``logbroker inspect`` shows of transactions: each batch's
transactional flag and marker, and per partition the transactions its files
say are open (replayed from the batches read, storage/txn_state.py), its
last stable offset and how many were aborted. Read-only, pure."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CorruptRecordError
from ..records import format as fmt
from ..records.control import read_marker
from ..storage.txn_state import TxnState


@dataclass(frozen=True)
class Transactions:
    """A partition's transactions as its files (the ones read) say:
    ``open`` = ((producer id, epoch, first offset), ...), oldest first;
    ``last_stable_offset`` the oldest open one's first offset, or the high
    watermark (the checkpoint's, with ``--verify`` and a data dir) or the
    log end when none is open, capped by that high watermark."""

    partition: str
    last_stable_offset: "int | None"
    high_watermark: "int | None"
    open: tuple
    aborted: int
    markers: int


@dataclass
class TxnTracker:
    """One partition's transaction state along a scan."""

    state: TxnState = field(default_factory=TxnState)
    aborted: int = 0
    markers: int = 0
    high_watermark: "int | None" = None  # the checkpoint's, when read
    end: "int | None" = None  # after the last batch read

    def batch(self, header: fmt.BatchHeader, data) -> tuple[bool, "tuple[bool, int] | None"]:
        """``(transactional, marker)`` of a batch with a transactional or
        control bit (``data`` its bytes, or None when too large to read);
        the state follows it."""
        transactional, control = fmt.txn_flags(header.magic, header.attributes)
        if not control:
            if header.producer_id >= 0:
                self.state.on_transactional(header.producer_id, header.producer_epoch,
                                            header.base_offset)
            return transactional, None
        self.markers += 1
        try:
            marker = None if data is None else read_marker(data, header)
        except CorruptRecordError:
            marker = None
        if marker is not None:
            self.aborted += self.state.on_marker(header.producer_id, header.producer_epoch,
                                                 marker[0], marker[1],
                                                 header.base_offset) is not None
        return transactional, marker

    @property
    def seen(self) -> bool:
        return bool(self.markers or self.state.producers)

    def summary(self, name: str) -> Transactions:
        first, hw = self.state.first_unstable(), self.high_watermark
        lso = first if first is not None else (hw if hw is not None else self.end)
        if lso is not None and hw is not None:
            lso = min(lso, hw)
        return Transactions(name, lso, hw, tuple(self.state.open_transactions()), self.aborted,
                            self.markers)
