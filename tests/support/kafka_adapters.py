"""One small adapter per Kafka client for tests/kafka/test_matrix.py:
kafka-python, aiokafka, confluent-kafka (librdkafka, always with
``debug=protocol``, its log kept in ``RDKAFKA_LOG``) and kcat (a
subprocess). Each adapter has the same five calls, every one bounded by
WAIT; records read come back as (offset, key, value) in order:

- ``produce(bootstrap, topic, records, acks, idempotent, compression)``:
  records are (key, value, timestamp ms) to partition 0; returns once the
  client flushed (acks=0: once it wrote).
- ``from_offset(bootstrap, topic, offset, n)`` / ``from_timestamp(...,
  ts, n)``: partition 0 without a group, ``n`` records.
- ``group_read(bootstrap, topic, group, n)``: subscribe with ``group``
  (earliest when it has no commit), read ``n`` records, commit, close.

``sets_timestamps``: the client sends the records' own timestamps (kcat -P
cannot)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import time

import pytest

from tests.support.kafka_raw import WAIT

GROUP_FAST = {"session_timeout_ms": 3000, "heartbeat_interval_ms": 100}


def _until(n: int, poll) -> list:
    out, deadline = [], time.monotonic() + WAIT
    while len(out) < n and time.monotonic() < deadline:
        out += poll()
    return out


class KafkaPython:
    name, sets_timestamps = "kafka-python", True

    def __init__(self) -> None:
        import kafka
        self.k = kafka

    def produce(self, bootstrap, topic, records, acks, idempotent, compression) -> None:
        p = self.k.KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=5,
                                 enable_idempotence=idempotent, request_timeout_ms=5000,
                                 compression_type=None if compression == "none" else compression)
        try:
            for key, value, ts in records:
                p.send(topic, key=key, value=value, partition=0, timestamp_ms=ts)
            p.flush(timeout=WAIT)
        finally:
            p.close(timeout=WAIT)

    def _read(self, c, n) -> list:
        def poll():
            return [(r.offset, r.key, r.value) for rs in c.poll(timeout_ms=100).values()
                    for r in rs]
        return _until(n, poll)

    def _assigned(self, bootstrap, topic, seek) -> tuple:
        c = self.k.KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        tp = self.k.TopicPartition(topic, 0)
        c.assign([tp])
        seek(c, tp)
        return c

    def from_offset(self, bootstrap, topic, offset, n) -> list:
        c = self._assigned(bootstrap, topic, lambda c, tp: c.seek(tp, offset))
        try:
            return self._read(c, n)
        finally:
            c.close()

    def from_timestamp(self, bootstrap, topic, ts, n) -> list:
        c = self._assigned(bootstrap, topic,
                           lambda c, tp: c.seek(tp, c.offsets_for_times({tp: ts})[tp].offset))
        try:
            return self._read(c, n)
        finally:
            c.close()

    def group_read(self, bootstrap, topic, group, n) -> list:
        c = self.k.KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False,
                                 **GROUP_FAST)
        try:
            # the topic's metadata before the first poll joins the group: a leader that
            # assigns without it assigns nothing ("No partition metadata for topic") and
            # kafka-python may not rejoin within the wait (seen with another test beside it)
            assert c.partitions_for_topic(topic), f"kafka-python has no metadata for {topic}"
            got = self._read(c, n)
            c.commit()
            return got
        finally:
            c.close()


class AioKafka:
    name, sets_timestamps = "aiokafka", True

    def __init__(self) -> None:
        import aiokafka
        self.a = aiokafka

    def produce(self, bootstrap, topic, records, acks, idempotent, compression) -> None:
        async def run() -> None:
            p = self.a.AIOKafkaProducer(
                bootstrap_servers=bootstrap, acks=acks, enable_idempotence=idempotent,
                linger_ms=5, compression_type=None if compression == "none" else compression)
            await p.start()
            try:
                for key, value, ts in records:
                    await p.send(topic, key=key, value=value, partition=0, timestamp_ms=ts)
                await p.flush()
            finally:
                await p.stop()
        asyncio.run(asyncio.wait_for(run(), WAIT))

    async def _read(self, c, n) -> list:
        got = []
        async with asyncio.timeout(WAIT):
            while len(got) < n:
                for rs in (await c.getmany(timeout_ms=100)).values():
                    got += [(r.offset, r.key, r.value) for r in rs]
        return got

    def _assigned(self, bootstrap, topic, n, seek) -> list:
        async def run() -> list:
            c = self.a.AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                        enable_auto_commit=False)
            await c.start()
            try:
                tp = self.a.TopicPartition(topic, 0)
                c.assign([tp])
                await seek(c, tp)
                return await self._read(c, n)
            finally:
                await c.stop()
        return asyncio.run(run())

    def from_offset(self, bootstrap, topic, offset, n) -> list:
        async def seek(c, tp):
            c.seek(tp, offset)
        return self._assigned(bootstrap, topic, n, seek)

    def from_timestamp(self, bootstrap, topic, ts, n) -> list:
        async def seek(c, tp):
            c.seek(tp, (await c.offsets_for_times({tp: ts}))[tp].offset)
        return self._assigned(bootstrap, topic, n, seek)

    def group_read(self, bootstrap, topic, group, n) -> list:
        async def run() -> list:
            c = self.a.AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group,
                                        auto_offset_reset="earliest", enable_auto_commit=False,
                                        **GROUP_FAST)
            await c.start()
            try:
                got = await self._read(c, n)
                await c.commit()
                return got
            finally:
                await c.stop()
        return asyncio.run(run())


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record) -> None:
        self.lines.append(record.getMessage())


RDKAFKA_LOG = _Lines()
_logger = logging.getLogger("test.rdkafka.matrix")
_logger.setLevel(logging.DEBUG)
_logger.propagate = False
_logger.addHandler(RDKAFKA_LOG)


def _rdkafka_logger() -> logging.Logger:
    """The logger every librdkafka client of the matrix logs to (RDKAFKA_LOG)."""
    return _logger


def protocol_failures(lines) -> list:
    """librdkafka's debug lines reporting a response it could not parse."""
    return [line for line in lines if "underflow" in line.lower() or "parse fail" in line.lower()]


