"""Peer clients (Redis Streams, NATS JetStream, RabbitMQ Streams), each run in a
subprocess by ``run_client``, bounded by a count and a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.broker_server import spawn, stop_process  # noqa: E402

KEYS, KEY_BYTES, VALUES = 1024, 16, 1021


# -- data ----------------------------------------------------------------------------------
def make_keys() -> list[bytes]:
    return [(b"key-%d-" % i).ljust(KEY_BYTES, b"_")[:KEY_BYTES] for i in range(KEYS)]


def make_values(size: int) -> list[bytes]:
    import random
    rng = random.Random(1)
    return [rng.randbytes(size) for _ in range(VALUES)]


def pct(lat: list[int], q: float) -> float:
    return lat[max(0, math.ceil(q * len(lat)) - 1)] / 1e6


def lat_result(lat: list[int]) -> dict:
    lat.sort()
    return {"records": len(lat), "p50_ms": pct(lat, .5), "p99_ms": pct(lat, .99), "max_ms": lat[-1] / 1e6}


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.at, self.seconds = time.perf_counter() + seconds, seconds

    def check(self) -> None:
        if time.perf_counter() > self.at:
            raise TimeoutError(f"not done within {self.seconds:.0f} s")


# -- clients (run in a subprocess: python -m bench.peers --client SPEC) ----------------------
def redis_client(spec: dict) -> dict:
    import redis
    r = redis.Redis(host="127.0.0.1", port=spec["port"], protocol=2)
    stream, mode, dl = spec["stream"], spec["mode"], Deadline(spec["deadline_s"])
    keys = make_keys()
    if mode == "produce":
        n, values = spec["records"], make_values(spec["value_bytes"])
        batch = spec.get("pipeline", 1000)
        t0 = time.perf_counter()
        done = 0
        while done < n:
            pipe = r.pipeline(transaction=False)
            for i in range(done, min(n, done + batch)):
                pipe.xadd(stream, {b"k": keys[i % KEYS], b"v": values[i % VALUES]})
            ids = pipe.execute()
            done += len(ids)
            dl.check()
        return {"records": done, "seconds": time.perf_counter() - t0}
    if mode == "consume":
        n, got, nbytes, start = spec["records"], 0, 0, "-"
        t0 = time.perf_counter()
        for _ in range(n + 10):
            entries = r.xrange(stream, min=start, max="+", count=spec.get("count", 10_000))
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
        value, key, lat = b"v" * 100, keys[0], []
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
        if mode == "produce":
            n, values = spec["records"], make_values(spec["value_bytes"])
            futs, errors = [], 0
            t0 = time.perf_counter()
            for i in range(n):
                futs.append(await js.publish_async(subjects[i % KEYS], values[i % VALUES], wait_stall=30))
                if len(futs) >= 10_000:  # collect settled futures, keep memory bounded
                    errors += sum(1 for f in futs if f.done() and f.exception() is not None)
                    futs = [f for f in futs if not f.done()]
                    dl.check()
            await asyncio.wait_for(js.publish_async_completed(), timeout=max(dl.at - time.perf_counter(), 1))
            errors += sum(1 for f in futs if f.exception() is not None)
            seconds = time.perf_counter() - t0
            if errors:
                raise RuntimeError(f"{errors} publish acks failed")
            return {"records": n, "seconds": seconds}
        if mode == "consume":
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
            value, subj, lat = b"v" * 100, f"{stream}-rt", []
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
    if mode in ("produce", "roundtrip"):
        producer = Producer("127.0.0.1", spec["port"], **auth)
        await producer.start()
        try:
            if mode == "produce":
                await producer.create_stream(stream, exists_ok=True)
                n, values = spec["records"], make_values(spec["value_bytes"])
                # the key travels as the first 16 bytes of the raw body (no AMQP encoding)

                done = asyncio.Event()
                state = {"ok": 0, "bad": 0}

                def confirmed(status) -> None:
                    state["ok" if status.is_confirmed else "bad"] += 1
                    if state["ok"] + state["bad"] >= n:
                        done.set()

                t0, sent, batch = time.perf_counter(), 0, spec.get("batch", 1000)
                while sent < n:
                    msgs = [RawMessage(keys[i % KEYS] + values[i % VALUES]) for i in range(sent, min(n, sent + batch))]
                    await producer.send_batch(stream, msgs, on_publish_confirm=confirmed)
                    sent += len(msgs)
                    while sent - state["ok"] - state["bad"] > spec.get("max_pending", 50_000):
                        await asyncio.sleep(0.0005)
                        dl.check()
                    dl.check()
                await asyncio.wait_for(done.wait(), timeout=max(dl.at - time.perf_counter(), 1))
                seconds = time.perf_counter() - t0
                if state["bad"]:
                    raise RuntimeError(f"{state['bad']} publishes not confirmed")
                return {"records": state["ok"], "seconds": seconds}
            await producer.create_stream(stream + "-rt", exists_ok=True)
            body, lat = keys[0] + b"v" * 100, []
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
        if spec["system"] == "redis":
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
