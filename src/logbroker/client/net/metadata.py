"""Lookups shared by producers, consumers and the admin client (async,
loop-bound): partition counts (Metadata, through any broker) and offsets
(ListOffsets, from each partition's leader), over a ``Router``."""

from __future__ import annotations

import asyncio
import time

from ...errors import LogbrokerError, RequestTimedOutError, UnknownTopicOrPartitionError, for_code
from ...protocol import messages as m
from ...protocol.parts import OffsetQuery
from .routing import Router


async def partition_counts(router: Router, topics, *, auto_create: bool = False,
                           timeout: float, wait: bool = True) -> dict[str, int]:
    """Partition count of each topic in ``topics`` (tracked by the router
    from now on: its leaders are known too). Retriable per-topic errors (an
    unknown topic not created yet) are retried until ``timeout`` s, then
    raised (at once without ``wait``; a retry still unanswered at the
    deadline raises the error the one before it got, not its own timeout);
    so are connection failures (``BrokerUnavailableError``)."""
    deadline = time.monotonic() + timeout
    topics = tuple(dict.fromkeys(topics))
    err = None
    while True:
        try:
            resp = await router.metadata(topics, auto_create=auto_create,
                                         timeout=max(deadline - time.monotonic(), 0.001))
        except RequestTimedOutError:
            if err is None:
                raise
            raise err from None  # a retry cut by the deadline: what the topic last answered
        out, err = {}, None
        for name, code, message, count in resp.topics:
            if code:
                err = for_code(code)(message or f"topic {name!r}")
            else:
                out[name] = count
        if err is None:
            missing = [t for t in topics if t not in out]
            if not missing:
                return out
            err = UnknownTopicOrPartitionError(f"no metadata for topic {missing[0]!r}")
        if not wait or not err.retriable or time.monotonic() >= deadline:
            raise err
        await asyncio.sleep(min(0.1, max(deadline - time.monotonic(), 0)))


async def list_offsets(router: Router, specs: dict, *, timeout: "float | None" = None,
                       retry: bool = True, raise_errors: bool = True,
                       isolation: int = 0) -> dict:
    """``{(topic, partition): spec}`` -> ``{(topic, partition): (offset,
    timestamp)}``, asked of each partition's leader (``Router.by_leader``:
    retried across leader changes until ``timeout``, once without
    ``retry``). Raises the first partition's error, its message naming the
    partition; without ``raise_errors`` that error is the partition's value.
    ``isolation`` 1 (read_committed): "latest" is the last stable offset."""
    rows = await router.by_leader([OffsetQuery(t, p, spec) for (t, p), spec in specs.items()],
                                  lambda parts: m.ListOffsets(parts=parts, isolation=isolation),
                                  timeout=timeout,
                                  retry=retry)
    out = {}
    for tp in specs:
        row = rows[tp]
        if not isinstance(row, LogbrokerError):
            topic, partition, err, message, offset, ts = row
            row = part_error(err, message, topic, partition) if err else (offset, ts)
        if raise_errors and isinstance(row, LogbrokerError):
            raise row
        out[tp] = row
    return out


def part_error(code: int, message: str, topic: str, partition: int) -> LogbrokerError:
    """The exception of a per-partition error, its message naming the partition."""
    return for_code(code)(f"{topic}[{partition}]: {message}" if message else f"{topic}[{partition}]")
