"""Client processes of ``python -m bench.kafka``: bench.broker's worker
(bench/broker/worker.py: the READY / "go" / one JSON line protocol, its
``produce`` and ``consume`` modes with ``logbroker.Producer`` and
``logbroker.Consumer``) plus two modes with confluent-kafka (librdkafka)
speaking the Kafka protocol to the broker's Kafka listener
(``spec["kafka_bootstrap"]``):

- ``kafka_produce``: the topic (and ``<topic>-warmup``) made with our Admin
  as ``produce`` does; one warm-up record acknowledged before the timed
  section; then ``records`` records (the same keys and values, cycled, as
  ``produce``) through ``Producer.produce``, a delivery callback counting
  every acknowledgement and keeping the highest offset, ``flush`` until
  every one came. A full local queue (``BufferError``) is waited out with
  ``poll``; every loop is bounded by a count and ``deadline_s``.
  With ``spec["reports"]`` "errors" librdkafka reports failed records only
  (``delivery.report.only.error``, no Python callback per record); every
  record counts as acknowledged when the flush leaves none queued, none
  failed, and the partitions' high watermarks (ListOffsets) add up to
  ``records``.
- ``kafka_consume``: ``assign`` at offset 0 (in the timed section, as
  ``consume`` assigns and seeks there), ``consume(k, 0.5)`` until
  ``records`` came (k = 10,000 or what is left: it returns when it has k); every record's key and value is touched (lengths
  summed), any error raises.

The producer maps our Producer's settings: ``acks``, ``linger.ms``,
``batch.size`` (and ``batch.num.messages`` high enough that bytes, not a
count, close a batch), ``enable.idempotence`` (our default with
acks="all"), ``compression.type`` none. The consumer's fetch sizes are our
Consumer's defaults (16 MiB per request, 8 MiB per partition), and
``fetch.queue.backoff.ms`` is 1, not librdkafka's 1000: once its prefetch
queue holds ``queued.min.messages`` (100,000) it stops fetching for that
long, which left W2's consumer idle ~85% of the time (6.5 s for 1M
records, 0.9 s with 1 ms; librdkafka's docs advise lowering it then).
"""

from __future__ import annotations

import sys
import time
from itertools import cycle, islice

from bench.broker import worker as base
from bench.broker.worker import Deadline, ensure_topic, make_keys, make_values
from bench.common.stats import MiB

CONSUME_BATCH = 10_000


