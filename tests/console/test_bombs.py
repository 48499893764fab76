"""A compression bomb stored in a topic costs a console view a bounded CPU
(docs/console.md; issue 29: each view of such a topic cost 16-18 s of CPU):
the page inflates at most INFLATE_BYTES, skips the batch it cannot afford
with a row and a note saying why, and the next page goes on after it."""

from __future__ import annotations

import contextlib
import json
import urllib.request

from tests.support.bombs import MiB, ZSTD, bomb, cpu_seconds
from tests.support.fixtures import BrokerProcess
from tests.support.kafka_raw import Raw
from logbroker.cli.serve import KAFKA_READY
from logbroker.kafka.record_batch import KafkaRecord, build_batch

CONSOLE_READY = "logbroker console on "


def _ready_lines(b: BrokerProcess) -> tuple:
    """(Kafka "HOST:PORT", console URL) from the broker's ready lines."""
    kafka = console = None
    while kafka is None or console is None:
        line = b.proc.stdout.readline()
        assert line, "the broker ended before its ready lines"
        if line.startswith(KAFKA_READY):
            kafka = line[len(KAFKA_READY):].strip()
        elif line.startswith(CONSOLE_READY):
            console = line[len(CONSOLE_READY):].strip().rstrip("/")
    return kafka, console


def _produce(raw: Raw, cid: int, records: bytes) -> int:
    raw.sock.sendall(raw.send(0, 8, cid, {"transactional_id": None, "acks": 1, "timeout_ms": 30_000,
                                          "topic_data": [{"name": "bombed", "partition_data": [
                                              {"index": 0, "records": records}]}]}))
    part = raw.recv(0, 8)[1].responses[0].partition_responses[0]
    assert part.error_code == 0, part
    return part.base_offset


def _page(url: str, offset: int) -> dict:
    with urllib.request.urlopen(f"{url}/api/messages?topic=bombed&partition=0&offset={offset}",
                                timeout=60) as resp:
        return json.loads(resp.read())


def test_a_stored_bomb_costs_a_view_a_bounded_cpu(tmp_path):
    # a broker that takes the bomb (its budget raised past 255 MiB) stores it as sent
    b = BrokerProcess(tmp_path / "data", "--kafka-port", "0", "--console-port", "0",
                      config={"max_inflated_bytes_per_request": 512 * MiB}).start()
    try:
        kafka, url = _ready_lines(b)
        with contextlib.closing(Raw(kafka)) as raw:
            raw.sock.settimeout(60)
            assert _produce(raw, 1, build_batch([KafkaRecord(0, 0, None, b"before")])) == 0
            assert _produce(raw, 2, bomb(ZSTD, 255 * MiB)) == 1
            assert _produce(raw, 3, build_batch([KafkaRecord(0, 0, None, b"after")])) == 2
        spent = cpu_seconds(b.pid)
        first = _page(url, 0)
        second = _page(url, first["next_offset"])
        third = _page(url, second["next_offset"])
        spent = cpu_seconds(b.pid) - spent
        assert spent < 1.5, spent  # three views; unbounded, each cost 16-18 s
        assert [r["value"]["text"] for r in first["records"]] == ["before"]
        assert first["next_offset"] == 1 and "255 MiB" not in first.get("stopped", "")
        assert "inflate to more than" in first["stopped"]
        assert second["records"][0]["offset"] == 1 and "skipped" in second["records"][0]
        assert second["next_offset"] == 2 and first["bytes_inflated"] <= 4 * MiB
        assert [r["value"]["text"] for r in third["records"]] == ["after"]
        assert "Traceback" not in b.log()
    finally:
        b.kill()
