"""Routing: which broker gets which request, and keeping that knowledge fresh.

One ``Router`` per client holds the ``MetadataCache`` (cluster_meta.py) and
the client's links (link.py), all loop-bound, no global state:

- the **control** link, for requests that name no partition (metadata, topic
  and group admin, committed offsets, DescribeCluster, ElectLeaders,
  producer ids): it connects to a live broker it knows, else to the
  bootstrap list, in order; an address that fails is skipped to the next.
- per broker, links made on first use, ``link(broker_id, purpose)``: purpose
  ``""`` carries produce and ListOffsets, ``"fetch"`` the consumer's long
  polls (a long poll delays everything behind it on its connection). The
  ``""`` traffic of a broker shares the control connection while that one is
  connected to the same broker: a single node needs one connection, as it
  did before routing.

``refresh()`` sends one Metadata for the tracked topics through the control
link and applies it. Concurrent callers share one request; refreshes of one
incident are paced by exponential backoff (the first at once, then 50 ms
doubling to ``REFRESH_PACE_MAX`` = 0.4 s, jittered), so a client waiting out
an election asks a few times a second at most and learns the new leader
within ~0.4 s of its election (1 s added ~0.5 s to the median failover). ``refreshes`` counts the requests sent, and
``cache.version`` changes with the leaders: tests observe both, and
``sent`` (requests sent through ``call``/``by_leader`` and Metadata, by message type:
``sent["ListOffsets"]``).

``by_leader()`` sends a partitioned request (ListOffsets) as one request per
leader, concurrently, and sends again what a routing error, a missing leader
or a lost connection kept from an answer, after a refresh, until its deadline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Callable, Iterable

from ...errors import (LeaderNotAvailableError, LogbrokerError, UnknownTopicOrPartitionError,
                       for_code)
from ...protocol import messages as m
from .backoff import Backoff
from .cluster_meta import REROUTE, WILDCARD_HOSTS, MetadataCache
from .connection import BrokerConnection
from .link import BrokerLink, ClientOptions, cancel_and_wait

REROUTE_CODES = frozenset(cls.code for cls in REROUTE)


REFRESH_PACE_MAX = 0.4  # s between metadata refreshes of one incident, at most


class Router:
    def __init__(self, options: ClientOptions, *, auto_create: bool = False) -> None:
        """``auto_create``: refreshes ask the broker to create tracked topics
        that do not exist (a producer's ``auto_create_topics``)."""
        self.options = options
        self.auto_create = auto_create
        self.cache = MetadataCache()
        self.control = BrokerLink(options, self._control_addresses)
        self._links: dict[tuple[int, str], BrokerLink] = {}
        self._current: dict[int, "BrokerConnection | None"] = {}  # last answer of current()
        self._refreshing: "asyncio.Task | None" = None
        self._pacing = Backoff(options.reconnect_backoff,
                               min(options.reconnect_backoff_max, REFRESH_PACE_MAX))
        self._last_refresh = -1e9
        self.refreshes = 0
        self.sent: Counter = Counter()  # requests sent by call() and Metadata, by message type name

    @property
    def metadata_requests(self) -> int:
        """Metadata requests sent (refreshes included)."""
        return self.sent["Metadata"]

    # -- addresses --------------------------------------------------------------------------
    def _control_addresses(self) -> list:
        known = [self.reachable(addr) for _, addr in sorted(self.cache.brokers.items())]
        return list(dict.fromkeys(known + list(self.options.bootstrap)))

    def reachable(self, addr: tuple[str, int]) -> tuple[str, int]:
        """A broker advertising a wildcard host (``serve --host 0.0.0.0``) is
        reached at the host the control link (else the bootstrap) uses."""
        host, port = addr
        if host in WILDCARD_HOSTS:
            via = self.control.address or self.options.bootstrap[0]
            return via[0], port
        return addr

    def _broker_addresses(self, broker_id: int) -> list:
        addr = self.cache.address(broker_id)
        return [] if addr is None else [self.reachable(addr)]

    # -- links ------------------------------------------------------------------------------
    def link(self, broker_id: int, purpose: str = "") -> BrokerLink:
        """The link to ``broker_id`` for ``purpose`` (made on first use; it
        reconnects to the broker's address in the current metadata)."""
        key = (broker_id, purpose)
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = BrokerLink(
                self.options, lambda: self._broker_addresses(broker_id), f"broker {broker_id}")
        return link

    def current(self, broker_id: int) -> "BrokerConnection | None":
        """The live connection for ``broker_id``'s "" traffic, or None (never
        connects; any thread; the producer asks on every drain)."""
        conn = self._current.get(broker_id)
        if conn is not None and conn.error is None:
            return conn
        link = self._links.get((broker_id, ""))
        conn = link.current() if link is not None else None
        if conn is None and self.control.broker_id == broker_id:
            conn = self.control.current()
        self._current[broker_id] = conn
        return conn

    async def connection(self, broker_id: int, purpose: str = "",
                         timeout: "float | None" = None) -> BrokerConnection:
        """A live connection to ``broker_id`` (connecting if needed within
        ``timeout``); raises ``BrokerUnavailableError``."""
        conn = self.current(broker_id) if not purpose else None
        return conn or await self.link(broker_id, purpose).connection(timeout)

    def drop(self, broker_id: int, purpose: str = "") -> None:
        link = self._links.get((broker_id, purpose))
        if link is not None:
            link.drop()

    async def call(self, broker_id: int, message: m.Message,
                   timeout: "float | None" = None) -> m.Response:
        """One request to ``broker_id`` (no retry); raises the response's
        top-level error, ``BrokerUnavailableError``, ``RequestTimedOutError``."""
        timeout = self.options.request_timeout if timeout is None else timeout
        self.sent[type(message).__name__] += 1
        conn = self.current(broker_id)
        if conn is None:
            return await self.link(broker_id).call(message, timeout, retry=False)
        resp = await conn.request(message, timeout)
        if resp.error:
            raise for_code(resp.error)(resp.message)
        return resp

    async def call_any(self, message: m.Message, timeout: "float | None" = None, *,
                       retry: bool = True) -> m.Response:
        """A request that names no partition, through the control link (see
        ``BrokerLink.call``)."""
        return await self.control.call(message, timeout, retry=retry)

    # -- metadata ---------------------------------------------------------------------------
    def track(self, topics: Iterable[str]) -> None:
        self.cache.track(topics)

    def invalidate(self, tps=None, broker: "int | None" = None) -> None:
        """A routing error was seen (see ``MetadataCache.invalidate``)."""
        self.cache.invalidate(tps, broker)

    async def metadata(self, topics: "Iterable[str] | None", *, auto_create: bool = False,
                       timeout: "float | None" = None, retry: bool = True) -> m.MetadataResponse:
        """One Metadata request (``topics`` None: every topic, not tracked),
        applied to the cache; the topics named are tracked from now on."""
        names = None if topics is None else tuple(topics)
        if names is not None:
            self.cache.track(names)
        self.sent["Metadata"] += 1
        resp = await self.control.call(m.Metadata(topics=names, auto_create=auto_create), timeout,
                                       retry=retry)
        self.cache.update(resp)
        return resp

    async def refresh(self, *, force: bool = False, retry: bool = True) -> None:
        """Bring the cache up to date when it is stale (or ``force``): one
        Metadata for the tracked topics, shared by concurrent callers and
        paced (module docstring). Raises the control link's errors
        (``BrokerUnavailableError``, ``RequestTimedOutError``, ...): without
        ``retry`` those of its first attempt, else after ``request_timeout``."""
        task = self._refreshing
        if task is None or task.done():
            if not (force or self.cache.stale):
                return
            task = self._refreshing = asyncio.ensure_future(self._refresh(retry))
            task.add_done_callback(_retrieve)
        await asyncio.shield(task)

    async def _refresh(self, retry: bool) -> None:
        now = time.monotonic()
        if now - self._last_refresh > self._pacing.cap:
            self._pacing.reset()  # a new incident: at once
        else:
            await asyncio.sleep(max(self._last_refresh + self._pacing.next() - now, 0))
        self._last_refresh = time.monotonic()
        self.refreshes += 1
        self.sent["Metadata"] += 1
        resp = await self.control.call(m.Metadata(topics=tuple(sorted(self.cache.tracked)),
                                                  auto_create=self.auto_create), retry=retry)
        self.cache.update(resp)

    # -- partitioned requests ---------------------------------------------------------------
    async def by_leader(self, entries: list, make: Callable[[tuple], m.Message], *,
                        timeout: "float | None" = None, retry: bool = True) -> dict:
        """Send ``entries`` (tuples starting with topic, partition) to their
        leaders: ``make(entries)`` builds the request for one leader; the
        requests go concurrently. Returns ``{(topic, partition): row}``, a
        row being the response's part (topic, partition, error, message,
        ...) or, for a partition that got none, the error why: UNKNOWN_TOPIC_OR_PARTITION
        (the metadata has no such partition), LEADER_NOT_AVAILABLE, or the
        last connection error. Routing errors, missing leaders and lost
        connections are retried after a refresh with backoff until
        ``timeout`` (default ``request_timeout``); once without ``retry``.
        Raises only a non-retriable top-level error of a response."""
        timeout = self.options.request_timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        todo = {(e.topic, e.partition): e for e in entries}
        self.cache.track({t for t, _ in todo})
        out: dict = {}
        backoff = Backoff(self.options.reconnect_backoff, self.options.reconnect_backoff_max)
        while True:
            groups, unrouted = self.cache.group_by_leader(todo.values())
            if unrouted or self.cache.doubts(todo.values()):
                failure = await self._try_refresh(deadline, bool(unrouted), retry)
                groups, unrouted = self.cache.group_by_leader(todo.values())
                for tp in [(e.topic, e.partition) for e in unrouted]:
                    out[tp] = self._no_leader(tp, failure)
                    if isinstance(out[tp], UnknownTopicOrPartitionError):
                        del todo[tp]  # the metadata says it does not exist
            answers = await asyncio.gather(*(
                self.call(bid, make(tuple(group)), max(deadline - time.monotonic(), 0.001))
                for bid, group in groups.items()), return_exceptions=True)
            for (bid, group), answer in zip(groups.items(), answers):
                self._absorb(bid, group, answer, todo, out)
            left = deadline - time.monotonic()
            if not todo or not retry or left <= 0:
                return out
            await asyncio.sleep(min(backoff.next(), left))

    async def _try_refresh(self, deadline: float, force: bool,
                           retry: bool) -> "LogbrokerError | bool | None":
        """None: refreshed; the error of a failed refresh; True: no answer
        before ``deadline``."""
        try:
            async with asyncio.timeout(max(deadline - time.monotonic(), 0.001)):
                await self.refresh(force=force, retry=retry)
        except TimeoutError:
            return True
        except LogbrokerError as exc:
            if not exc.retriable:
                raise
            return exc
        return None

    def _no_leader(self, tp: tuple[str, int], failure) -> LogbrokerError:
        """Why ``tp`` has no leader to send to, after a refresh that ``failed``."""
        topic, partition = tp
        if isinstance(failure, LogbrokerError):
            return failure
        count = self.cache.counts.get(topic)
        if failure:
            return LeaderNotAvailableError(f"{topic}[{partition}]: no leader known in time")
        if count is None:
            return UnknownTopicOrPartitionError(f"{topic}[{partition}]: unknown topic {topic!r}")
        if partition >= count:
            return UnknownTopicOrPartitionError(f"{topic}[{partition}]: the topic has {count} "
                                                "partition(s)")
        return LeaderNotAvailableError(f"{topic}[{partition}]: no leader right now")

    def _absorb(self, bid: int, group: list, answer, todo: dict, out: dict) -> None:
        if isinstance(answer, BaseException):
            if not isinstance(answer, LogbrokerError) or not answer.retriable:
                raise answer
            self.cache.invalidate(broker=bid)
            for e in group:
                out[(e.topic, e.partition)] = answer
            return
        for row in answer.parts:
            tp = (row.topic, row.partition)
            if tp in todo:
                out[tp] = row
                if row.error in REROUTE_CODES:
                    self.cache.invalidate([tp])
                else:
                    del todo[tp]

    async def aclose(self) -> None:
        """Close every link; later calls raise ``ClientClosedError``."""
        await cancel_and_wait(self._refreshing)
        await self.control.aclose()
        for link in list(self._links.values()):
            await link.aclose()


def _retrieve(task: asyncio.Task) -> None:
    if not task.cancelled():
        task.exception()
