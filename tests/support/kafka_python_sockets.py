"""Sockets kafka-python leaks, held by the suite and closed at its end.

kafka-python 3.0.12 opens a connection's socket in
``KafkaNetSocket.connect`` and awaits writability with no try/finally; a
client closed while one of its connects is still in flight cancels that
coroutine, and the open socket is dropped. It dies in some later cyclic GC
pass, and its ResourceWarning (an error under ``filterwarnings = error``)
lands on whichever test runs then (CI saw it on a test that had done nothing
wrong). The suite keeps every socket kafka-python opens (dropping those
closed since) and closes the ones still open when the session ends: not at
each test's end, since a module's fixture may keep a client open across
its tests. Our own clients are not patched: a socket of ours
left open still fails the suite."""

from __future__ import annotations

import socket
import warnings

_OPENED: list[socket.socket] = []


def track() -> bool:
    """Patch kafka-python (if installed) so its sockets are kept in
    ``_OPENED``; True if patched."""
    try:
        with warnings.catch_warnings():  # its schema loader's importlib.resources deprecation
            warnings.simplefilter("ignore", DeprecationWarning)
            from kafka.net import inet
    except ImportError:
        return False
    make = inet.KafkaNetSocket.socket

    def tracked(self, *args, **kwargs):
        sock = make(self, *args, **kwargs)
        if len(_OPENED) >= 64:  # the closed ones go: the list stays short
            _OPENED[:] = still_open()
        _OPENED.append(sock)
        return sock

    inet.KafkaNetSocket.socket = tracked
    return True


def still_open() -> list[socket.socket]:
    """The sockets kafka-python opened that are still open."""
    return [s for s in _OPENED if s.fileno() != -1]


def close_leftovers() -> int:
    """Close the kafka-python sockets still open; returns how many."""
    left = still_open()
    _OPENED.clear()
    for sock in left:
        sock.close()
    return len(left)
