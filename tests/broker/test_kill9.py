"""kill -9 durability of the broker: a producer with acks=all sends
continuously while the broker is SIGKILLed at random moments and restarted.
Afterwards every acknowledged record is present exactly once, at its
acknowledged offset, and offsets are contiguous."""

from __future__ import annotations

import os
import queue
import random
import subprocess
import sys
import threading
import time

import pytest

from tests.support.fixtures import BrokerProcess
from logbroker import Admin, Consumer

PRODUCER = os.path.join(os.path.dirname(__file__), "..", "support", "children", "producer.py")


class ProducerProcess:
    def __init__(self, bootstrap: str, topic: str, partitions: int = 1) -> None:
        self.proc = subprocess.Popen([sys.executable, PRODUCER, bootstrap, topic, "300",
                                      str(partitions)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.acked: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value
        self.failed = 0
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not predicate():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                return False
            if line is None:
                return predicate()
            self._take(line)
        return True

    def _take(self, line: str) -> None:
        kind, _, rest = line.partition(" ")
        if kind == "ack":
            partition, offset, value = rest.split()
            key = (int(partition), int(offset))
            assert self.acked.setdefault(key, value.encode()) == value.encode(), line
        elif kind == "fail":
            self.failed += 1
        self.last = kind

    def finish(self, timeout: float = 120) -> None:
        self.proc.stdin.close()
        self.last = None
        assert self.wait_for(lambda: self.last == "done", timeout), "producer did not finish"
        self.proc.wait(timeout=30)
        self.proc.stdout.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def read_all(bootstrap: str, topic: str, partition: int = 0) -> list[tuple[int, bytes]]:
    out = []
    tp = (topic, partition)
    with Admin(bootstrap=bootstrap) as admin:
        end = admin.list_offsets([tp], "latest")[tp].offset
    with Consumer(bootstrap=bootstrap) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + 60
        while consumer.position(*tp) < end and time.monotonic() < deadline:
            out += [(r.offset, r.value) for r in consumer.poll(timeout=1.0)]
    return out


def run(tmp_path, rounds: int, seed: int, partitions: int = 1) -> None:
    """``partitions`` > 1: a topic of that many, written round-robin (most
    group commits then touch many logs: one shared barrier, decision 103)."""
    rng = random.Random(seed)
    broker = BrokerProcess(tmp_path / "data").start()
    if partitions > 1:
        with Admin(bootstrap=broker.bootstrap) as admin:
            admin.create_topic("k9", partitions)
    producer = ProducerProcess(broker.bootstrap, "k9", partitions)
    try:
        assert producer.wait_for(lambda: getattr(producer, "last", None) == "ready", 30)
        for _ in range(rounds):
            target = len(producer.acked) + rng.randint(1, 400)
            assert producer.wait_for(lambda: len(producer.acked) >= target, 60), "no progress"
            broker.kill()
            broker.start()
        target = len(producer.acked) + 50
        assert producer.wait_for(lambda: len(producer.acked) >= target, 60)
        producer.finish()
        logs = [read_all(broker.bootstrap, "k9", p) for p in range(partitions)]
    finally:
        producer.kill()
        broker.kill()
    values = [v for records in logs for _, v in records]
    assert len(set(values)) == len(values), "a record is present twice"
    for p, records in enumerate(logs):
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(records))), f"partition {p}: offsets not contiguous"
    for (p, offset), value in producer.acked.items():
        assert offset < len(logs[p]) and logs[p][offset][1] == value, \
            f"acked offset {offset} of partition {p} lost"
    assert producer.failed == 0
    records = values
    print(f"kill9: {rounds} rounds, {len(producer.acked)} acked, {len(records)} in the log")


def test_broker_kill9_keeps_every_acknowledged_record(tmp_path):
    # 4 kills at random moments (each round restarts the broker, ~1 s, while the producer sends
    # up to 25,000 records a second, all read back at the end); the soak below kills it 200 times
    run(tmp_path, rounds=4, seed=11)


def test_broker_kill9_across_many_partitions_keeps_every_acknowledged_record(tmp_path):
    # 24 partitions written round-robin: group commits of many logs share one syncfs
    run(tmp_path, rounds=3, seed=13, partitions=24)


@pytest.mark.slow
def test_broker_kill9_soak(tmp_path):
    run(tmp_path, rounds=200, seed=12)