class Confluent:
    name, sets_timestamps = "confluent-kafka", True

    def __init__(self) -> None:
        import confluent_kafka
        self.ck = confluent_kafka

    def _conf(self, bootstrap, **kw) -> dict:
        return {"bootstrap.servers": bootstrap, "debug": "protocol", **kw}

    def produce(self, bootstrap, topic, records, acks, idempotent, compression) -> None:
        failed = []
        p = self.ck.Producer(self._conf(bootstrap, acks=str(acks),
                                        **{"enable.idempotence": idempotent, "linger.ms": 5,
                                           "compression.type": compression}), logger=_logger)
        for key, value, ts in records:
            p.produce(topic, value=value, key=key, partition=0, timestamp=ts,
                      on_delivery=lambda err, _m: err and failed.append(err))
        assert p.flush(WAIT) == 0 and not failed, failed

    def _read(self, c, n) -> list:
        def poll():
            msg = c.poll(0.1)
            if msg is None:
                return []
            assert msg.error() is None, msg.error()
            return [(msg.offset(), msg.key(), msg.value())]
        try:
            return _until(n, poll)
        finally:
            c.close()

    def _consumer(self, bootstrap, **kw):
        return self.ck.Consumer(self._conf(bootstrap, **{"enable.auto.commit": False, **kw}),
                                logger=_logger)

    def from_offset(self, bootstrap, topic, offset, n) -> list:
        c = self._consumer(bootstrap, **{"group.id": "unused"})
        c.assign([self.ck.TopicPartition(topic, 0, offset)])
        return self._read(c, n)

    def from_timestamp(self, bootstrap, topic, ts, n) -> list:
        c = self._consumer(bootstrap, **{"group.id": "unused"})
        found = c.offsets_for_times([self.ck.TopicPartition(topic, 0, ts)], WAIT)
        c.assign(found)
        return self._read(c, n)

    def group_read(self, bootstrap, topic, group, n) -> list:
        c = self._consumer(bootstrap, **{"group.id": group, "auto.offset.reset": "earliest",
                                         "session.timeout.ms": 3000,
                                         "heartbeat.interval.ms": 100})
        c.subscribe([topic])
        got = _until(n, lambda: [(m.offset(), m.key(), m.value())
                                 for m in c.consume(n, 0.1) if m.error() is None])
        c.commit(asynchronous=False)
        c.close()
        return got


def kcat_path() -> str:
    """kcat on PATH; skips without it, or fails with LOGBROKER_KCAT_REQUIRED=1."""
    from tests.support.fixtures import require_tool

    return require_tool("kcat", "LOGBROKER_KCAT_REQUIRED", "tools/install-kcat.sh")


def kcat_run(args, stdin: "str | None" = None, log: "list | None" = None) -> str:
    """kcat's stdout (its stderr appended to ``log`` if given)."""
    done = subprocess.run([kcat_path(), *args], input=stdin, text=True, capture_output=True,
                          timeout=3 * WAIT)
    assert done.returncode == 0, done.stderr
    if log is not None:
        log.append(done.stderr)
    return done.stdout


def kcat_records(out: str) -> list:
    """Lines of ``-f '%o %k %s\\n'`` as (offset, key, value); an empty key is None."""
    rows = []
    for line in out.splitlines():
        o, k, v = line.split(" ", 2)
        rows.append((int(o), k.encode() or None, v.encode()))
    return rows


class Kcat:
    name, sets_timestamps = "kcat", False
    FMT = ["-f", "%o %k %s\\n"]

    def produce(self, bootstrap, topic, records, acks, idempotent, compression) -> None:
        lines = "".join(f"{k.decode()}\t{v.decode()}\n" for k, v, _ts in records)
        self.log: list = []  # librdkafka's msg debug lines: why it did not compress
        kcat_run(["-P", "-b", bootstrap, "-t", topic, "-p", "0", "-K", "\t", "-d", "msg",
                  "-X", f"acks={acks}", "-X", f"enable.idempotence={str(idempotent).lower()}",
                  "-z", compression], lines, self.log)

    def from_offset(self, bootstrap, topic, offset, n) -> list:
        return kcat_records(kcat_run(["-C", "-b", bootstrap, "-t", topic, "-p", "0",
                                      "-o", str(offset), "-c", str(n), *self.FMT]))

    def from_timestamp(self, bootstrap, topic, ts, n) -> list:
        return kcat_records(kcat_run(["-C", "-b", bootstrap, "-t", topic, "-p", "0",
                                      "-o", f"s@{ts}", "-c", str(n), *self.FMT]))

    def group_read(self, bootstrap, topic, group, n) -> list:
        return kcat_records(kcat_run(["-b", bootstrap, "-G", group, "-X", "auto.offset.reset=earliest",
                                      "-c", str(n), *self.FMT, topic]))


CLIENTS = {"kafka-python": (KafkaPython, "kafka"), "aiokafka": (AioKafka, "aiokafka"),
           "confluent-kafka": (Confluent, "confluent_kafka"), "kcat": (Kcat, None)}


def adapter(name: str):
    """The client's adapter; skips when its library (or kcat) is missing."""
    cls, module = CLIENTS[name]
    if module is None:
        kcat_path()
    else:
        pytest.importorskip(module)
    return cls()
