"""Peer clients (Redis Streams, NATS JetStream, RabbitMQ Streams), each run in a
subprocess by ``run_client``, bounded by a count and a deadline.

``client_main(spec)`` prints one JSON line: the mode's result or
``{"error": "Type: message"}``. Modes ``produce``/``consume``/``roundtrip``
are here (``roundtrip``: awaited single sends of ``value_bytes``, default
100); the loops of ``window`` (send ``window`` records, wait for every ack,
next) are in bench/peers/windows.py; ``scale_produce``/``scale_consume``
(many topics, all four systems including logbroker) are in
bench/peers/scale.py. The loops all three share (``redis_xadd_all``,
``nats_publish_all``, ``nats_read_ordered``, ``RabbitConfirms``) are in
bench/peers/loops.py.

Optional spec keys (defaults measured on W2, 1 M x 100 B, here): Redis
``pipeline`` (1,000 XADDs) and ``count`` (XRANGE 1,000: 1.6x the rate of
10,000); NATS ``max_pending`` (publish_async acks pending, 4,000: the
client's default; 20,000 and 100,000 were slower) and ``consumer``
(``"ordered"``: one ordered push consumer with a callback, 4.8x ``"pull"``,
whose ``fetch(batch)`` costs a task per message whatever the batch, 500 to
5,000 alike; nats-py 2.16's fetch has no max_bytes); RabbitMQ ``batch``
(1,000 per send_batch; 200 and 5,000 no better), ``max_pending`` (50,000
unconfirmed) and ``credit`` (initial_credit 50 chunks; 10 to 1,000 alike)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import time

from bench import ROOT
from bench.common.procs import spawn, stop_process
from bench.peers.loops import (Deadline, KEYS, RabbitConfirms, VALUES, ack_result, lat_result,
                               make_keys, make_values, nats_publish_all, nats_read_ordered,
                               redis_xadd_all)


# -- clients (run in a subprocess: python -m bench.peers --client SPEC) ----------------------
def redis_client(spec: dict) -> dict:
    import redis
    r = redis.Redis(host="127.0.0.1", port=spec["port"], protocol=2)
    stream, mode, dl = spec["stream"], spec["mode"], Deadline(spec["deadline_s"])
    keys = make_keys()
    if mode in ("produce", "window"):
        n, values = spec["records"], make_values(spec["value_bytes"])
        items = ((stream, {b"k": keys[i % KEYS], b"v": values[i % VALUES]}) for i in range(n))
        if mode == "window":
            from bench.peers.windows import redis_window
            return redis_window(r, spec, items, dl)
        t0, lat = time.perf_counter(), []
        done = redis_xadd_all(r, items, n, spec.get("pipeline", 1000), dl, lat)
        return {"records": done, "seconds": time.perf_counter() - t0, **ack_result(lat)}
    if mode == "consume":
        n, got, nbytes, start = spec["records"], 0, 0, "-"
        t0 = time.perf_counter()
        for _ in range(n + 10):
            entries = r.xrange(stream, min=start, max="+", count=spec.get("count", 1000))
            if not entries:
                break
            for eid, fields in entries:
                nbytes += len(fields[b"k"]) + len(fields[b"v"])
            got += len(entries)
            start = b"(" + entries[-1][0]
            if got >= n:
                break
            dl.check()
        return {"records": got, "bytes": nbytes, "seconds": time.perf_counter() - t0}
    if mode == "roundtrip":
        value, key, lat = b"v" * spec.get("value_bytes", 100), keys[0], []
        for _ in range(100):
            r.xadd(stream + "-rt", {b"k": key, b"v": value})
        for _ in range(spec["sends"]):
            t = time.perf_counter_ns()
            r.xadd(stream + "-rt", {b"k": key, b"v": value})
            lat.append(time.perf_counter_ns() - t)
            dl.check()
        return lat_result(lat)
    raise ValueError(mode)


async def nats_client_async(spec: dict) -> dict:
    import nats
    import nats.js.errors
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    nc = await nats.connect(f"nats://127.0.0.1:{spec['port']}", max_reconnect_attempts=0)
    js = nc.jetstream(publish_async_max_pending=spec.get("max_pending", 4000))
    stream, mode, dl = spec["stream"], spec["mode"], Deadline(spec["deadline_s"])
    subjects = [f"{stream}.{k.decode()}" for k in make_keys()]
    try:
        with contextlib.suppress(nats.js.errors.BadRequestError):  # exists already
            await js.add_stream(name=stream, subjects=[f"{stream}.>"])
        if mode in ("produce", "window"):
            n, values = spec["records"], make_values(spec["value_bytes"])
            items = ((subjects[i % KEYS], values[i % VALUES]) for i in range(n))
            if mode == "window":
                from bench.peers.windows import nats_window
                return await nats_window(js, spec, items, dl)
            t0, lat = time.perf_counter(), []
            n = await nats_publish_all(js, items, dl, lat)
            return {"records": n, "seconds": time.perf_counter() - t0, **ack_result(lat)}
        if mode == "consume" and spec.get("consumer", "ordered") == "ordered":
            t0 = time.perf_counter()
            got, nbytes, t1 = await nats_read_ordered(js, [(stream, f"{stream}.>")], spec["records"], dl,
                                                      key_skip=len(stream) + 1)
            return {"records": got, "bytes": nbytes, "seconds": t1 - t0}
        if mode == "consume":  # "consumer": "pull": one ephemeral pull consumer, fetch(batch)
            n, got, nbytes = spec["records"], 0, 0
            cfg = ConsumerConfig(ack_policy=AckPolicy.NONE, deliver_policy=DeliverPolicy.ALL)
            t0 = time.perf_counter()
            psub = await js.pull_subscribe(f"{stream}.>", stream=stream, config=cfg)
            for _ in range(n + 10):
                msgs = await psub.fetch(batch=min(spec.get("batch", 1000), n - got), timeout=5)
                for msg in msgs:
                    nbytes += len(msg.subject) - len(stream) - 1 + len(msg.data)
                got += len(msgs)
                if got >= n:
                    break
                dl.check()
            return {"records": got, "bytes": nbytes, "seconds": time.perf_counter() - t0}
        if mode == "roundtrip":
            value, subj, lat = b"v" * spec.get("value_bytes", 100), f"{stream}-rt", []
            with contextlib.suppress(nats.js.errors.BadRequestError):  # exists already
                await js.add_stream(name=stream + "-rt", subjects=[subj])
            for _ in range(100):
                await js.publish(subj, value)
            for _ in range(spec["sends"]):
                t = time.perf_counter_ns()
                await js.publish(subj, value)
                lat.append(time.perf_counter_ns() - t)
                dl.check()
            return lat_result(lat)
        raise ValueError(mode)
    finally:
        await nc.close()


async def rabbit_client_async(spec: dict) -> dict:
    from rstream import Consumer, Producer, RawMessage
    stream, mode, dl = spec["stream"], spec["mode"], Deadline(spec["deadline_s"])
    keys = make_keys()
    auth = {"username": "guest", "password": "guest"}
    if mode in ("produce", "roundtrip", "window"):
        producer = Producer("127.0.0.1", spec["port"], **auth)
        await producer.start()
        try:
            if mode == "window":
                from bench.peers.windows import rabbit_window
                await producer.create_stream(stream, exists_ok=True)
                return await rabbit_window(producer, spec, keys, make_values(spec["value_bytes"]), dl)
            if mode == "produce":
                await producer.create_stream(stream, exists_ok=True)
                n, values = spec["records"], make_values(spec["value_bytes"])
                # the key travels as the first 16 bytes of the raw body (no AMQP encoding)

                confirms = RabbitConfirms(n, spec.get("max_pending", 50_000))
                t0, sent, batch = time.perf_counter(), 0, spec.get("batch", 1000)
                while sent < n:
                    msgs = [RawMessage(keys[i % KEYS] + values[i % VALUES]) for i in range(sent, min(n, sent + batch))]
                    confirms.mark(sent, sent + len(msgs))
                    await producer.send_batch(stream, msgs, on_publish_confirm=confirms)
                    sent += len(msgs)
                    await confirms.throttle(sent, dl)
                    dl.check()
                ok = await confirms.wait(dl)
                return {"records": ok, "seconds": time.perf_counter() - t0, **ack_result(confirms.lat)}
            await producer.create_stream(stream + "-rt", exists_ok=True)
            body, lat = keys[0] + b"v" * spec.get("value_bytes", 100), []
            for _ in range(100):
                await producer.send_wait(stream + "-rt", RawMessage(body))
            for _ in range(spec["sends"]):
                t = time.perf_counter_ns()
                await producer.send_wait(stream + "-rt", RawMessage(body))
                lat.append(time.perf_counter_ns() - t)
                dl.check()
            return lat_result(lat)
        finally:
            await producer.close()
    if mode == "consume":
        from rstream import ConsumerOffsetSpecification, OffsetType
        n, state, done = spec["records"], {"got": 0, "bytes": 0}, asyncio.Event()

        def on_message(msg, ctx) -> None:
            if state["got"] < n:
                state["got"] += 1
                state["bytes"] += len(msg)
                if state["got"] >= n:
                    done.set()

        consumer = Consumer("127.0.0.1", spec["port"], **auth)
        t0 = time.perf_counter()
        await consumer.start()
        try:
            await consumer.subscribe(stream, on_message, initial_credit=spec.get("credit", 50),
                                     offset_specification=ConsumerOffsetSpecification(OffsetType.FIRST, None))
            try:
                await asyncio.wait_for(done.wait(), timeout=max(dl.at - time.perf_counter(), 1))
            except TimeoutError:
                pass
            return {"records": state["got"], "bytes": state["bytes"], "seconds": time.perf_counter() - t0}
        finally:
            await consumer.close()
    raise ValueError(mode)


def client_main(spec: dict) -> int:
    try:
        if spec["mode"].startswith("scale_"):
            from bench.peers.scale import scale_main
            out = scale_main(spec)
        elif spec["system"] == "redis":
            out = redis_client(spec)
        elif spec["system"] == "rabbitmq":
            out = asyncio.run(rabbit_client_async(spec))
        else:
            out = asyncio.run(nats_client_async(spec))
        print(json.dumps(out), flush=True)
        return 0
    except BaseException as exc:  # noqa: BLE001
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 1


def run_client(spec: dict, timeout: float) -> dict:
    proc = spawn([sys.executable, "-m", "bench.peers", "--client", json.dumps(spec)], cwd=str(ROOT),
                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_process(proc, 5)
        return {"error": f"client timed out after {timeout:.0f} s"}
    lines = [x for x in out.splitlines() if x.startswith("{")]
    if not lines:
        return {"error": f"no result; stderr: {err[-500:]}"}
    return json.loads(lines[-1])
