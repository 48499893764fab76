"""The compactor's key map: key -> offset of its newest record seen, in a
bounded amount of memory (Kafka's SkimpyOffsetMap, with exact keys).

Each entry is charged its key's length plus ``ENTRY_COST`` bytes (the dict
slot, the key and int objects); ``put`` refuses a new key once the charge
would pass ``max_bytes``. The compactor then stops its scan at that batch
and cleans the prefix of the dirty section the map covers; the next pass
goes on from there. Not thread-safe (one compaction job owns it).
"""

from __future__ import annotations

ENTRY_COST = 100


class KeyMap:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._latest: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._latest)

    def fits(self, keys: list) -> bool:
        """Whether every key of ``keys`` (None: no key) can be put now."""
        new = sum(len(k) + ENTRY_COST for k in set(keys) if k is not None and k not in self._latest)
        return self.used + new <= self.max_bytes

    def put_all(self, keys: list, base_offset: int) -> None:
        """Record ``keys[i]`` at offset ``base_offset + i`` (later wins);
        callers check ``fits`` first."""
        latest = self._latest
        for i, key in enumerate(keys):
            if key is not None:
                if key not in latest:
                    self.used += len(key) + ENTRY_COST
                latest[key] = base_offset + i

    def latest(self, key: bytes) -> int:
        """Offset of ``key``'s newest record seen, or -1."""
        return self._latest.get(key, -1)
