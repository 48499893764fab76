"""One broker's share of a consumer's fetching (see fetcher.py).

A ``FetchSession`` is a task that keeps one long-poll Fetch in flight to
its broker, over the broker's ``"fetch"`` link, for the assigned partitions
the broker leads (by the router's metadata: its book's, fetcher.distribute).
It buffers each answer and fetches again at once, and ends when it
has nothing to fetch (the prefetch buffer is full, or the broker leads
nothing fetchable any more), waking the fetcher's main loop, which starts
sessions again as needed. A lost connection or a routing error marks the
metadata stale and refreshes it (paced by the router) after a backoff;
partitions that moved then belong to their new leader's session. An
answer carrying a quota throttle delays the next Fetch to its broker that
long (throttle.py).

Each Fetch goes through the broker's fetch session (Kafka's incremental
fetch: session_book.py): after the first, it names only the partitions that
changed and is answered only about those.

The session owns its task and whether a Fetch is in flight; everything else
is its fetcher's (fetcher.py), which it reads (router, buffer, settings,
throttles, the broker's book) and changes only through the fetcher's
methods: ``distribute`` changes to the books, ``forget`` the session,
report ``unreachable`` / ``refused`` / ``reached``, ``part_failed``. It
never imports the fetcher.
"""

from __future__ import annotations

import asyncio
import time

from ...errors import (BrokerUnavailableError, InvalidFetchSessionEpochError, LogbrokerError,
                       RequestTimedOutError)
from ...protocol import messages as m


class FetchSession:
    def __init__(self, fetcher, broker: int) -> None:
        """Start fetching from ``broker`` for ``fetcher`` (a ``Fetcher``: see
        the module docstring for what the session uses of it)."""
        self.fetcher, self.broker = fetcher, broker
        self.in_flight = False
        self.task = asyncio.ensure_future(self._run())

    def abandon(self) -> None:
        """Stop at once (a seek made the request in flight useless): cancel
        the task, close its connection (a long poll would delay the next
        request on it; its fetch session ends with it) (loop)."""
        self.task.cancel()
        self.fetcher.router.drop(self.broker, "fetch")
        self.fetcher.book(self.broker).reset()
        self.fetcher.forget(self)

    async def _run(self) -> None:
        f = self.fetcher
        backoff = f.backoff()
        try:
            while True:
                wait = f.throttles.left(self.broker, time.monotonic())
                if wait:  # the last answer carried a quota throttle (throttle.py)
                    await asyncio.sleep(wait)
                try:
                    outcome = await self._fetch_once()
                    if outcome is None:
                        return
                    reroute, all_failed = outcome
                except (BrokerUnavailableError, RequestTimedOutError) as exc:
                    # a leader lost: in a cluster another broker takes over; poll
                    # reports the failure only if no broker answers a refresh either
                    f.router.invalidate(broker=self.broker)
                    await asyncio.sleep(backoff.next())
                    if not await self._refresh():
                        f.unreachable(exc)  # poll raises it if no data arrives in time
                    continue
                except LogbrokerError as exc:  # the whole Fetch was refused
                    if not exc.retriable:
                        f.refused(exc)
                    else:
                        f.router.invalidate(broker=self.broker)
                    await asyncio.sleep(backoff.next())
                    await self._refresh()
                    continue
                if reroute:
                    await self._refresh()
                if all_failed:
                    await asyncio.sleep(backoff.next())
                else:
                    backoff.reset()
        finally:
            f.forget(self)
            f.wake()  # the main loop spreads what is left to other sessions

    async def _fetch_once(self) -> "tuple[bool, bool] | None":
        """One Fetch through the broker's fetch session (session_book.py) of
        what the book wants; returns (a partition moved, every partition
        failed), or None when there is nothing to fetch (the buffer is full
        or the broker leads nothing fetchable)."""
        f, s = self.fetcher, self.fetcher.settings
        if f.buffer.full:
            return None
        if f.distribute():
            f.wake()  # a partition lost its leader: the main loop refreshes the metadata
        book = f.book(self.broker)
        if not book.wanted:
            return None
        link = f.router.link(self.broker, "fetch")
        timeout = s.fetch_max_wait_ms / 1000 + f.router.options.request_timeout
        sent = book.request()
        self.in_flight = True
        try:
            resp = await link.call(
                m.Fetch(max_wait_ms=s.fetch_max_wait_ms, min_bytes=s.fetch_min_bytes,
                        max_bytes=s.fetch_max_bytes, parts=sent.parts, isolation=s.isolation,
                        session_epoch=sent.session_epoch, forget=sent.forget),
                timeout, retry=False)
        except InvalidFetchSessionEpochError:
            book.reset()  # the broker holds no session of ours (a new connection): open one
            return False, False
        except BaseException:
            book.reset()
            raise
        finally:
            self.in_flight = False
        f.reached()
        f.throttles.seen(self.broker, resp.throttle_ms, time.monotonic())
        gens = [book.gen((p[0], p[1])) for p in resp.parts]
        resolved_gens = [book.gen((r[0], r[1])) for r in resp.resolved]
        book.answered(sent, resp.session_epoch, resp.parts)
        failed = f.buffer.absorb(resp.parts, gens, resp.payload, resp.txn, resp.resolved,
                                 resolved_gens)
        reroute = False
        for st, code, message in failed:
            reroute = f.part_failed(st, code, message) or reroute
        f.notify()
        return reroute, bool(failed) and len(failed) == len(resp.parts)

    async def _refresh(self) -> bool:
        """Refresh the metadata; False if no broker answered (the next
        round tries again; poll reports an unreachable cluster)."""
        try:
            await self.fetcher.router.refresh(retry=False)
        except LogbrokerError:
            return False
        return True
