"""The loops and data every peer client shares (clients.py, windows.py,
scale.py; the Redis ones also bench/scale/redis_case.py): keys and values,
deadlines, result shapes, Redis's pipelined XADDs and its XREAD over many
streams, NATS's publish and ordered read, RabbitMQ's confirms. They import
nothing of bench/peers, so the modules that use them import no circle."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from itertools import islice

from bench.common.stats import percentile_ms

KEYS, KEY_BYTES, VALUES = 1024, 16, 1021


# -- data ----------------------------------------------------------------------------------
def make_keys() -> list[bytes]:
    return [(b"key-%d-" % i).ljust(KEY_BYTES, b"_")[:KEY_BYTES] for i in range(KEYS)]


def make_values(size: int) -> list[bytes]:
    import random
    rng = random.Random(1)
    return [rng.randbytes(size) for _ in range(VALUES)]


SAMPLE_EVERY = 128  # produce runs: every 128th record's send -> ack time is kept


def ack_result(lat: list[int]) -> dict:
    """Ack latency under load, from the sampled records' send -> ack times (ns)."""
    if not lat:
        return {}
    lat.sort()
    return {"ack_p50_ms": percentile_ms(lat, .5), "ack_p99_ms": percentile_ms(lat, .99), "ack_samples": len(lat)}


def lat_result(lat: list[int]) -> dict:
    lat.sort()
    return {"records": len(lat), "p50_ms": percentile_ms(lat, .5), "p99_ms": percentile_ms(lat, .99), "max_ms": lat[-1] / 1e6}


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.at, self.seconds = time.perf_counter() + seconds, seconds

    def check(self) -> None:
        if time.perf_counter() > self.at:
            raise TimeoutError(f"not done within {self.seconds:.0f} s")


# -- send loops shared with scale.py -------------------------------------------------------
def redis_xadd_all(r, items, n: int, batch: int, dl: Deadline, lat: "list | None" = None) -> int:
    """XADD ``n`` (stream, fields) pairs from ``items``, ``batch`` per
    non-transactional pipeline (one round trip each); returns the count.
    With ``lat``, every SAMPLE_EVERY-th record's queue -> reply time (ns)."""
    done, clock = 0, time.perf_counter_ns
    while done < n:
        pipe, marks = r.pipeline(transaction=False), []
        for i, (stream, fields) in enumerate(islice(items, min(batch, n - done)), done):
            pipe.xadd(stream, fields)
            if lat is not None and i % SAMPLE_EVERY == 0:
                marks.append(clock())
        if not len(pipe):
            break  # ``items`` ran out before ``n``
        done += len(pipe.execute())
        if marks:
            now = clock()
            lat.extend(now - t for t in marks)
        dl.check()
    return done


def redis_read_streams(r, names: list[str], want: int, count: int, group: int, dl: Deadline,
                       fields: tuple = (b"k", b"v")) -> tuple[int, int]:
    """Read every stream of ``names`` from its start: ``XREAD COUNT count
    STREAMS`` over ``group`` unfinished streams at a time (one round trip
    each, replies of up to ``group * count`` entries), until each gave
    ``want`` entries or had nothing more after its position (a short one).
    Returns (entries, bytes of each entry's ``fields``)."""
    pos, counts = dict.fromkeys(names, b"0-0"), dict.fromkeys(names, 0)
    got = nbytes = 0
    for _ in range(len(names) * want + len(names)):
        if not pos:
            break
        ask = dict(islice(pos.items(), group))
        for stream, entries in r.xread(ask, count=count) or ():
            stream = stream.decode()
            for _eid, values in entries:
                for f in fields:
                    nbytes += len(values[f])
            got += len(entries)
            counts[stream] += len(entries)
            pos[stream] = entries[-1][0]
            del ask[stream]
            if counts[stream] >= want:
                del pos[stream]
        for stream in ask:  # nothing after its position: it is short
            del pos[stream]
        dl.check()
    return got, nbytes


