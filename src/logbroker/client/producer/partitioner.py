"""Choosing a partition for a record (stable across processes and runs).

- keyed records: ``(crc32c(key) & 0x7fffffff) % partitions`` — the CRC-32C
  (Castagnoli) of the key bytes, the checksum the batch format already uses,
  hardware accelerated. Every logbroker client must use this function so
  one key always lands in one partition (until the partition count changes).
- unkeyed records: round-robin over the partitions, per producer.
"""

from __future__ import annotations

from itertools import count

from crc32c import crc32c


def partition_for_key(key: bytes, partitions: int) -> int:
    """The partition of ``key`` among ``partitions`` (> 0)."""
    return (crc32c(key) & 0x7FFFFFFF) % partitions


class RoundRobin:
    """Unkeyed records: 0, 1, 2, ... modulo the topic's partition count."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = count().__next__

    def __call__(self, partitions: int) -> int:
        return self._next() % partitions
