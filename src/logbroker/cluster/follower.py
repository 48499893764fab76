"""Followers: replicate partitions from their leaders (Kafka's fetcher threads).

One ``LeaderFetcher`` per leader broker replicates every partition this
broker follows there, over one connection:

1. A partition that just got a new leader (or epoch) first asks the leader
   for the end offset of its own latest epoch (OffsetForLeaderEpoch) and
   truncates its log there, never to its HW (KIP-101/279): what it had
   beyond that end was never committed.
2. Then ReplicaFetch at its log end offset, which acknowledges everything
   below it to the leader; the batches that come back are appended exactly
   as the leader stored them (``Log.append_replicated``, fsynced first where
   the topic is fsync) and the follower's HW follows the leader's.

Errors: a fenced or unknown epoch, or NOT_LEADER, waits for the new state
from etcd (the node re-adds the partition); an offset below the leader's
log start restarts the log there; a partition a reassignment is adding
here is fetched within the reassignment throttle
(replication_throttle.py); a lost connection is retried with
exponential backoff; so is a refused authentication or authorization
(logged as an error naming the leader: a wrong ``inter_broker_user``
password, the user not created yet, or no ``cluster_action``). The loop
never dies of an error.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time

from ..errors import (FencedLeaderEpochError, LogbrokerError, NotLeaderError,
                      OffsetOutOfRangeError, UnknownLeaderEpochError, for_code)
from ..protocol import messages as m
from ..protocol.parts import EpochQuery, ReplicaFetchPart
from ..records.walker import whole_batches
from ..storage.config import FLUSH_FSYNC
from ..storage.log import Log

log = logging.getLogger("logbroker.cluster")
FETCH_WAIT_MS = 200
BACKOFF_MIN, BACKOFF_MAX = 0.05, 1.0
PART_RETRY_S = 0.1
REPEAT_S = 30.0  # a refusal that persists is logged again this often


class _Part:
    __slots__ = ("log", "epoch", "truncated", "retry_at")

    def __init__(self, lg: Log, epoch: int) -> None:
        self.log, self.epoch, self.truncated, self.retry_at = lg, epoch, False, 0.0


class LeaderFetcher:
    def __init__(self, node, leader: int) -> None:
        self.node, self.leader = node, leader
        self.parts: dict[tuple[str, int], _Part] = {}
        self._wake = asyncio.Event()
        self._conn = None
        self._failures = 0
        self._said: tuple = ("", 0.0)  # the last refusal logged, and when
        self.task = asyncio.get_running_loop().create_task(self._run())

    def add(self, key, lg: Log, epoch: int) -> None:
        self.parts[key] = _Part(lg, epoch)
        self._wake.set()

    def remove(self, key) -> None:
        self.parts.pop(key, None)

    async def close(self) -> None:
        self.task.cancel()
        if self._conn is not None:
            self._conn.close()
        try:
            await self.task
        except BaseException:  # noqa: BLE001 - cancelled, or failed: closing either way
            pass

    async def _run(self) -> None:
        while True:
            try:
                if not self.parts:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                now = time.monotonic()
                ready = [(k, p) for k, p in self.parts.items() if p.retry_at <= now]
                if not ready:
                    await asyncio.sleep(min(p.retry_at for p in self.parts.values()) - now)
                    continue
                conn = await self._connection()
                todo = [(k, p) for k, p in ready if not p.truncated]
                if todo:
                    await self._truncate(conn, todo)
                await self._fetch(conn, [(k, p) for k, p in ready if p.truncated])
                self._failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a follower loop must go on
                if isinstance(exc, LogbrokerError) and exc.retriable:
                    log.info("fetching from broker %d: %s", self.leader, exc)
                elif isinstance(exc, LogbrokerError):  # e.g. inter_broker_user refused
                    self._refused(exc)
                else:
                    log.exception("fetching from broker %d failed", self.leader)
                if self._conn is not None:
                    self._conn.close()
                    self._conn = None
                self._failures += 1
                delay = min(BACKOFF_MIN * 2 ** self._failures, BACKOFF_MAX)
                await asyncio.sleep(delay * (0.5 + random.random() / 2))

    def _refused(self, exc: LogbrokerError) -> None:
        """Log a refusal as an error once, then again only when it changes or
        every REPEAT_S (it is retried every second meanwhile)."""
        now, text = time.monotonic(), str(exc)
        if self._said[0] != text or now - self._said[1] >= REPEAT_S:
            self._said = (text, now)
            log.error("fetching from broker %d failed: %s", self.leader, text)
        else:
            log.debug("fetching from broker %d failed: %s", self.leader, text)

    async def _connection(self):
        if self._conn is not None and not self._conn.closed:
            return self._conn
        self._conn = await self.node.connect_to(self.leader)
        return self._conn

    async def _truncate(self, conn, todo) -> None:
        req = m.OffsetForLeaderEpoch(replica_id=self.node.me, parts=tuple(
            EpochQuery(topic, partition, p.epoch, _latest_epoch(p.log))
            for (topic, partition), p in todo))
        resp = await conn.request(req, self.node.request_timeout)
        _check(resp)
        for (topic, partition, code, message, epoch, end), (key, p) in zip(resp.parts, todo):
            if self.parts.get(key) is not p:
                continue  # removed or replaced meanwhile
            if code:
                self._part_error(key, p, for_code(code)(message))
                continue
            lg = p.log
            if _latest_epoch(lg) < 0 or lg.log_end_offset == lg.log_start_offset:
                target = lg.log_end_offset
            elif epoch < 0:
                target = min(lg.high_watermark, lg.log_end_offset)  # no common epoch: Kafka's fallback
            else:
                mine = lg.end_offset_for_epoch(epoch)[1]
                # no epoch of ours that old: all we have is newer than the leader's answer
                target = min(end, mine if mine >= 0 else lg.log_start_offset)
            if target < lg.log_end_offset:
                log.warning("%s: truncating %d -> %d (epoch %d ends at %d on leader %d)", lg.name,
                            lg.log_end_offset, target, epoch, end, self.leader)
                if not await self._io(key, p, lg.truncate_to, target):
                    continue
            p.truncated = True

    async def _fetch(self, conn, parts) -> None:
        parts, throttled = self._throttled(parts)
        if not parts:
            return
        size = self.node.replica_fetch_bytes
        cap = self.node.throttle.cap(size)
        req = m.ReplicaFetch(replica_id=self.node.me, max_wait_ms=FETCH_WAIT_MS, min_bytes=1,
                             max_bytes=size,
                             parts=tuple(ReplicaFetchPart(topic, partition, p.log.log_end_offset,
                                                          p.epoch, cap if key in throttled
                                                          else size)
                                         for key, p in parts for topic, partition in (key,)))
        resp = await conn.request(req, self.node.request_timeout + FETCH_WAIT_MS / 1000)
        _check(resp)
        if throttled:
            self.node.throttle.spend(sum(len(data) for data, (key, _) in
                                         zip(resp.payload, parts) if key in throttled),
                                     time.monotonic())
        for part, data, (key, p) in zip(resp.parts, resp.payload, parts):
            topic, partition, code, message, hw, log_start, log_end, segment_base, _ = part
            if self.parts.get(key) is not p:
                continue
            lg = p.log
            if code:
                err = for_code(code)(message)
                if isinstance(err, OffsetOutOfRangeError) and lg.log_end_offset < log_start:
                    log.warning("%s: behind the leader's log start %d: restarting there",
                                lg.name, log_start)
                    await self._io(key, p, lg.reset_to, log_start)
                    continue
                self._part_error(key, p, err)
                continue
            whole = whole_batches(data)
            if len(whole) and not await self._io(
                    key, p, lg.append_replicated, whole, sync=lg.config.flush == FLUSH_FSYNC,
                    segment_base=segment_base if segment_base >= 0 else None):
                continue
            if lg.log_start_offset < log_start <= lg.log_end_offset:
                await self._io(key, p, lg.delete_before, log_start)  # the leader's retention
            lg.set_high_watermark(min(hw, lg.log_end_offset))

    def _throttled(self, parts) -> tuple:
        """(the parts to fetch now, the keys among them that a reassignment is
        adding here): while the reassignment throttle is overdrawn the
        adding ones wait (replication_throttle.py); the others never do."""
        adding = {key for key, _ in parts if self.node.adding_here(key)}
        if not adding:
            return parts, adding
        now = time.monotonic()
        if self.node.throttle.ready(now):
            return parts, adding
        retry = now + self.node.throttle.wait(now)
        for key, p in parts:
            if key in adding:
                p.retry_at = retry
        return [(key, p) for key, p in parts if key not in adding], set()

    async def _io(self, key, p: _Part, fn, *args, **kwargs) -> bool:
        """Run a change of the partition's log in the I/O pool, one at a time
        per partition, and only while ``p`` is still this fetcher's: a
        fetcher of the partition's previous leader must not append after the
        new leader's fetcher truncated. False if ``p`` was replaced."""
        async with self.node.partition_lock(key):
            if self.parts.get(key) is not p:
                return False
            await self.node.run_io(fn, *args, **kwargs)
            return True

    def _part_error(self, key, p: _Part, err: LogbrokerError) -> None:
        """One partition's error: it pauses briefly (the others go on)."""
        if isinstance(err, OffsetOutOfRangeError):
            p.truncated = False  # ahead of the leader: truncate again
        elif isinstance(err, (FencedLeaderEpochError, NotLeaderError, UnknownLeaderEpochError)):
            log.info("%s: %s (waiting for the new state)", p.log.name, err)
        else:
            log.warning("%s: replication error: %s", p.log.name, err)
        p.retry_at = time.monotonic() + PART_RETRY_S


def _check(resp) -> None:
    """Raise a whole-request refusal (e.g. CLUSTER_AUTHORIZATION_FAILED: our
    inter_broker_user may not cluster_action)."""
    if resp.error:
        raise for_code(resp.error)(f"{type(resp).__name__[:-8]}: {resp.message}")


def _latest_epoch(lg: Log) -> int:
    eps = lg.epochs
    return eps[-1][0] if eps else -1
