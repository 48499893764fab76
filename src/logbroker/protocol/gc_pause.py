"""Pausing CPython's cyclic garbage collector while many acyclic objects
are built at once (a decoded frame of thousands of parts, a poll's
records).

Each 700 new container objects start a young collection, and every tenth
of those an older one that walks what survived before: decoding a
Metadata answer of 10,000 partitions spent ~60% of its time (~15 of 25
ms) in collections that freed nothing, since what a decode builds holds
no cycle. ``pause()`` disables the collector when it was enabled and
``resume()`` enables it again once no pause of any thread goes on; the
objects made meanwhile are looked at by the next collection as usual.
The pauses of the consumer's two threads overlap (a poll building
records, the fetch loop decoding an answer): counted, so one ending never
turns the collector on under the other. A collector the application
disabled stays disabled.
"""

from __future__ import annotations

import gc
import threading

_lock = threading.Lock()
_depth = 0  # pauses begun and not yet ended, every thread's
_restore = False  # the collector was on when the first of them began


def pause() -> None:
    """Disable the cyclic GC (if it was enabled) until the matching
    ``resume``; use as ``pause()`` then ``try: ... finally: resume()``. No
    context manager: making one allocates tracked objects, and an
    allocation right after a poll's records were built (a young
    generation past its threshold) starts a collection before the pause
    does (ten young collections and a full one in reading 100,000 records
    at one partition)."""
    global _depth, _restore
    with _lock:
        if _depth == 0:
            _restore = gc.isenabled()
            if _restore:
                gc.disable()
        _depth += 1


def resume() -> None:
    """End a ``pause``: the collector is on again once no pause of any
    thread goes on (if it was on when the first began)."""
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0 and _restore:
            gc.enable()
