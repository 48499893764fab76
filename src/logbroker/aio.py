"""asyncio twins of ``logbroker.Producer``, ``Consumer`` and ``Admin``.

Same constructor arguments, same semantics and errors (docs/client.md);
methods that talk to the broker are coroutines, and the clients run on the
caller's event loop (no thread). Create and use each client inside one
running loop; ``async with`` closes it.

    async with Producer("127.0.0.1:9555") as producer:
        meta = await producer.send_and_wait("logs", b"hello")
        handle = await producer.send("logs", b"more")   # queued
        await handle                                     # -> RecordMetadata

The logic is the client cores' (``client/producer_core.py``,
``consumer_core.py``, ``admin_core.py``), shared with the sync clients;
these shells only await where those block.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from functools import partial
from typing import AsyncIterator

from .client.admin.core import METHODS as ADMIN_METHODS, AdminCore
from .client.consumer.core import COROUTINES, DIRECT, REBALANCE, ConsumerCore
from .client.producer.handles import LoopSignal, RecordHandle, RecordMetadata
from .client.net.routing import Router
from .client.producer.core import ProducerCore
from .client.consumer.records import ConsumerRecord
from .client.settings import TlsSettings, client_options
from .client.waiting import AsyncShell, IdleTimer, LoopWakeup, awaiting, direct, forward

from .errors import LogbrokerError

__all__ = ["Admin", "Consumer", "Producer"]
log = logging.getLogger("logbroker.client.group")


def _in_loop() -> bool:
    return True  # an asyncio client is only used on its loop


class Producer(AsyncShell):
    """asyncio twin of ``logbroker.Producer`` (same arguments)."""

    def __init__(self, bootstrap="127.0.0.1:9555", **kwargs) -> None:
        self._core = ProducerCore(bootstrap, **kwargs)
        self.settings, self.options = self._core.settings, self._core.options

    def _ensure(self) -> ProducerCore:
        """The core, bound to the running loop on first use."""
        core = self._core
        core.check_open()
        if core.acc is None:
            loop = asyncio.get_running_loop()
            core.start(loop, partial(LoopSignal, loop), in_loop=_in_loop, threadsafe=False)
        return core

    async def start(self) -> None:
        """Connect now (optional: ``send`` connects lazily); raises
        ``BrokerUnavailableError`` if the broker cannot be reached."""
        await self._ensure().router.control.connection()

    async def send(self, topic: str, value, key=None, headers=None,
                   partition: "int | None" = None,
                   timestamp_ms: "int | None" = None) -> RecordHandle:
        """Queue one record; returns its handle (``await handle`` ->
        ``RecordMetadata``). Waits only for a topic's metadata (first send)
        or for buffer space; raises as the sync ``send`` does."""
        core = self._core if self._core.acc is not None else self._ensure()
        handle = core.append(topic, value, key, headers, partition, timestamp_ms)
        if handle is None:
            handle = await core.send_slow(topic, value, key, headers, partition, timestamp_ms)
        return handle

    async def send_and_wait(self, topic: str, value, key=None, headers=None,
                            partition: "int | None" = None,
                            timestamp_ms: "int | None" = None) -> RecordMetadata:
        """``send`` and wait for the acknowledgement."""
        return await (await self.send(topic, value, key, headers, partition, timestamp_ms))

    async def partitions_for(self, topic: str) -> int:
        """The topic's partition count (one Metadata request on first use; cached)."""
        return await self._ensure().partitions_for(topic)

    def metrics(self) -> dict:
        """Counters of what this producer sent (plain, as the sync twin's)."""
        return self._core.metrics()

    async def flush(self, timeout: "float | None" = None) -> None:
        """Send everything queued and wait for every outcome; raises
        ``TimeoutError`` after ``timeout`` s (delivery continues)."""
        batches = self._core.flush_start(timeout)
        if batches:
            _, pending = await asyncio.wait([b.signal.future() for b in batches],
                                            timeout=timeout)
            if pending:
                raise self._core.flush_timed_out(timeout)

    async def close(self, timeout: "float | None" = None) -> None:
        """Flush (up to ``timeout`` s), then stop; undelivered records fail
        with ``ClientClosedError``. Idempotent."""
        if self._core.closed:
            return
        try:
            await self.flush(timeout)
        except TimeoutError:
            pass
        finally:
            await self._core.shutdown()

    async def __aenter__(self) -> "Producer":
        self._ensure()
        return self


