"""The background I/O thread of a sync client: an asyncio loop in a thread.

Sync clients (``logbroker.Producer``, ``Consumer``, ``Admin``) run the same
asyncio code as their ``logbroker.aio`` twins on a private loop in one
daemon thread; the caller's thread talks to it with ``run()`` (a coroutine
round trip, ~50 us) or ``call_soon()`` (fire and forget). Hot paths avoid
both: ``Producer.send`` only appends under a lock and wakes the loop when
it is idle; ``Consumer.poll`` decodes buffered data in the caller's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from typing import Any, Coroutine

from ..errors import ClientClosedError


class LoopThread:
    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._stopped = False
        self._thread.start()

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def run(self, coro: Coroutine, timeout: "float | None" = None) -> Any:
        """Run ``coro`` on the loop and return its result (blocking). If
        ``timeout`` passes first the coroutine is cancelled and the builtin
        ``TimeoutError`` raised. Raises ``ClientClosedError`` after ``stop()``,
        and ``RuntimeError`` on the loop's own thread (a blocking call from a
        client callback would wait for itself forever)."""
        if self._stopped:
            coro.close()
            raise ClientClosedError("the client is closed")
        if self.is_loop_thread():
            coro.close()
            raise RuntimeError("a blocking client call from the client's own callback "
                               "would deadlock")
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except concurrent.futures.TimeoutError:
            fut.cancel()
            raise TimeoutError(f"operation did not finish within {timeout} s") from None
        except concurrent.futures.CancelledError:
            raise ClientClosedError("the client was closed during the call") from None

    def call_soon(self, fn, *args) -> None:
        """Schedule ``fn(*args)`` on the loop (thread-safe, never blocks)."""
        if not self._stopped:
            try:
                self.loop.call_soon_threadsafe(fn, *args)
            except RuntimeError:  # loop closed meanwhile
                pass

    def is_loop_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel leftover tasks, stop the loop, join the thread, close the loop."""
        if self._stopped:
            return
        if self.is_loop_thread():
            raise RuntimeError("a client cannot be closed from its own callbacks")
        try:
            self.run(self._cancel_all(), timeout)
        except (TimeoutError, ClientClosedError):
            pass
        self._stopped = True
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self.loop.close()

    async def _cancel_all(self) -> None:
        me = asyncio.current_task()
        tasks = [t for t in asyncio.all_tasks() if t is not me]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.loop.shutdown_asyncgens()
