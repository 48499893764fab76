"""The asyncio ``Consumer`` (``logbroker.aio.Consumer``): the sync
``Consumer``'s twin over the same ``ConsumerCore`` (consumer/core.py), on
the caller's event loop (no thread). Every method keeps the sync one's
contract (consumer/sync.py's docstrings); those that may talk to the
broker are coroutines. Rebalance changes and closing are the core's
sequences of steps (``applying``, ``leaving``) performed by ``_drive``, as
the sync shell does; here a callback may also be a coroutine function
(awaited)."""

from __future__ import annotations

from typing import AsyncIterator, Iterable

from ..waiting import AsyncShell, IdleTimer, LoopWakeup
from .core import REBALANCE, ConsumerCore
from .records import ConsumerRecord
from .shell import ConsumerShell


class Consumer(ConsumerShell, AsyncShell):
    """asyncio twin of ``logbroker.Consumer`` (same arguments). ``assign``,
    ``seek``, ``subscription``, ``assignment``, ``highwater`` and
    ``metrics`` are plain methods; everything that may talk to the broker
    is a coroutine; ``async for record in consumer`` iterates."""

    def __init__(self, bootstrap="127.0.0.1:9555", **settings) -> None:
        self._wakeup = LoopWakeup()
        super().__init__(ConsumerCore(bootstrap, wakeup=self._wakeup, schedule=_call,
                                      **settings))

    # -- what to read (assign, subscription, assignment, highwater, metrics: shell.py) ---------
    async def subscribe(self, topics=None, *, pattern=None, on_assign=None, on_revoke=None,
                        on_lost=None) -> None:
        """As ``logbroker.Consumer.subscribe``; a callback may be a coroutine function."""
        await self._await(self._core.subscribe(topics, pattern=pattern, on_assign=on_assign,
                                               on_revoke=on_revoke, on_lost=on_lost))

    # -- positions (seek: shell.py) -----------------------------------------------------------
    async def seek_to_beginning(self, partitions: "Iterable | None" = None) -> None:
        """As ``logbroker.Consumer.seek_to_beginning``."""
        await self._await(self._core.seek_to_beginning(partitions))

    async def seek_to_end(self, partitions: "Iterable | None" = None) -> None:
        """As ``logbroker.Consumer.seek_to_end``."""
        await self._await(self._core.seek_to_end(partitions))

    async def seek_to_timestamp(self, timestamp_ms: int,
                                partitions: "Iterable | None" = None) -> None:
        """As ``logbroker.Consumer.seek_to_timestamp``."""
        await self._await(self._core.seek_to_timestamp(timestamp_ms, partitions))

    async def position(self, topic: str, partition: int) -> int:
        """As ``logbroker.Consumer.position``."""
        return await self._await(self._core.position(topic, partition))

    # -- offsets of the group ---------------------------------------------------------------------
    async def commit(self, offsets: "dict | None" = None) -> None:
        """As ``logbroker.Consumer.commit``: raises what the broker refused."""
        await self._await(self._core.commit(offsets))

    async def committed(self, topic: "str | None" = None, partition: "int | None" = None):
        """As ``logbroker.Consumer.committed``."""
        return await self._await(self._core.committed(topic, partition))

    # -- polling ----------------------------------------------------------------------------------
    async def poll(self, timeout: float = 1.0,
                   max_records: "int | None" = None) -> list[ConsumerRecord]:
        """As ``logbroker.Consumer.poll``: records in offset order per
        partition, waiting up to ``timeout`` s; rebalance callbacks run in
        this task (coroutines awaited)."""
        call = self._core.poll_start(timeout, max_records)
        while True:
            records = self._core.poll_step(call)
            if records is REBALANCE:
                await self._drive(self._core.applying())
            elif records is None:
                await self._wakeup.wait(call.seen, call.deadline)
            else:
                return records

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        """As iterating ``logbroker.Consumer``."""
        idle = IdleTimer(self.settings.consumer_timeout_ms)
        while not self._core.closed:
            records = await self.poll(idle.poll_timeout)
            if idle.expired(records):
                return
            for record in records:
                yield record

    async def close(self) -> None:
        """As ``logbroker.Consumer.close``: a member commits, calls
        ``on_revoke`` and leaves, each failure logged; never raises for them.
        Idempotent."""
        if self._core.closed:
            return
        try:
            await self._drive(self._core.leaving())
        finally:
            await self._core.aclose()


def _call(fn, *args) -> None:
    fn(*args)  # the asyncio consumer is used on its loop: poke the fetcher directly
