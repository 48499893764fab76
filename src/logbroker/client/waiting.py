"""How the sync and asyncio shells wait on a client core.

- ``ThreadWakeup`` / ``LoopWakeup``: a generation counter bumped by
  ``notify()``; ``wait(seen, deadline)`` returns at once if the generation
  moved past ``seen``, else when it does or at ``deadline`` (monotonic s).
  Read ``gen`` *before* looking for data, so a notify in between is never
  lost. ``ThreadWakeup.notify`` may be called from any thread;
  ``LoopWakeup.notify`` only on its loop.
- ``blocking`` / ``awaiting`` / ``direct``: a shell method that runs the
  core's coroutine on the sync client's I/O thread (``self._run``), awaits
  it, or calls the core's plain method, with its signature and docstring;
  ``forward(cls, core_cls, names, make)`` adds several.
- ``SyncShell`` / ``AsyncShell``: bases of the sync clients (``_run`` a
  core coroutine on the I/O thread, ``_stop`` it, ``with``) and of the
  asyncio ones (``async with``).
- ``IdleTimer``: when iteration over a consumer ends (``consumer_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time

from ..errors import LogbrokerError


class ThreadWakeup:
    def __init__(self) -> None:
        self.gen = 0
        self._cond = threading.Condition()

    def notify(self) -> None:
        with self._cond:
            self.gen += 1
            self._cond.notify_all()

    def wait(self, seen: int, deadline: float) -> None:
        with self._cond:
            if seen == self.gen:
                self._cond.wait(max(deadline - time.monotonic(), 0))


class LoopWakeup:
    def __init__(self) -> None:
        self.gen = 0
        self._event = asyncio.Event()

    def notify(self) -> None:
        self.gen += 1
        self._event.set()

    async def wait(self, seen: int, deadline: float) -> None:
        if seen != self.gen:
            return
        self._event.clear()
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0)):
                await self._event.wait()
        except TimeoutError:
            pass


def direct(core_cls: type, name: str):
    """A shell method that is the core's plain method ``name``."""
    target = getattr(core_cls, name)

    @functools.wraps(target)
    def method(self, *args, **kwargs):
        return getattr(self._core, name)(*args, **kwargs)

    return method


def blocking(core_cls: type, name: str):
    """A sync shell method: ``self._run(self._core.<name>(...))``."""
    target = getattr(core_cls, name)

    @functools.wraps(target)
    def method(self, *args, **kwargs):
        return self._run(getattr(self._core, name)(*args, **kwargs))

    return method


def awaiting(core_cls: type, name: str):
    """An asyncio shell method: ``await self._core.<name>(...)``."""
    target = getattr(core_cls, name)

    @functools.wraps(target)
    async def method(self, *args, **kwargs):
        self._core.check_open()
        return await getattr(self._core, name)(*args, **kwargs)

    return method


def forward(cls: type, core_cls: type, names, make) -> None:
    for name in names:
        setattr(cls, name, make(core_cls, name))


class IdleTimer:
    """Iteration's end: ``consumer_timeout_ms`` (None: never) without a record."""

    def __init__(self, idle_ms: "float | None") -> None:
        self._idle = None if idle_ms is None else idle_ms / 1000
        self._last = time.monotonic()
        self.poll_timeout = 0.5 if self._idle is None else min(0.5, self._idle)

    def expired(self, records: list) -> bool:
        now = time.monotonic()
        if records:
            self._last = now
            return False
        return self._idle is not None and now - self._last >= self._idle


class SyncShell:
    """Base of the sync clients: ``self._core`` (with ``closed`` and
    ``check_open()``) and ``self._io`` (a ``LoopThread``) are set by them."""

    _timeout: "float | None" = None  # bound of one blocking call (None: the core bounds it)

    def _run(self, coro):
        """Run a core coroutine on the I/O thread and return its result."""
        if self._core.closed:
            coro.close()
            self._core.check_open()
        return self._io.run(coro, self._timeout)

    def _stop(self, closing) -> None:
        """Run the core's closing coroutine (bounded), then end the I/O thread."""
        try:
            self._io.run(closing, 10)
        except (TimeoutError, LogbrokerError):
            pass
        self._io.stop()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class AsyncShell:
    """Base of the asyncio clients: ``async with`` closes them."""

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