def producer_config(spec: dict) -> dict:
    record = spec["value_bytes"] + spec["key_bytes"]
    return {"bootstrap.servers": spec["kafka_bootstrap"], "acks": spec["acks"],
            "linger.ms": spec["linger_ms"], "batch.size": spec["batch_size"],
            "batch.num.messages": max(10_000, 2 * spec["batch_size"] // record),
            "message.max.bytes": spec["batch_size"] + MiB,
            "enable.idempotence": spec["acks"] in ("all", "-1", -1), "compression.type": "none",
            "queue.buffering.max.messages": 1_000_000, "socket.nagle.disable": True}


def kafka_produce(spec: dict):
    from confluent_kafka import Consumer, Producer, TopicPartition

    ensure_topic(spec)
    ensure_topic({**spec, "topic": spec["topic"] + "-warmup", "partitions": 1, "configs": None})
    n, topic = spec["records"], spec["topic"]
    keys = make_keys(spec["distinct_keys"], spec["key_bytes"])
    values = make_values(spec["value_bytes"])
    each = spec.get("reports", "each") == "each"
    state = {"acked": 0, "last": -1, "errors": []}

    def on_delivery(err, msg) -> None:
        if err is not None:
            state["errors"].append(str(err))
        else:
            state["acked"] += 1
            state["last"] = max(state["last"], msg.offset())

    # "errors": librdkafka reports failed records only (no Python call per record); the
    # count is then checked against the partitions' high watermarks after the flush
    conf = producer_config(spec) if each else {**producer_config(spec), "on_delivery": on_delivery,
                                                "delivery.report.only.error": True}
    producer = Producer(conf)
    per_record = {"on_delivery": on_delivery} if each else {}
    producer.produce(topic + "-warmup", b"warm-up", on_delivery=on_delivery)  # connect, producer id
    if producer.flush(30) or state["errors"] or state["acked"] != int(each):  # lean: no success report
        raise RuntimeError(f"warm-up record not acknowledged: {state['errors']}")
    producer.list_topics(topic, timeout=30)
    state.update(acked=0, last=-1)
    tps = [TopicPartition(topic, p) for p in range(spec.get("partitions", 1))]
    watermarks = None if each else Consumer({"bootstrap.servers": spec["kafka_bootstrap"],
                                             "group.id": "bench-kafka-check"})
    if watermarks is not None:
        [watermarks.get_watermark_offsets(tp, timeout=10) for tp in tps]  # connected before the timed section

    def acknowledged() -> None:
        """With reports of errors only: the records the broker holds (fresh topic)."""
        highs = [watermarks.get_watermark_offsets(tp, timeout=10)[1] for tp in tps]
        state.update(acked=sum(highs), last=highs[0] - 1)

    def timed(deadline: Deadline) -> dict:
        produce, poll = producer.produce, producer.poll
        for i, (value, key) in enumerate(islice(zip(cycle(values), cycle(keys)), n)):
            for _ in range(100_000):  # a full queue: serve delivery reports, try again
                try:
                    produce(topic, value, key, **per_record)
                    break
                except BufferError:
                    poll(0.01)
                    deadline.check()
            else:
                raise TimeoutError("the producer's queue stayed full")
            if i % 4096 == 0:
                poll(0)
                deadline.check()
                if state["errors"]:
                    raise RuntimeError(f"delivery failed: {state['errors'][:3]}")
        left = producer.flush(max(deadline.at - time.perf_counter(), 0.001))
        if not each and not left and not state["errors"]:
            acknowledged()
        if left or state["errors"] or state["acked"] != n:
            raise RuntimeError(f"{state['acked']} of {n} acknowledged, {left} still queued, "
                               f"errors {state['errors'][:3]}")
        return {"records": state["acked"], "last_offset": state["last"],
                "bytes": n * (spec["value_bytes"] + spec["key_bytes"])}

    def close() -> None:
        producer.flush(5)
        if watermarks is not None:
            watermarks.close()

    return timed, close


def kafka_consume(spec: dict):
    from confluent_kafka import Consumer, TopicPartition

    n, topic = spec["records"], spec["topic"]
    consumer = Consumer({"bootstrap.servers": spec["kafka_bootstrap"], "group.id": "bench-kafka",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "fetch.max.bytes": 16 * MiB, "max.partition.fetch.bytes": 8 * MiB,
                         "receive.message.max.bytes": 17 * MiB, "socket.nagle.disable": True,
                         "fetch.queue.backoff.ms": 1})
    consumer.list_topics(topic, timeout=30)  # connected before the timed section
    tps = [TopicPartition(topic, p, 0) for p in range(spec.get("partitions", 1))]

    def timed(deadline: Deadline) -> dict:
        consumer.assign(tps)
        got = nbytes = polls = 0
        last = -1
        consume = consumer.consume
        while got < n and polls < n + 1000:
            msgs = consume(min(CONSUME_BATCH, n - got), 0.5)  # it waits for that many or the timeout
            polls += 1
            for msg in msgs:
                if msg.error() is not None:
                    raise RuntimeError(f"consume: {msg.error()}")
                nbytes += len(msg.key()) + len(msg.value())
            if msgs:
                got += len(msgs)
                last = msgs[-1].offset()
            deadline.check()
        return {"records": got, "bytes": nbytes, "polls": polls, "last_offset": last}

    return timed, consumer.close


base.MODES.update(kafka_produce=kafka_produce, kafka_consume=kafka_consume)

if __name__ == "__main__":
    sys.exit(base.main())
