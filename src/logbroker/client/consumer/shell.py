"""What both Consumer shells share as it is: the plain methods, which never
block nor talk to the broker (``logbroker.Consumer`` in consumer/sync.py and
``logbroker.aio.Consumer`` in consumer/aio.py derive from ``ConsumerShell``).
Each is one call into the shell's ``ConsumerCore``; its
docstring is the contract of both."""

from __future__ import annotations

from typing import Iterable

from .core import ConsumerCore


class ConsumerShell:
    """The plain methods of both consumers over their core."""

    def __init__(self, core: ConsumerCore) -> None:
        self._core = core
        self.settings, self.options = core.settings, core.options

    def assign(self, partitions: Iterable) -> None:
        """Read exactly these ``(topic, partition)`` pairs (replaces any
        subscription, and leaves the group if this consumer was a member);
        positions of partitions kept are kept."""
        self._core.assign(partitions)

    def subscription(self) -> "tuple | str":
        """The topics subscribed to, or the pattern's text (``()`` after ``assign``)."""
        return self._core.subscription()

    def assignment(self) -> set:
        """The partitions this consumer reads, as ``{(topic, partition)}``."""
        return self._core.assignment()

    def highwater(self, topic: str, partition: int) -> "int | None":
        """The high watermark the last fetch reported (None before one)."""
        return self._core.highwater(topic, partition)

    def last_stable_offset(self, topic: str, partition: int) -> "int | None":
        """read_committed: the last stable offset the last fetch reported
        (records before it are decided; None before one)."""
        return self._core.last_stable_offset(topic, partition)

    def group_metadata(self):
        """This consumer's group and membership (``GroupMetadata``), for a
        transactional producer's ``send_offsets_to_transaction``: the group
        coordinator refuses the offsets if the membership is stale (the
        group rebalanced without this member). Needs ``group=``."""
        return self._core.group_metadata()

    def metrics(self) -> dict:
        """The consumer's counters (docs/metrics.md): ``records_consumed``
        (returned by polls), ``polls`` (that returned records),
        ``buffered_bytes`` (fetched, not yet polled), ``assigned`` (partitions),
        ``lag`` ({(topic, partition): high watermark (read_committed: last
        stable offset) of the last fetch answer minus the position}, for partitions with both known) and
        ``lag_total``, ``fetch_throttle_time_ms_avg`` / ``_max`` (the quota
        throttle the brokers' fetch answers carried: throttle.py). A plain
        dict; never blocks, any thread."""
        return self._core.metrics()

    def seek(self, topic: str, partition: int, offset: int) -> None:
        """Next ``poll`` returns records from ``offset`` (never blocks). An
        offset past the log end or below its start is handled by
        ``auto_offset_reset`` at the next fetch."""
        self._core.seek(topic, partition, offset)
