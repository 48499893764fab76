"""Group commit of one log without a flusher thread (docs/architecture.md,
decision 6).

The first caller that needs an fsync performs it, outside the log's lock,
for everything written so far; callers arriving meanwhile wait on a
condition and are released by that fsync or perform the next one.
``flushed`` is the offset below which everything is known to be fsynced.

The logs share ``STRIPES`` conditions (a log's is picked by its identity):
a condition costs ~1.3 KB and a broker may hold 50,000 logs. A waiter woken
for another log of its stripe sees its own state unchanged and waits again.
"""

from __future__ import annotations

import threading
from typing import Callable


STRIPES = 64
_CONDS = tuple(threading.Condition() for _ in range(STRIPES))


class Flusher:
    __slots__ = ("flushed", "fsyncs", "_busy", "_cond")

    def __init__(self, flushed: int) -> None:
        self.flushed = flushed
        self.fsyncs = 0
        self._busy = False
        self._cond = _CONDS[(id(self) >> 4) % STRIPES]

    def sync_to(self, target: int, fsync: Callable[[], "int | None"]) -> None:
        """Return once everything below ``target`` is fsynced: wait for the
        fsync in flight, or run ``fsync()`` as the one flusher. ``fsync``
        returns the offset it made durable (None: nothing may be trusted) or
        raises; either way the waiters are woken to see for themselves."""
        with self._cond:
            while self.flushed < target:
                if not self._busy:
                    self._busy = True
                    break
                self._cond.wait()
            else:
                return
        done = None
        try:
            done = fsync()
            self.fsyncs += 1
        finally:
            with self._cond:
                self._busy = False
                if done is not None:
                    self.flushed = max(self.flushed, done)
                self._cond.notify_all()

    def synced(self, offset: int) -> None:
        """An fsync outside ``sync_to`` (a roll) made everything below ``offset`` durable."""
        with self._cond:
            self.fsyncs += 1
            self.flushed = max(self.flushed, offset)

    def cut(self, end: int) -> None:
        """The log was cut back to ``end``: nothing at or past it is durable."""
        with self._cond:
            self.flushed = min(self.flushed, end)
