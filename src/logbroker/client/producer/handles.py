"""What ``send()`` returns: a light per-record handle over one batch signal.

A ``RecordHandle`` is a 2-tuple ``(batch, index)``: creating one costs about
as much as creating a tuple. There is no future per record; all records of a
batch share the batch's completion signal, and the record's offset is
computed when asked for (``base_offset + index``).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Callable, NamedTuple

CALLBACK_LOCK = threading.Lock()  # batch callbacks: added by users, run by the I/O side
_SIGNAL_LOCK = threading.Lock()  # a ThreadSignal's flag and its event, made on demand


class RecordMetadata(NamedTuple):
    """Where a produced record landed. ``offset`` is -1 with ``acks=0``."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ThreadSignal:
    """Completion signal of a batch for the sync producer: a flag, and a
    ``threading.Event`` made only when a caller waits before it is set (a
    producer spreading records over 1,000 partitions makes 1,000 batches a
    round; most are never waited on one by one)."""

    __slots__ = ("_set", "_event")

    def __init__(self) -> None:
        self._set = False
        self._event: "threading.Event | None" = None

    def set(self) -> None:
        with _SIGNAL_LOCK:
            self._set = True
            event = self._event
        if event is not None:
            event.set()

    def wait(self, timeout: "float | None") -> bool:
        if self._set:
            return True
        with _SIGNAL_LOCK:
            if self._set:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    def future(self):
        raise RuntimeError("a sync producer's record handle is not awaitable; call result()")


class LoopSignal:
    """Completion signal of a batch for the asyncio producer (one loop future,
    created only when someone awaits)."""

    __slots__ = ("_loop", "_future", "_set")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop, self._future, self._set = loop, None, False

    def set(self) -> None:
        self._set = True
        if self._future is not None and not self._future.done():
            self._future.set_result(None)

    def wait(self, timeout: "float | None") -> bool:
        if not self._set:
            raise RuntimeError("record not delivered yet: await the handle instead of result()")
        return True

    def future(self) -> asyncio.Future:
        if self._future is None:
            self._future = self._loop.create_future()
            if self._set:
                self._future.set_result(None)
        return self._future


class RecordHandle(tuple):
    """The outcome of one ``send()``: ``result(timeout)`` -> ``RecordMetadata``.

    - ``result(timeout=None)`` blocks until the record's batch is acknowledged
      and returns its metadata, or raises the batch's error (a
      ``LogbrokerError``). If ``timeout`` seconds pass first it raises the
      builtin ``TimeoutError`` and the record is still being delivered.
      Waiting sends the partition's open batch at once (no linger for it).
    - ``await handle`` (asyncio producer) returns the metadata or raises.
    - ``done()``, ``exception(timeout)``, ``add_done_callback(fn)`` as on
      ``concurrent.futures.Future``; callbacks run on the I/O thread (sync
      producer) or the loop (asyncio), receive the handle, and must be quick.
    """

    __slots__ = ()

    @property
    def topic(self) -> str:
        return self[0].topic

    @property
    def partition(self) -> int:
        return self[0].partition

    @property
    def timestamp(self) -> int:
        return self[0].timestamps[self[1]]

    def done(self) -> bool:
        return self[0].done

    def result(self, timeout: "float | None" = None) -> RecordMetadata:
        batch = self[0]
        if not batch.done and batch.owner is not None:
            batch.owner.hurry(batch)  # a caller that waits sends its partition's open batch
        if not batch.done and not batch.signal.wait(timeout):
            raise TimeoutError(f"record to {batch.topic}[{batch.partition}] not acknowledged "
                               f"within {timeout} s")
        return self._metadata()

    def exception(self, timeout: "float | None" = None) -> "BaseException | None":
        try:
            self.result(timeout)
        except TimeoutError:
            raise
        except BaseException as exc:  # noqa: BLE001 - returned, as Future.exception does
            return exc
        return None

    def add_done_callback(self, fn: Callable[["RecordHandle"], None]) -> None:
        batch = self[0]
        with CALLBACK_LOCK:
            if not batch.done:
                if batch.callbacks is None:
                    batch.callbacks = []
                batch.callbacks.append(lambda: fn(self))
                return
        fn(self)

    def __await__(self):
        batch = self[0]
        if not batch.done:
            if batch.owner is not None:
                batch.owner.hurry(batch)  # a caller that waits sends its partition's open batch
            yield from batch.signal.future().__await__()
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        batch, index = self
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + index if batch.base_offset >= 0 else -1
        return RecordMetadata(batch.topic, batch.partition, offset, batch.timestamps[index])

    def __repr__(self) -> str:
        batch, index = self
        state = "done" if batch.done else "pending"
        return f"<RecordHandle {batch.topic}[{batch.partition}] #{index} {state}>"


def new_handle(batch, index: int, _new=tuple.__new__, _cls=RecordHandle) -> RecordHandle:
    return _new(_cls, (batch, index))
