"""Helpers of the Kafka listener's tests: a raw Kafka connection speaking
frames through our codec, a bounded read of a kafka-python consumer, a
Produce body of one batch."""

from __future__ import annotations

import contextlib
import socket
import time

from logbroker.kafka.codec import RequestHeader, decode_response, encode_request
from logbroker.kafka.framing import KafkaFrameReader
from logbroker.kafka.record_batch import KafkaRecord, build_batch

WAIT = 10.0


def kread(consumer, n: int) -> list:
    """Poll a KafkaConsumer until ``n`` records came (bounded by WAIT)."""
    out, deadline = [], time.monotonic() + WAIT
    while len(out) < n and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            out += records
    return out


def read_back(bootstrap: str, topic: str, n: int) -> list:
    """The first ``n`` records of ``topic`` partition 0, read from offset 0
    by our own Consumer at our listener's ``bootstrap`` (bounded by WAIT)."""
    from tests.support.fixtures import FAST, consume
    from logbroker import Consumer

    c = Consumer(bootstrap, **FAST)
    try:
        c.assign([(topic, 0)])
        c.seek(topic, 0, 0)
        return consume(c, n, timeout=WAIT)
    finally:
        c.close()


class Raw:
    """A Kafka connection speaking frames through our codec."""

    def __init__(self, bootstrap: str, source: "str | None" = None) -> None:
        """``source``: the local address to connect from (another loopback one, 127.0.0.2)."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=WAIT,
                                             source_address=(source, 0) if source else None)
        self.reader = KafkaFrameReader(trusted=True)
        self.sent: dict = {}

    def send(self, api_key: int, version: int, cid: int, body) -> bytes:
        self.sent[cid] = (api_key, version)
        return encode_request(RequestHeader(api_key, version, cid, "raw"), body)

    def recv(self, api_key: int, version: int):
        while (frame := self.reader.next_frame()) is None:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed by the broker")
            self.reader.receive_data(data)
        return decode_response(bytes(frame), api_key, version)

    def closed_by_peer(self) -> bool:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                if not self.sock.recv(65536):
                    return True
            except ConnectionResetError:
                return True
        return False

    def close(self) -> None:
        self.sock.close()


def raw_call(address: str, api: int, version: int, body: dict):
    """One Kafka request on a fresh connection; the decoded answer's body."""
    raw = Raw(address)
    try:
        raw.sock.sendall(raw.send(api, version, 1, body))
        return raw.recv(api, version)[1]
    finally:
        raw.close()


def admin_error(fut, wait: float = 10.0):
    """The KafkaError a confluent-kafka AdminClient future fails with."""
    import pytest
    from confluent_kafka import KafkaException

    with pytest.raises(KafkaException) as info:
        fut.result(wait)
    return info.value.args[0]


def produce_body(topic: str, acks: int, values, ts: int = 5_000) -> dict:
    batch = build_batch([KafkaRecord(i, i, None, v) for i, v in enumerate(values)],
                        base_timestamp=ts)
    return {"acks": acks, "timeout_ms": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}


@contextlib.contextmanager
def kafka_broker(data_dir, *extra: str, config: "dict | None" = None, kafka_port: int = 0):
    """A broker process with ``--kafka-port`` (0: a free one) and ``extra``: yields
    (BrokerProcess, advertised Kafka "HOST:PORT" from its ready line); checks
    its log holds no traceback at the end, kills it by PID."""
    from tests.support.fixtures import BrokerProcess

    b = BrokerProcess(data_dir, "--kafka-port", str(kafka_port), *extra, config=config)
    try:
        b.start()
        yield b, kafka_address(b)
        assert "Traceback" not in b.log()
    finally:
        b.kill()


def kafka_address(b) -> str:
    """The Kafka "HOST:PORT" of a started broker process, from its ready line
    (printed right after the "listening" line)."""
    from logbroker.cli.serve import KAFKA_READY

    line = b.proc.stdout.readline()
    assert line.startswith(KAFKA_READY), line
    return line[len(KAFKA_READY):].strip()


def kafka_and_metrics(b) -> None:
    """Set ``b.kafka`` (its Kafka "HOST:PORT") and ``b.metrics_url`` of a
    started broker process with both, from their ready lines (either order)."""
    from logbroker.cli.serve import KAFKA_READY

    lines = [b.proc.stdout.readline().strip() for _ in range(2)]
    b.metrics_url = next(x for x in lines if not x.startswith(KAFKA_READY)).split()[-1]
    b.kafka = next(x for x in lines if x.startswith(KAFKA_READY))[len(KAFKA_READY):]


def batch_codecs(bootstrap: str, topic: str) -> set:
    """The compression codec of every batch of partition 0, from a raw Fetch."""
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(1, 11, 1, {"max_wait_ms": 0, "min_bytes": 0, "topics": [
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                             "partition_max_bytes": 1 << 20}]}]}))
        records = bytes(raw.recv(1, 11)[1].responses[0].partitions[0].records)
    finally:
        raw.close()
    codecs, pos = set(), 0
    while pos + 23 <= len(records):
        codecs.add(int.from_bytes(records[pos + 21:pos + 23], "big") & 7)
        pos += 12 + int.from_bytes(records[pos + 8:pos + 12], "big")
    return codecs