class Consumer(AsyncShell):
    """asyncio twin of ``logbroker.Consumer`` (same arguments). ``seek`` and
    ``assign`` are plain methods; everything that may talk to the broker is
    a coroutine; ``async for record in consumer`` iterates."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, group: "str | None" = None,
                 client_id: str = "logbroker-consumer", request_timeout_ms: int = 30_000,
                 connect_timeout_ms: int = 5_000, **settings) -> None:
        self._wakeup = LoopWakeup()
        self._core = ConsumerCore(bootstrap, group, client_id, request_timeout_ms,
                                  connect_timeout_ms, settings, wakeup=self._wakeup,
                                  schedule=_call)
        self.settings, self.options = self._core.settings, self._core.options

    async def poll(self, timeout: float = 1.0,
                   max_records: "int | None" = None) -> list[ConsumerRecord]:
        """Records in offset order per partition, waiting up to ``timeout`` s; as the sync ``poll``."""
        call = self._core.poll_start(timeout, max_records)
        while True:
            records = self._core.poll_step(call)
            if records is REBALANCE:
                await self._apply_changes()
            elif records is None:
                await self._wakeup.wait(call.seen, call.deadline)
            else:
                return records

    async def _apply_changes(self) -> None:
        """As the sync consumer's: callbacks that return awaitables are awaited."""
        group, error = self._core.group, None
        while (item := group.changes.take()) is not None:
            change, done = item
            try:
                entries = group.before(change)
                if entries:
                    await group.committing(entries, "commit before revoking")
                error = error or await _callback(group.listener.callback(change.kind),
                                                 sorted(change.partitions))
                group.after(change)
            finally:
                group.changes.done(done)
        if error is not None:
            raise error

    async def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        idle = IdleTimer(self.settings.consumer_timeout_ms)
        while not self._core.closed:
            records = await self.poll(idle.poll_timeout)
            if idle.expired(records):
                return
            for record in records:
                yield record

    async def close(self) -> None:
        """Stop fetching and close connections; a group member first commits,
        calls ``on_revoke`` and leaves, as the sync ``close``. Idempotent."""
        if self._core.closed:
            return
        try:
            await self._leave_group()
        finally:
            await self._core.aclose()

    async def _leave_group(self) -> None:
        group, settings = self._core.group, self.settings
        if not group.managed:
            return
        if settings.enable_auto_commit:
            await group.committing(group.positions(), "commit on close")
        owned = sorted(self._core.buffer.states)
        if owned:  # static members too (Kafka's onLeavePrepare)
            error = await _callback(group.listener.on_revoke, owned)
            if error is not None:
                log.error("group %r: on_revoke while closing: %r", settings.group, error)
        try:
            await group.stop(leave=True)
        except LogbrokerError as exc:
            log.warning("group %r: leaving on close: %s", settings.group, exc)


async def _callback(fn, partitions: list) -> "Exception | None":
    """Call a rebalance callback (awaiting a coroutine's result); its exception is returned."""
    if fn is None:
        return None
    try:
        result = fn(partitions)
        if inspect.isawaitable(result):
            await result
    except Exception as exc:  # noqa: BLE001 - the application's: poll raises it
        return exc
    return None


def _call(fn, *args) -> None:
    fn(*args)  # the asyncio consumer is used on its loop: poke the fetcher directly


class Admin(AsyncShell):
    """asyncio twin of ``logbroker.Admin``: the same methods, as coroutines."""

    def __init__(self, bootstrap="127.0.0.1:9555", *, client_id: str = "logbroker-admin",
                 request_timeout_ms: int = 30_000, connect_timeout_ms: int = 5_000,
                 tls_ca: "str | None" = None, tls_cert: "str | None" = None,
                 tls_key: "str | None" = None, tls_check_hostname: bool = True,
                 username: "str | None" = None, password: "str | None" = None,
                 sasl_mechanism: str = "SCRAM-SHA-256") -> None:
        self.options = client_options(bootstrap, client_id, request_timeout_ms,
                                      connect_timeout_ms,
                                      TlsSettings(tls_ca, tls_cert, tls_key, tls_check_hostname,
                                                  username, password, sasl_mechanism))
        self._core = AdminCore(Router(self.options))

    async def close(self) -> None:
        """Close the connection. Idempotent."""
        await self._core.aclose()


forward(Consumer, ConsumerCore, DIRECT, direct)
forward(Consumer, ConsumerCore, COROUTINES + ("position",), awaiting)
forward(Admin, AdminCore, ADMIN_METHODS, awaiting)
