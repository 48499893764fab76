"""Scale run: many topics (streams) with few records each, on logbroker and the
peers. Run in a subprocess like the other peer clients: ``run_client(spec,
timeout)`` -> ``python -m bench.peers --client SPEC`` -> ``client_main`` ->
``scale_main(spec)`` -> one JSON line.

Spec::

    {"system": "logbroker" | "redis" | "nats" | "rabbitmq",
     "mode": "scale_produce" | "scale_consume",
     "bootstrap": "127.0.0.1:PORT",      # logbroker
     "port": PORT,                       # the others (127.0.0.1 only)
     "topics": 1000, "prefix": "scale", "records_per_topic": 100,
     "value_bytes": 100, "deadline_s": 300,
     "batch": ...}                       # optional, see each system below

Topic i is named ``f"{prefix}{i:04d}"``. Record i (of ``topics *
records_per_topic``) goes to topic ``i % topics`` with key
``make_keys()[i % 1024]`` (16 bytes) and value ``make_values(value_bytes)[i %
1021]``, so every topic gets exactly ``records_per_topic`` records.

``scale_produce`` creates the topics ("setup_seconds", not in "seconds"),
then sends every record, timed until every one is acknowledged; per-topic
work a client does on its first send to a topic (logbroker: one Metadata
request; rstream: declaring a publisher) is inside "seconds". Returns
``{"records", "seconds", "setup_seconds", "topics"}``.

``scale_consume`` reads every record of every topic from the start, counting
records and key + value bytes, timed from the first subscription until the
last record. Returns ``{"records", "bytes", "seconds", "topics"}``; fewer
records than sent means the deadline came first (Redis: a stream had no
more).

Per system:

- logbroker: ``Admin.create_topics`` (one request, 1 partition each);
  ``Producer(acks="all", linger_ms=5, batch_size=1 MiB)`` (per-partition
  batches inside the client); one ``Consumer`` assigned every (topic, 0),
  ``seek_to_beginning``, ``poll``.
- Redis Streams: no creation (a stream is made by its first XADD; setup 0);
  pipelines of ``batch`` (1,000) XADDs (fields ``k``, ``v``); consumer
  ``XREAD COUNT batch (1,000) STREAMS`` over ``streams_per_read`` (10)
  unfinished streams at a time, from ``0-0`` (replies of ~1,000 entries:
  one XREAD over all 1,000 streams, 100,000 entries, read 2.3x slower).
- NATS JetStream: one stream per topic, subject = the name (``add_stream``,
  file store); ``publish_async`` of key + value as the payload (the key is
  its first 16 bytes; there is no per-topic subject token left for it);
  consumer: a JetStream consumer sees one stream only, so one ordered push
  consumer per stream (``js.subscribe(name, ordered_consumer=True, cb=...)``:
  no acks, flow control), subscribed one after the other, all delivering at
  once into one callback (5x the throughput of ``fetch`` here, see
  ``nats_read_ordered``).
- RabbitMQ Streams (rstream): ``create_stream`` per stream (through a
  ``Consumer`` object: ``Producer.create_stream`` closes its locator
  connection after each call, with a fixed 0.2 s sleep); key + value as a
  raw body; records are buffered per stream and sent with ``send_batch``
  (the client's fastest method) when ``batch`` (default
  ``records_per_topic``, at most 1,000) are there, confirms counted by
  callback; one subscription per stream from ``OffsetType.FIRST``. rstream
  allows 200 publishers / subscribers per Producer / Consumer object
  (``constants.MAX_ITEM_ALLOWED``), so ``ceil(topics / 200)`` of each are
  used.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from itertools import islice

from bench.peers.loops import (
    KEYS,
    VALUES,
    Deadline,
    RabbitConfirms,
    make_keys,
    make_values,
    nats_publish_all,
    nats_read_ordered,
    redis_read_streams,
    redis_xadd_all,
)

RSTREAM_MAX = 200  # rstream.constants.MAX_ITEM_ALLOWED: publishers/subscribers per object
AUTH = {"username": "guest", "password": "guest"}


def scale_main(spec: dict) -> dict:
    mode = spec["mode"]
    if mode not in ("scale_produce", "scale_consume"):
        raise ValueError(mode)
    system = spec["system"]
    if system == "logbroker":
        return logbroker_scale(spec)
    if system == "redis":
        return redis_scale(spec)
    if system == "nats":
        return asyncio.run(nats_scale(spec))
    if system == "rabbitmq":
        return asyncio.run(rabbit_scale(spec))
    raise ValueError(system)


def names_of(spec: dict) -> list[str]:
    return [f"{spec['prefix']}{i:04d}" for i in range(spec["topics"])]


def records_of(spec: dict, names: list[str]):
    """(topic, key, value) of every record, in send order (round-robin)."""
    keys, values, t = make_keys(), make_values(spec["value_bytes"]), len(names)
    return ((names[i % t], keys[i % KEYS], values[i % VALUES])
            for i in range(t * spec["records_per_topic"]))


def produced(spec: dict, records: int, seconds: float, setup: float) -> dict:
    return {"records": records, "seconds": seconds, "setup_seconds": setup, "topics": spec["topics"]}


def consumed(spec: dict, records: int, nbytes: int, seconds: float) -> dict:
    return {"records": records, "bytes": nbytes, "seconds": seconds, "topics": spec["topics"]}


def left(dl: Deadline) -> float:
    return max(dl.at - time.perf_counter(), 1.0)


# -- logbroker -----------------------------------------------------------------------------
def logbroker_scale(spec: dict) -> dict:
    from logbroker import Admin, Consumer, Producer
    from logbroker.errors import TopicAlreadyExistsError
    names, dl = names_of(spec), Deadline(spec["deadline_s"])
    total = len(names) * spec["records_per_topic"]
    if spec["mode"] == "scale_produce":
        t0 = time.perf_counter()
        with Admin(spec["bootstrap"]) as admin:
            errors = admin.create_topics([(name, 1) for name in names], raise_errors=False)
        bad = [e for e in errors.values() if e is not None and not isinstance(e, TopicAlreadyExistsError)]
        if bad:
            raise bad[0]
        setup = time.perf_counter() - t0
        producer = Producer(spec["bootstrap"], acks="all", linger_ms=5, batch_size=1 << 20)
        try:
            producer.partitions_for(names[0])  # connect before the clock starts
            send, handles, records = producer.send, [], records_of(spec, names)
            t0 = time.perf_counter()
            for _ in range(total // 4096 + 1):
                handles += [send(topic, value, key=key) for topic, key, value in islice(records, 4096)]
                dl.check()
            producer.flush(timeout=left(dl))
            seconds = time.perf_counter() - t0
            failed = sum(1 for h in handles if h.exception() is not None)
            if failed:
                raise RuntimeError(f"{failed} records not acknowledged")
            return produced(spec, len(handles), seconds, setup)
        finally:
            producer.close()
    consumer = Consumer(spec["bootstrap"], auto_offset_reset="earliest")
    try:
        t0, got, nbytes, polls = time.perf_counter(), 0, 0, 0
        consumer.assign([(name, 0) for name in names])
        consumer.seek_to_beginning()
        while got < total and polls < total + 1000:
            records = consumer.poll(timeout=0.5)
            polls += 1
            got += len(records)
            nbytes += sum(len(r.key) + len(r.value) for r in records)
            dl.check()
        return consumed(spec, got, nbytes, time.perf_counter() - t0)
    finally:
        consumer.close()


# -- Redis Streams -------------------------------------------------------------------------
def redis_scale(spec: dict) -> dict:
    import redis
    r = redis.Redis(host="127.0.0.1", port=spec["port"], protocol=2)
    names, dl, batch = names_of(spec), Deadline(spec["deadline_s"]), spec.get("batch", 1000)
    total = len(names) * spec["records_per_topic"]
    try:
        r.ping()  # connect before the clock starts
        if spec["mode"] == "scale_produce":
            items = ((topic, {b"k": key, b"v": value}) for topic, key, value in records_of(spec, names))
            t0 = time.perf_counter()
            done = redis_xadd_all(r, items, total, batch, dl)
            return produced(spec, done, time.perf_counter() - t0, 0.0)
        t0 = time.perf_counter()
        got, nbytes = redis_read_streams(r, names, spec["records_per_topic"], batch,
                                         spec.get("streams_per_read", 10), dl)
        return consumed(spec, got, nbytes, time.perf_counter() - t0)
    finally:
        r.close()


# -- NATS JetStream ------------------------------------------------------------------------
async def nats_scale(spec: dict) -> dict:
    import nats
    import nats.js.errors
    names, dl = names_of(spec), Deadline(spec["deadline_s"])
    nc = await nats.connect(f"nats://127.0.0.1:{spec['port']}", max_reconnect_attempts=0)
    js = nc.jetstream(publish_async_max_pending=spec.get("max_pending", 4000))
    try:
        if spec["mode"] == "scale_produce":
            t0 = time.perf_counter()
            for name in names:
                with contextlib.suppress(nats.js.errors.BadRequestError):  # exists already
                    await js.add_stream(name=name, subjects=[name])
                dl.check()
            setup = time.perf_counter() - t0
            items = ((topic, key + value) for topic, key, value in records_of(spec, names))
            t0 = time.perf_counter()
            n = await nats_publish_all(js, items, dl)
            return produced(spec, n, time.perf_counter() - t0, setup)
        t0 = time.perf_counter()
        got, nbytes, t1 = await nats_read_ordered(js, [(name, name) for name in names],
                                                  len(names) * spec["records_per_topic"], dl)
        return consumed(spec, got, nbytes, t1 - t0)
    finally:
        await nc.close()


# -- RabbitMQ Streams ----------------------------------------------------------------------
async def rabbit_scale(spec: dict) -> dict:
    names, dl = names_of(spec), Deadline(spec["deadline_s"])
    per = RSTREAM_MAX
    objects = math.ceil(len(names) / per)
    if spec["mode"] == "scale_produce":
        return await rabbit_produce(spec, names, dl, per, objects)
    from rstream import Consumer, ConsumerOffsetSpecification, OffsetType
    total = len(names) * spec["records_per_topic"]
    state, done = {"got": 0, "bytes": 0}, asyncio.Event()

    def on_message(msg, ctx) -> None:
        state["got"] += 1
        state["bytes"] += len(msg)
        if state["got"] >= total:
            done.set()

    consumers = [Consumer("127.0.0.1", spec["port"], **AUTH) for _ in range(objects)]
    try:
        for c in consumers:
            await c.start()
        first = ConsumerOffsetSpecification(OffsetType.FIRST, None)
        t0 = time.perf_counter()
        for i, name in enumerate(names):
            await consumers[i // per].subscribe(name, on_message, offset_specification=first,
                                                initial_credit=spec.get("credit", 10))
            dl.check()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=left(dl))
        return consumed(spec, state["got"], state["bytes"], time.perf_counter() - t0)
    finally:
        for c in consumers:
            await c.close()


async def rabbit_produce(spec: dict, names: list[str], dl: Deadline, per: int, objects: int) -> dict:
    from rstream import Consumer, Producer, RawMessage
    total = len(names) * spec["records_per_topic"]
    batch = spec.get("batch", min(spec["records_per_topic"], 1000))
    producers = [Producer("127.0.0.1", spec["port"], **AUTH) for _ in range(objects)]
    admin = Consumer("127.0.0.1", spec["port"], **AUTH)
    try:
        for p in producers:
            await p.start()
        await admin.start()
        t0 = time.perf_counter()
        for name in names:  # Producer.create_stream would reconnect (and sleep 0.2 s) every time
            await admin.create_stream(name, exists_ok=True)
            dl.check()
        setup = time.perf_counter() - t0
        index = {name: i // per for i, name in enumerate(names)}
        confirms = RabbitConfirms(total, spec.get("max_pending", 50_000))
        bufs: dict[str, list] = {name: [] for name in names}
        t0, sent = time.perf_counter(), 0
        for topic, key, value in records_of(spec, names):
            buf = bufs[topic]
            buf.append(RawMessage(key + value))
            if len(buf) >= batch:
                await producers[index[topic]].send_batch(topic, buf, on_publish_confirm=confirms)
                sent += len(buf)
                bufs[topic] = []
                await confirms.throttle(sent, dl)
                dl.check()
        for topic, buf in bufs.items():  # the rest (when batch does not divide the count)
            if buf:
                await producers[index[topic]].send_batch(topic, buf, on_publish_confirm=confirms)
        ok = await confirms.wait(dl)
        return produced(spec, ok, time.perf_counter() - t0, setup)
    finally:
        for p in producers:
            await p.close()
        await admin.close()