async def nats_publish_all(js, items, dl: Deadline, lat: "list | None" = None) -> int:
    """``js.publish_async`` every (subject, payload) of ``items`` (the
    client bounds the acks pending), then wait for every ack; raises if any
    failed. Returns the count. No ``wait_stall``: with one, nats-py wraps
    every publish in ``asyncio.wait_for`` (a task each), 3.7x slower here.
    With ``lat``, every SAMPLE_EVERY-th record's publish -> ack time (ns)."""
    failed, n, clock = [], 0, time.perf_counter_ns

    def settled(fut) -> None:
        if fut.cancelled() or fut.exception() is not None:
            failed.append(fut)

    for subject, payload in items:
        t = clock()
        fut = await js.publish_async(subject, payload)
        fut.add_done_callback(settled)
        if lat is not None and n % SAMPLE_EVERY == 0:
            fut.add_done_callback(lambda _, t=t: lat.append(clock() - t))
        n += 1
        if n % 10_000 == 0:
            dl.check()
    await asyncio.wait_for(js.publish_async_completed(), timeout=max(dl.at - time.perf_counter(), 1))
    await asyncio.sleep(0)  # let the last done callbacks run
    if failed:
        raise RuntimeError(f"{len(failed)} publish acks failed")
    return n


async def nats_read_ordered(js, subs: list[tuple[str, str]], n: int, dl: Deadline,
                            key_skip: int = -1) -> tuple[int, int, float]:
    """Read ``n`` messages through one ordered push consumer (nats-py
    ``js.subscribe(ordered_consumer=True, cb=...)``: flow control, no acks)
    per (stream, filter subject) of ``subs``, all subscribed before the wait.
    Bytes counted: the payload, plus ``subject[key_skip:]`` (the key) if
    ``key_skip`` >= 0. Returns (records, bytes, perf_counter when done); fewer
    than ``n`` if the deadline came first. Unsubscribing is left to
    ``nc.close()``."""
    state, done = [0, 0, 0.0], asyncio.Event()

    async def on_msg(msg) -> None:
        state[0] += 1
        state[1] += len(msg.data) + (len(msg.subject) - key_skip if key_skip >= 0 else 0)
        if state[0] >= n:
            state[2] = time.perf_counter()
            done.set()

    for stream, subject in subs:
        await js.subscribe(subject, stream=stream, ordered_consumer=True, cb=on_msg)
        dl.check()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout=max(dl.at - time.perf_counter(), 1))
    return state[0], state[1], state[2] or time.perf_counter()


class RabbitConfirms:
    """The ``on_publish_confirm`` callback of rstream's ``send_batch``:
    counts confirms; ``throttle`` bounds the unconfirmed, ``wait`` waits for
    all ``n``."""

    def __init__(self, n: int, max_pending: int) -> None:
        self.n, self.max_pending, self.ok, self.bad, self.done = n, max_pending, 0, 0, asyncio.Event()
        self.marks: deque = deque()  # (message index, send time ns) of sampled messages
        self.lat: list[int] = []

    def mark(self, first: int, end: int) -> None:
        """Messages [first, end) are being sent now: sample every SAMPLE_EVERY-th."""
        t = time.perf_counter_ns()
        self.marks.extend((i, t) for i in range(-(-first // SAMPLE_EVERY) * SAMPLE_EVERY, end, SAMPLE_EVERY))

    def __call__(self, status) -> None:
        if status.is_confirmed:
            self.ok += 1
        else:
            self.bad += 1
        settled = self.ok + self.bad
        while self.marks and self.marks[0][0] < settled:  # confirms come in publish order
            self.lat.append(time.perf_counter_ns() - self.marks.popleft()[1])
        if settled >= self.n:
            self.done.set()

    async def throttle(self, sent: int, dl: Deadline) -> None:
        for _ in range(int(dl.seconds / 0.0005) + 1):  # and bounded by the deadline
            if sent - self.ok - self.bad <= self.max_pending:
                return
            await asyncio.sleep(0.0005)
            dl.check()

    async def wait(self, dl: Deadline) -> int:
        await asyncio.wait_for(self.done.wait(), timeout=max(dl.at - time.perf_counter(), 1))
        if self.bad:
            raise RuntimeError(f"{self.bad} publishes not confirmed")
        return self.ok
