"""Windowed produce of the peers (mode ``window`` of bench/peers/clients.py):
one producer sends a window of ``window`` records (spec key, default 1,000),
waits until every one of them is acknowledged, then sends the next window;
timed until the last is acknowledged. The records are those of the streaming
``produce`` mode (same keys, values and stream layout); the stream is a fresh
one. Each client calls its loop here with its connection already made:

- Redis: one non-transactional pipeline of ``window`` XADDs, ``execute()``,
  next (``redis_xadd_all`` with ``batch`` = ``window``: Redis's streaming
  produce is already this shape, pipelines of 1,000).
- NATS JetStream: ``window`` ``js.publish_async``, then ``await
  js.publish_async_completed()`` and a check that none failed
  (``nats_publish_all`` over one window), next.
- RabbitMQ Streams (rstream): one ``send_batch`` of ``window`` with a
  confirm callback (``RabbitConfirms``), wait for the ``window`` confirms,
  next.

logbroker's windowed produce is the ``window`` key of the ``produce`` mode of
bench/broker/worker.py. Every loop is bounded by the record count and the
deadline. The result: ``records``, ``seconds`` and ``windows`` with the
per-window time (first send to last ack) ``window_p50_ms``,
``window_p99_ms``, ``window_max_ms``.
"""

from __future__ import annotations

import time
from itertools import islice

from bench.peers.loops import (
    KEYS,
    VALUES,
    Deadline,
    RabbitConfirms,
    nats_publish_all,
    redis_xadd_all,
)
from bench.common.stats import percentile_ms

WINDOW = 1000


def window_result(done: int, seconds: float, times: list[int]) -> dict:
    """The result of a windowed run from its per-window times (ns)."""
    times.sort()
    out = {"records": done, "seconds": seconds, "windows": len(times)}
    if times:
        out.update(window_p50_ms=percentile_ms(times, .5), window_p99_ms=percentile_ms(times, .99),
                   window_max_ms=times[-1] / 1e6)
    return out


def redis_window(r, spec: dict, items, dl: Deadline) -> dict:
    """``items``: the (stream, fields) pairs of the streaming produce."""
    n, window, clock = spec["records"], spec.get("window", WINDOW), time.perf_counter_ns
    done, times, t0 = 0, [], time.perf_counter()
    for _ in range(-(-n // window)):
        t = clock()
        got = redis_xadd_all(r, items, min(window, n - done), window, dl)
        times.append(clock() - t)
        done += got
        if not got:
            break
    return window_result(done, time.perf_counter() - t0, times)


async def nats_window(js, spec: dict, items, dl: Deadline) -> dict:
    """``items``: the (subject, payload) pairs of the streaming produce; the
    client's pending-ack bound (4,000) is above a window, so nothing stalls."""
    n, window, clock = spec["records"], spec.get("window", WINDOW), time.perf_counter_ns
    done, times, t0 = 0, [], time.perf_counter()
    for _ in range(-(-n // window)):
        t = clock()
        got = await nats_publish_all(js, islice(items, min(window, n - done)), dl)
        times.append(clock() - t)
        done += got
        dl.check()
        if not got:
            break
    return window_result(done, time.perf_counter() - t0, times)


async def rabbit_window(producer, spec: dict, keys: list[bytes], values: list[bytes], dl: Deadline) -> dict:
    """One ``send_batch`` a window, the key as the first 16 bytes of the raw
    body (as the streaming produce)."""
    from rstream import RawMessage
    stream, n, window, clock = spec["stream"], spec["records"], spec.get("window", WINDOW), time.perf_counter_ns
    done, times, t0 = 0, [], time.perf_counter()
    for _ in range(-(-n // window)):
        t = clock()
        msgs = [RawMessage(keys[i % KEYS] + values[i % VALUES]) for i in range(done, min(n, done + window))]
        confirms = RabbitConfirms(len(msgs), len(msgs))
        await producer.send_batch(stream, msgs, on_publish_confirm=confirms)
        done += await confirms.wait(dl)
        times.append(clock() - t)
        dl.check()
    return window_result(done, time.perf_counter() - t0, times)
