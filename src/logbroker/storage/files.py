"""A bounded cache of open segment file descriptors.

Many partitions must not exhaust descriptors: at most ``max_open`` idle
descriptors stay open, and housekeeping closes those unused for ``IDLE_S``
(``close_idle``): an idle partition holds none, however large the budget.
When every slot is taken, a newcomer gets the least recently used one only
if that was unused for ``admit_idle_s`` (10 s); else its descriptor is
opened for the one use and closed after. Plain LRU would evict on every
miss: a broker writing 10,000 partitions round-robin through 4,096 slots
reopened every file at every append (no hit at all, the worst case of
LRU under a cycle); now the 4,096 that hold a slot keep it while they are
written, and 41% of the appends find their file open (decision 117). A
descriptor in use (inside ``with cache.fd(segment)``) is never closed under
its user, so a read that started before a segment was renamed or deleted
completes (POSIX keeps an unlinked file readable through an open descriptor).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict


IDLE_S = 60.0  # a descriptor unused this long is closed by housekeeping
ADMIT_IDLE_S = 10.0  # a full cache gives a slot up only to a newcomer once unused this long


class _Entry:
    """An open descriptor and its users; also the context manager ``fd``
    returns (a class, not a generator: a fetch or produce of thousands of
    partitions enters it two or three times per partition)."""

    __slots__ = ("fd", "refs", "closing", "used", "cache")

    def __init__(self, fd: int, cache: "FileCache") -> None:
        self.fd, self.refs, self.closing, self.used, self.cache = fd, 0, False, 0.0, cache

    def __enter__(self) -> int:
        return self.fd

    def __exit__(self, *exc) -> None:
        self.cache._release(self)


class FileCache:
    """Descriptors keyed by an owner object (a Segment) that knows its path."""

    def __init__(self, max_open: int = 512, admit_idle_s: float = ADMIT_IDLE_S) -> None:
        self.max_open = max_open
        self.admit_idle_s = admit_idle_s
        self._entries: "OrderedDict[object, _Entry]" = OrderedDict()
        self._lock = threading.Lock()
        self.opens = 0  # descriptors opened so far (tests, stats)

    def fd(self, owner, path: str, *, flags: int = os.O_RDWR) -> _Entry:
        """For ``with``: an open descriptor of ``path`` for the duration of
        the block (counted as in use from this call: call it only in the
        ``with`` statement)."""
        with self._lock:
            entry = self._entries.get(owner)
            if entry is None or entry.closing:
                entry = _Entry(os.open(path, flags | os.O_CLOEXEC), self)
                self.opens += 1
                if len(self._entries) < self.max_open or self._make_room():
                    self._entries[owner] = entry
                else:  # every slot recently used: this one is closed after the block
                    entry.closing = True
            else:
                self._entries.move_to_end(owner)
            entry.refs += 1
        return entry

    def _make_room(self) -> bool:
        """The cache full (lock held): close the least recently used
        descriptor if nobody used it for ``admit_idle_s``; whether a slot
        is free now."""
        owner, entry = next(iter(self._entries.items()))
        if entry.refs or time.monotonic() - entry.used < self.admit_idle_s:
            return False
        os.close(self._entries.pop(owner).fd)
        return True

    def _release(self, entry: _Entry) -> None:
        with self._lock:
            entry.refs -= 1
            entry.used = time.monotonic()
            if entry.closing and entry.refs == 0:
                os.close(entry.fd)
            self._evict()

    def forget(self, owner) -> None:
        """Close ``owner``'s descriptor now, or when its last user is done."""
        with self._lock:
            entry = self._entries.pop(owner, None)
            if entry is not None:
                entry.closing = True
                if entry.refs == 0:
                    os.close(entry.fd)

    def open_count(self) -> int:
        with self._lock:
            return len(self._entries)

    def close_all(self) -> None:
        with self._lock:
            owners = list(self._entries)
        for owner in owners:
            self.forget(owner)

    def close_idle(self, idle_s: float = IDLE_S, now: "float | None" = None) -> int:
        """Close the descriptors nobody used for ``idle_s`` seconds (and
        nobody uses now); returns how many. Walks from the least recently
        used and stops at the first recent one: O(closed)."""
        cutoff = (time.monotonic() if now is None else now) - idle_s
        with self._lock:
            victims = []
            for owner, entry in self._entries.items():
                if entry.used > cutoff:
                    break
                if entry.refs == 0:
                    victims.append(owner)
            for owner in victims:
                os.close(self._entries.pop(owner).fd)
        return len(victims)

    def _evict(self) -> None:
        """Close idle descriptors, least recently used first, down to
        ``max_open``: O(excess), not O(open), as it runs on every release."""
        excess = len(self._entries) - self.max_open
        if excess <= 0:
            return
        victims = []
        for owner, entry in self._entries.items():
            if entry.refs == 0:
                victims.append(owner)
                if len(victims) >= excess:
                    break
        for owner in victims:
            os.close(self._entries.pop(owner).fd)
