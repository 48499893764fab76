"""Frozen results of Log calls: where an append landed, a timestamp lookup's
answer, and a segment slice for ``sendfile``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from .segment import Segment


class AppendInfo(NamedTuple):
    """Where an append landed: offsets [first_offset, last_offset]. A named
    tuple: one per part of every produce (a third of a frozen dataclass's
    cost to make)."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    batches: int
    size: int


@dataclass(frozen=True)
class TimestampOffset:
    offset: int
    timestamp: int


@dataclass(frozen=True)
class FileSlice:
    """``size`` bytes at ``position`` of a segment file, as a fetch sends them."""

    segment: Segment
    position: int
    size: int

    def __len__(self) -> int:
        return self.size

    def fd(self):
        """Context manager: a descriptor of the segment, valid even if the
        segment is deleted meanwhile (the descriptor cache holds it)."""
        return self.segment.files.fd(self.segment, self.segment.path)

    def read(self) -> bytes:
        return self.segment.read(self.position, self.size)
