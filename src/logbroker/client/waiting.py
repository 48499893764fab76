"""How the sync and asyncio shells wait on a client core.

- ``ThreadWakeup`` / ``LoopWakeup``: a generation counter bumped by
  ``notify()``; ``wait(seen, deadline)`` returns at once if the generation
  moved past ``seen``, else when it does or at ``deadline`` (monotonic s).
  Read ``gen`` *before* looking for data, so a notify in between is never
  lost. ``ThreadWakeup.notify`` may be called from any thread;
  ``LoopWakeup.notify`` only on its loop.
- ``Steps`` / ``Call``: a sequence written once in a core (closing a
  consumer, applying its rebalance changes) as a generator of steps, each a
  coroutine to run on the client's loop or a ``Call`` of the application's
  callback; the shells only perform each step their way and hand back its
  result or exception (``SyncShell._drive``, ``AsyncShell._drive``), so both
  behave the same.
- ``SyncShell`` / ``AsyncShell``: bases of the sync clients (``_run`` a
  core coroutine on the I/O thread, ``_stop`` it, ``with``) and of the
  asyncio ones (``_await`` a core coroutine, ``async with``).
- ``IdleTimer``: when iteration over a consumer ends (``consumer_timeout_ms``).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
import time
from typing import Callable, Generator, NamedTuple

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


class Call(NamedTuple):
    """A step of a core's sequence: the application's callback ``fn(*args)``,
    called where the application polls (the sync caller's thread, the
    asyncio caller's task). Its exception is thrown back into the sequence."""

    fn: Callable
    args: tuple


class Steps:
    """One run of a core's step generator. The shell asks ``next()`` for a
    step (None once the sequence ended: ``next()`` raises what it raised),
    performs it, and reports its result with ``done(value)`` or its
    exception with ``failed(exc)``, which the sequence sees where it
    yielded that step."""

    def __init__(self, steps: Generator) -> None:
        self._steps, self._value, self._error = steps, None, None

    def next(self):
        value, error, self._value, self._error = self._value, self._error, None, None
        try:
            return self._steps.throw(error) if error is not None else self._steps.send(value)
        except StopIteration:
            return None

    def done(self, value) -> None:
        self._value = value

    def failed(self, exc: BaseException) -> None:
        self._error = exc


def call_here(call: Call):
    """A ``Call`` in the sync caller's thread: a callback that returns an
    awaitable is refused (``TypeError``, the callback's error): only the
    asyncio clients await callbacks."""
    result = call.fn(*call.args)
    if inspect.isawaitable(result):
        if inspect.iscoroutine(result):
            result.close()
        raise TypeError(f"callback {getattr(call.fn, '__name__', call.fn)!r} returned an "
                        "awaitable: a sync client calls plain functions (use logbroker.aio "
                        "for coroutine callbacks)")
    return result


async def call_awaiting(call: Call):
    """A ``Call`` in the asyncio caller's task: an awaitable result is awaited."""
    result = call.fn(*call.args)
    if inspect.isawaitable(result):
        result = await result
    return result


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

    def _drive(self, steps: Generator) -> None:
        """Run a core's sequence (``Steps``): coroutines on the I/O thread,
        ``Call``s in this thread; raises what the sequence raises."""
        run = Steps(steps)
        while (step := run.next()) is not None:
            try:
                run.done(call_here(step) if isinstance(step, Call) else self._run(step))
            except BaseException as exc:  # noqa: BLE001 - the sequence decides
                run.failed(exc)

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
    """Base of the asyncio clients: ``self._core`` (with ``closed`` and
    ``check_open()``) is set by them; ``async with`` closes them."""

    async def _await(self, coro):
        """Await a core coroutine; ``ClientClosedError`` once closed."""
        if self._core.closed:
            coro.close()
            self._core.check_open()
        return await coro

    async def _drive(self, steps: Generator) -> None:
        """Run a core's sequence (``Steps``) in this task: coroutines and
        ``Call``s awaited; raises what the sequence raises."""
        run = Steps(steps)
        while (step := run.next()) is not None:
            try:
                run.done(await (call_awaiting(step) if isinstance(step, Call) else step))
            except BaseException as exc:  # noqa: BLE001 - the sequence decides
                run.failed(exc)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()
