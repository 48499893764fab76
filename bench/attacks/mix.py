"""The attacks of docs/security.md's threat model, run at once against one
broker process while another client measures its round trips.

``attack(b, bombs=..., create=..., scrapers=..., seconds=...)`` against a
started ``BrokerProcess`` ``b`` with ``b.kafka`` and ``b.metrics_url`` set
(tests/support/kafka_raw.kafka_and_metrics): for ``seconds`` (or until the
creation is done, whichever is later; bounded by ``LIMIT_S``),

- ``bombs``: one Kafka connection produces requests of 8 zstd batches of
  255 MiB each (64 KB on the wire), one after another, to topic ``bomb``;
- ``create``: one CreateTopics of that many partitions (topic ``wide``) on
  our listener;
- ``scrapers``: that many threads scraping ``/metrics`` in a loop, in a
  process of their own (their own GIL);

while a pinger sends a Handshake on a connection of its own every 5 ms.
Returns the round trips (count, p50, p99, max in ms), the bombs' answers,
the creation's error code and seconds, the scrapes done and the smallest
text, and the broker's peak resident memory growth (VmHWM) in bytes.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

from logbroker.kafka.record_batch import KafkaRecord, build_batch
from logbroker.protocol import messages as m
from tests.support.bombs import MiB, ZSTD, Pinger, bomb, rss_peak
from tests.support.fixtures import RawConn
from tests.support.kafka_raw import Raw
from tests.support.metrics_scrape import SCRAPER

LIMIT_S = 300.0  # no attack runs longer
MAX_BOMBS = 200  # requests, at most


def _produce(raw: Raw, cid: int, records: bytes) -> int:
    raw.sock.sendall(raw.send(0, 8, cid, {"transactional_id": None, "acks": 1,
                                          "timeout_ms": 30_000, "topic_data": [
                                              {"name": "bomb", "partition_data": [
                                                  {"index": 0, "records": records}]}]}))
    return raw.recv(0, 8)[1].responses[0].partition_responses[0].error_code


def attack(b, *, bombs: bool = False, create: int = 0, scrapers: int = 0,
           seconds: float = 10.0) -> dict:
    ping = RawConn(b.port, timeout=LIMIT_S)
    stop, answers, created = threading.Event(), [], {}
    with contextlib.closing(Raw(b.kafka)) as attacker:
        if bombs:  # the topic exists first: the bombs hit a real log
            assert _produce(attacker, 1, build_batch([KafkaRecord(0, 0, None, b"x")])) == 0

        # built before the pinger starts: compressing 255 MiB holds this process's GIL
        # for ~1.5 s, which the pinger's thread would count as a round trip of the broker's
        payload = bomb(ZSTD, 255 * MiB) * 8 if bombs else b""

        def bombing() -> None:
            cid = 2
            while not stop.is_set() and cid < MAX_BOMBS:
                answers.append(_produce(attacker, cid, payload))
                cid += 1

        def creating() -> None:
            conn = RawConn(b.port, timeout=LIMIT_S)
            try:
                t = time.perf_counter()
                got = conn.call(m.CreateTopics(topics=(("wide", create, {}),)), timeout=LIMIT_S)
                created.update(error=got.topics[0].error, seconds=time.perf_counter() - t)
            finally:
                conn.close()

        bomber = threading.Thread(target=bombing) if bombs else None
        creator = threading.Thread(target=creating) if create else None
        threads = [t for t in (bomber, creator) if t is not None]
        before = rss_peak(b.pid)
        child = subprocess.Popen([sys.executable, "-c", SCRAPER, b.metrics_url, str(scrapers),
                                  str(seconds)], stdout=subprocess.PIPE, text=True) \
            if scrapers else None
        try:
            with Pinger(lambda: ping.call(m.Handshake(), timeout=LIMIT_S), every=0.005) as pinger:
                for t in threads:
                    t.start()
                stop.wait(seconds)  # the attack's length: the pinger measures meanwhile
                if creator is not None:
                    creator.join(LIMIT_S)
                out = child.communicate(timeout=LIMIT_S)[0] if child is not None else "0 0"
                stop.set()
                for t in threads:
                    t.join(LIMIT_S)
        finally:
            stop.set()
            if child is not None:
                child.kill()
            ping.close()
        grown = rss_peak(b.pid) - before
    scrapes, text = map(int, out.split())
    rtts = sorted(pinger.rtts)
    return {"round_trips": len(rtts), "p50_ms": 1000 * rtts[len(rtts) // 2],
            "p99_ms": 1000 * pinger.p99(), "max_ms": 1000 * rtts[-1], "bombs": answers,
            "created": created, "scrapes": scrapes, "text_bytes": text, "rss_grown": grown}
