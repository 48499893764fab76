"""Issue 29's acceptance, all at once (slow: ``pytest -m slow``): a broker
holding 20,000 partitions, attacked at the same time by compression bombs
on the Kafka listener, a 10,000-partition CreateTopics and 8 metrics
scrapers in a loop; another client's round trip stays under 100 ms at p99
and the broker's resident memory under its stated bound (docs/security.md,
"Threat model": its size before the attack plus the inflation budget, 8 KiB
a created partition, and a metrics text per metrics connection and two
more).

Each attack also has a test of its own in the default suite
(tests/kafka/test_bombs.py, tests/broker/test_topic_limits.py,
tests/metrics/test_load.py); this one shows they hold together."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

import pytest

from bench.metrics.scrapers import make_partitions
from tests.support.bombs import MiB, ZSTD, Pinger, bomb, rss_peak
from tests.support.fixtures import BrokerProcess, RawConn
from tests.support.kafka_raw import Raw, kafka_and_metrics
from tests.support.metrics_scrape import SCRAPER
from logbroker.errors import RecordTooLargeError
from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.protocol import messages as m

pytestmark = pytest.mark.slow

HOSTED, CREATED = 20_000, 10_000
SCRAPERS, ATTACK_S = 8, 20.0
INFLATION = 64 * MiB + 16 * MiB + 1 * MiB  # budget, thread and loop buffers (docs/security.md)
PER_PARTITION = 8 << 10  # a created partition's memory, at most (docs/security.md)
METRICS_CONNECTIONS = 16  # metrics_max_connections' default: each may hold a text being sent


def _produce(raw: Raw, cid: int, records: bytes) -> None:
    raw.sock.sendall(raw.send(0, 8, cid, {"transactional_id": None, "acks": 1,
                                          "timeout_ms": 30_000, "topic_data": [
                                              {"name": "bomb", "partition_data": [
                                                  {"index": 0, "records": records}]}]}))


def _answer(raw: Raw):
    return raw.recv(0, 8)[1].responses[0].partition_responses[0]


@pytest.fixture
def crowded():
    work = tempfile.mkdtemp(prefix="lb-mix-", dir="/dev/shm" if os.path.isdir("/dev/shm")
                            else None)
    try:
        make_partitions(os.path.join(work, "data"), HOSTED)
        b = BrokerProcess(os.path.join(work, "data"), "--kafka-port", "0", "--metrics-port", "0",
                          config={"max_partitions_per_broker": HOSTED + CREATED + 100})
        b.start(timeout=300)
        try:
            kafka_and_metrics(b)
            yield b
        finally:
            b.kill()
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_bombs_creation_and_scrapers_together_leave_other_clients_unstalled(crowded):
    b = crowded
    ping = RawConn(b.port)
    with contextlib.closing(Raw(b.kafka)) as attacker:
        _produce(attacker, 1, build_batch([KafkaRecord(0, 0, None, b"x")]))
        assert _answer(attacker).error_code == 0
        before = rss_peak(b.pid)
        stop, refused, created = threading.Event(), [], []

        def bombs() -> None:
            cid = 2
            while not stop.is_set() and cid < 200:
                _produce(attacker, cid, bomb(ZSTD, 255 * MiB) * 8)
                refused.append(_answer(attacker).error_code)
                cid += 1

        def create() -> None:
            conn = RawConn(b.port, timeout=300)
            try:
                got = conn.call(m.CreateTopics(topics=(("wide", CREATED, {}),)), timeout=300)
                created.append(got.topics[0].error)
            finally:
                conn.close()

        scrapers = subprocess.Popen([sys.executable, "-c", SCRAPER, b.metrics_url,
                                     str(SCRAPERS), str(ATTACK_S)], stdout=subprocess.PIPE,
                                    text=True)
        threads = [threading.Thread(target=bombs), threading.Thread(target=create)]
        try:
            with Pinger(lambda: ping.call(m.Handshake(), timeout=30), every=0.005) as pinger:
                for t in threads:
                    t.start()
                threads[1].join(300)  # the creation, while bombs land and scrapers scrape
                out, _ = scrapers.communicate(timeout=120)
                stop.set()
                threads[0].join(300)
        finally:
            stop.set()
            scrapers.kill()
            ping.close()
        peak = rss_peak(b.pid)
    scrapes, text = map(int, out.split())
    rtts = sorted(pinger.rtts)
    print(f"round trips {len(rtts)}: p99 {pinger.p99() * 1000:.1f} ms, max "
          f"{rtts[-1] * 1000:.1f} ms; bombs refused {len(refused)}; scrapes {scrapes}; "
          f"created {created}; rss +{(peak - before) >> 20} MiB; text {text >> 10} KiB")
    assert created == [0] and refused and set(refused) == {RecordTooLargeError.code}
    assert scrapes >= SCRAPERS
    pinger.check(at_least=200, p99=0.1, most=1.0)
    bound = INFLATION + CREATED * PER_PARTITION + (METRICS_CONNECTIONS + 2) * text
    assert peak - before < bound, ((peak - before) >> 20, bound >> 20)
