"""Compressed produce off the event loop, within budgets (docs/security.md,
"Compression bombs").

A Kafka batch's compressed records are inflated to be checked before they
are stored (storage/incoming.py). A few KB of zstd can inflate to hundreds
of MiB, so that work is bounded on the loop: ``Inflation.wanted(msg)``
says, from the batch headers alone, whether a Produce holds any (None on
the hot path: nothing compressed, nothing to walk). ``on_loop`` then
checks it in the reading turn if it inflates to at most ``ON_LOOP_BYTES``
(1 MiB: about 1 ms of zstd, lz4 or snappy, 3 ms of gzip; most producers'
batches, and no thread hop for them); past that, the attempt is dropped
and ``inspect`` checks the request in the broker's one inflation thread
while the connection's reading is held (net/answering.py ``hold``). A
request whose compressed bytes promise more (x ``LIKELY_RATIO``), whose
records a compacted topic walks, or that holds a legacy message set to
convert (``Convert``) goes to the thread at once. Either way the Produce
handler gets each part marked ``Inspected``. The thread also runs other
work that decodes stored records (``run``: ListOffsets by time).

Limits, from BrokerConfig:

- ``max_inflated_bytes_per_request`` (64 MiB): what one request's
  compressed sections may inflate to in all. Past it, the part being
  inflated and every later compressed part of the request are refused
  with RECORD_TOO_LARGE (Kafka's code 10): not retriable, and Kafka's
  Java producer answers it by splitting the batch and sending the halves
  (which fit when a real batch was merely big); CORRUPT_MESSAGE would be
  retried as is until the delivery timeout, INVALID_RECORD fails the batch
  without a split.
- ``inflation_bytes_per_s_per_connection`` (128 MiB/s): a connection's
  credit, a token bucket as deep as the request budget: a connection in
  debt waits (its reading held) before its next inflation starts, so one
  connection cannot keep the worker to itself; requests of different
  connections run in the order they came (each connection has at most
  one at a time).

Every refusal by a budget is logged as a warning naming the connection,
the principal and the rule, at most one line per ``LOG_EVERY_S`` (the
lines held back are counted in the next one), so an attacker cannot
flood the log. Memory: the loop inflates into a reused buffer of
``ON_LOOP_BYTES``; the one thread inflates one section at a time, into a
reused buffer of ``THREAD_SCRATCH_BYTES`` first, a larger section again
into a mapping unmapped after, so inflated bytes in memory stay under the
per-batch limit (16 x max_batch_bytes, at most 256 MiB) and the request
budget, whichever is lower (64 MiB by default), plus those two buffers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from ..errors import RecordTooLargeError, UnknownTopicOrPartitionError
from ..security.quotas import principal_of
from ..storage.incoming import Convert, inspect, inspection_bytes, kafka_sections

log = logging.getLogger("logbroker.broker")
LOG_EVERY_S = 10.0  # at most one budget warning per this many seconds
ON_LOOP_BYTES = 1 << 20  # a request inflating to at most this is checked in its reading turn
LIKELY_RATIO = 8  # compressed bytes x this past ON_LOOP_BYTES: straight to the thread
THREAD_SCRATCH_BYTES = 16 << 20  # the thread inflates into this reused buffer first


class Budget:
    """One request's inflation budget: ``left`` bytes; ``take(n)`` charges
    them, ``exceeded()`` raises the request's rule (RecordTooLargeError).
    ``scratch``: a buffer to inflate into when one fits (the loop's)."""

    __slots__ = ("limit", "left", "spent", "refused", "scratch")

    def __init__(self, limit: int, scratch: "bytearray | None" = None) -> None:
        self.limit, self.left, self.spent, self.refused = limit, limit, 0, False
        self.scratch = scratch

    def take(self, n: int) -> None:
        self.spent += n
        self.left = max(0, self.left - n)

    def exceeded(self) -> None:
        self.refused = True
        raise RecordTooLargeError(f"the compressed batches of one produce request may inflate "
                                  f"to at most {self.limit} bytes in all "
                                  f"(max_inflated_bytes_per_request)")


class Credit:
    """A connection's inflation credit: a token bucket of ``depth`` bytes
    refilled at ``rate`` bytes/s (``wait_s``: how long until it is out of
    debt; ``spend(n)``)."""

    __slots__ = ("rate", "depth", "tokens", "at")

    def __init__(self, rate: int, depth: int, now: float) -> None:
        self.rate, self.depth, self.tokens, self.at = rate, depth, float(depth), now

    def wait_s(self, now: float) -> float:
        self.tokens = min(self.depth, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def spend(self, n: int) -> None:
        self.tokens -= n


class WarningGate:
    """At most one warning per ``every`` seconds; ``allow(now)`` gives the
    count held back since the last one passed (None: hold this one back)."""

    __slots__ = ("every", "last", "held")

    def __init__(self, every: float = LOG_EVERY_S) -> None:
        self.every, self.last, self.held = every, float("-inf"), 0

    def allow(self, now: float) -> "int | None":
        if now - self.last < self.every:
            self.held += 1
            return None
        held, self.held, self.last = self.held, 0, now
        return held


@dataclasses.dataclass(frozen=True, slots=True)
class Job:
    """The parts of one Produce to inspect: ``(index, max_batch_bytes,
    require_keys)`` each, by the log's settings when it was read; ``size``:
    their compressed (or, compacted, to be walked) bytes; ``threaded``:
    some part's records are walked (a compacted topic) or converted (a
    ``Convert``): Python per record, never on the loop."""

    parts: tuple
    size: int
    threaded: bool


class Inflation:
    """The broker's inflation thread and limits (module docstring)."""

    def __init__(self, store, per_request: int, rate: int) -> None:
        """``store``: the broker's Store (each partition's log settings)."""
        self.store, self.per_request, self.rate = store, per_request, rate
        self._pool: "ThreadPoolExecutor | None" = None
        self._scratch: "bytearray | None" = None  # the loop's buffer for small inflations
        self._thread_scratch: "bytearray | None" = None  # the thread's, for most big ones
        self.gate = WarningGate()

    def wanted(self, msg) -> "Job | None":
        """The parts of Produce ``msg`` to inspect off the loop, or None (a
        header walk per part; nothing copied)."""
        found, size, threaded = None, 0, False
        for i, ((topic, partition, _), data) in enumerate(zip(msg.parts, msg.payload)):
            if not kafka_sections(data):
                continue  # our batches only (the common part): no settings looked up
            cfg = self._config(topic, partition)
            n = inspection_bytes(data, cfg.compacts)
            if n:
                found = found or []
                found.append((i, cfg.max_batch_bytes, cfg.compacts))
                size += n
                threaded = threaded or cfg.compacts or data.__class__ is Convert
        return None if found is None else Job(tuple(found), size, threaded)

    def _config(self, topic: str, partition: int):
        try:
            return self.store.get_log(topic, partition).config
        except UnknownTopicOrPartitionError:
            return self.store.config.log  # what an auto-created topic gets

    def on_loop(self, conn, job: Job, msg):
        """``msg`` inspected in this turn (``inspect``'s result), or None
        when it inflates past ``ON_LOOP_BYTES`` or ``conn`` is in debt:
        then ``inspect`` it. The loop spends at most that much inflating.
        A request whose compressed bytes would exceed that at a ratio of
        ``LIKELY_RATIO``, or whose records must be walked or converted
        (``Job.threaded``), goes to the thread at once."""
        if job.threaded or job.size * LIKELY_RATIO > ON_LOOP_BYTES:
            return None
        credit = self._credit(conn)
        if credit.wait_s(asyncio.get_running_loop().time()) > 0:
            return None
        small = self.per_request <= ON_LOOP_BYTES  # then the request's own budget
        if self._scratch is None:
            self._scratch = bytearray(ON_LOOP_BYTES + 1)  # reused: no page faults per batch
        budget = Budget(self.per_request if small else ON_LOOP_BYTES, self._scratch)
        payload = list(msg.payload)
        results = _inspect_all(job, payload, budget)
        if budget.refused and not small:
            return None
        return self._done(conn, msg, job, payload, results, budget, credit)

    async def inspect(self, conn, job: Job, msg):
        """``msg`` with its parts in ``job`` replaced by their ``Inspected``
        results, checked in the inflation thread once ``conn``'s credit
        allows; budget refusals logged (rate limited)."""
        loop = asyncio.get_running_loop()
        credit = self._credit(conn)
        wait = credit.wait_s(loop.time())
        if wait > 0:
            await asyncio.sleep(wait)
        pool = self._thread()
        budget = Budget(self.per_request, self._thread_scratch)
        payload = list(msg.payload)
        results = await loop.run_in_executor(pool, _inspect_all, job, payload, budget)
        return self._done(conn, msg, job, payload, results, budget, credit)

    async def run(self, fn, *args):
        """``fn(*args)`` in the inflation thread (``Services.offload``: work
        that decodes stored records, such as a search by time)."""
        return await asyncio.get_running_loop().run_in_executor(self._thread(), fn, *args)

    def _thread(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="logbroker-inflate")
            self._thread_scratch = bytearray(THREAD_SCRATCH_BYTES)
        return self._pool

    def _credit(self, conn) -> Credit:
        if conn.inflation is None:
            conn.inflation = Credit(self.rate, self.per_request, asyncio.get_running_loop().time())
        return conn.inflation

    def _done(self, conn, msg, job: Job, payload: list, results: list, budget: Budget,
              credit: Credit):
        credit.spend(budget.spent)
        for (i, _, _), result in zip(job.parts, results):
            payload[i] = result
        if budget.refused:
            self._warn(conn, msg, budget)
        return dataclasses.replace(msg, payload=tuple(payload))

    def _warn(self, conn, msg, budget: Budget) -> None:
        held = self.gate.allow(time.monotonic())
        if held is None:
            return
        principal = principal_of(conn.session.principal)
        log.warning("refused a produce from %s (principal %s): its compressed batches inflate "
                    "past max_inflated_bytes_per_request %d (%d bytes inflated before it stopped, "
                    "%d parts); %d similar refusals not logged in the last %.0f s",
                    conn.peer, principal, budget.limit, budget.spent, len(msg.parts), held,
                    self.gate.every)

    def close(self) -> None:
        """Stop the thread (a running inflation ends first: at most one
        budget's worth)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def _inspect_all(job: Job, payload: list, budget: Budget) -> list:
    """In the inflation thread: each part of ``job`` inspected, in order,
    against the one request ``budget``."""
    return [inspect(payload[i], max_batch_bytes=max_bytes, require_keys=keys, budget=budget)
            for i, max_bytes, keys in job.parts]
