"""Topic metadata lookups shared by producers and consumers (async, loop-bound)."""

from __future__ import annotations

import asyncio
import time

from ..errors import LogbrokerError, UnknownTopicOrPartitionError, for_code
from ..protocol import messages as m
from .link import BrokerLink


async def partition_counts(link: BrokerLink, topics, *, auto_create: bool = False,
                           timeout: float, wait: bool = True) -> dict[str, int]:
    """Partition count of each topic in ``topics``. Retriable per-topic errors
    (an unknown topic not created yet) are retried until ``timeout`` s, then
    raised (at once without ``wait``); so are connection failures
    (``BrokerUnavailableError``)."""
    deadline = time.monotonic() + timeout
    topics = tuple(dict.fromkeys(topics))
    while True:
        resp = await link.call(m.Metadata(topics=topics, auto_create=auto_create),
                               max(deadline - time.monotonic(), 0.001))
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


async def all_topics(link: BrokerLink, timeout: float) -> dict[str, int]:
    """Every topic and its partition count."""
    resp = await link.call(m.Metadata(topics=None), timeout)
    return {name: count for name, code, _, count in resp.topics if not code}


def part_error(code: int, message: str, topic: str, partition: int) -> LogbrokerError:
    """The exception of a per-partition error, its message naming the partition."""
    return for_code(code)(f"{topic}[{partition}]: {message}" if message else f"{topic}[{partition}]")
