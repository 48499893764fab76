"""Broker metrics (docs/metrics.md): a real broker with ``--metrics-port 0``,
a known workload from the real clients, then ``/metrics`` scraped over HTTP
and parsed with prometheus_client's own parser."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from tests.support.fixtures import BrokerProcess, wait_until
from tests.support.metrics_scrape import scrape, value
from logbroker import Consumer, Producer
from logbroker.metrics.exporter import BrokerMetrics
from logbroker.metrics.snapshot import SnapshotCache
from prometheus_client.parser import text_string_to_metric_families

# topic -> (records, value bytes): three topics of known size
WORKLOAD = {"m-a": (100, 100), "m-b": (250, 50), "m-c": (37, 10)}
COMMITTED = 60  # the group's committed offset in m-a


@pytest.fixture
def metrics_broker(tmp_path):
    """A broker serving metrics on a free port: (BrokerProcess, metrics URL)."""
    b = BrokerProcess(tmp_path / "data", "--metrics-port", "0")
    try:
        b.start()
        # printed right after the "listening" line, so usually read with it into the
        # pipe's buffer already (a select on the descriptor would not see it)
        line = b.proc.stdout.readline()
        assert line.startswith("logbroker metrics on http://127.0.0.1:"), line
        yield b, line.split(" on ", 1)[1].strip()
    finally:
        b.kill()


def produce_workload(bootstrap: str) -> dict:
    with Producer(bootstrap, linger_ms=5) as producer:
        for topic, (count, size) in WORKLOAD.items():
            for i in range(count):
                producer.send(topic, bytes([i % 256]) * size, key=b"k%d" % i)
        producer.flush(30)
        stats = producer.metrics()
    return stats


def test_metrics_count_what_was_produced_and_consumed(metrics_broker):
    broker, url = metrics_broker
    sent = produce_workload(broker.bootstrap)
    total = sum(count for count, _ in WORKLOAD.values())
    assert sent["records_sent"] == total and sent["retries"] == 0 and sent["in_flight"] == 0
    with Consumer(broker.bootstrap, group="mg", auto_offset_reset="earliest") as consumer:
        consumer.assign([("m-a", 0)])
        got = []
        wait_until(lambda: got.extend(consumer.poll(0.2)) or len(got) >= 100, 15, "m-a consumed")
        consumer.commit({("m-a", 0): COMMITTED})
        polled = consumer.metrics()
        # records out: counted once the consumer's next fetch moves past them (offset 100)
        wait_until(lambda: not consumer.poll(0.1) and value(
            scrape(url), "logbroker_partition_records_out_total", topic="m-a", partition=0) == 100,
            15, "m-a's 100 records counted out")
    assert polled["records_consumed"] == 100 and polled["lag"] == {("m-a", 0): 0}

    s = scrape(url)
    bytes_in = 0
    for topic, (count, _size) in WORKLOAD.items():
        part = {"topic": topic, "partition": 0}
        assert value(s, "logbroker_partition_records_in_total", **part) == count
        assert value(s, "logbroker_partition_log_end_offset", **part) == count
        assert value(s, "logbroker_partition_high_watermark", **part) == count
        assert value(s, "logbroker_partition_log_start_offset", **part) == 0
        size = value(s, "logbroker_partition_size_bytes", **part)
        assert value(s, "logbroker_partition_bytes_in_total", **part) == size
        bytes_in += size
    assert bytes_in == sent["bytes_sent"]  # what the producer's batches held, byte for byte
    a = {"topic": "m-a", "partition": 0}
    assert value(s, "logbroker_partition_bytes_out_total", **a) \
        >= value(s, "logbroker_partition_size_bytes", **a)
    assert value(s, "logbroker_partition_bytes_out_total", topic="m-b", partition=0) == 0
    assert value(s, "logbroker_partition_records_out_total", **a) == 100
    assert value(s, "logbroker_partition_records_out_total", topic="m-b", partition=0) == 0

    g = {"group": "mg", "topic": "m-a", "partition": 0}
    assert value(s, "logbroker_group_committed_offset", **g) == COMMITTED
    assert value(s, "logbroker_group_lag_records", **g) == 100 - COMMITTED
    assert 0 <= value(s, "logbroker_group_lag_seconds", **g) < 120  # the batch was written just now

    assert value(s, "logbroker_requests_total", request="Produce") >= sent["requests_sent"]
    assert value(s, "logbroker_request_duration_seconds_count", request="Produce") \
        == value(s, "logbroker_requests_total", request="Produce")
    assert value(s, "logbroker_requests_total", request="Fetch") >= 1
    assert value(s, "logbroker_requests_total", request="CommitOffsets") == 1
    assert value(s, "logbroker_fsync_duration_seconds_count") > 0
    assert value(s, "logbroker_group_commit_waiters_sum") >= sent["batches_sent"]
    assert value(s, "logbroker_auth_failures_total") == 0
    assert value(s, "logbroker_scrape_errors_total") == 0
    assert value(s, "logbroker_partitions_offline") == 0
    assert "logbroker_under_replicated_partitions" not in s  # a single node: no cluster gauges


def test_the_journal_counts_its_writes(metrics_broker):
    """A produce over many partitions goes through the write-ahead journal
    (docs/storage.md): its writes and bytes are counted; the partitions'
    own bytes are at most what it wrote (each batch once, plus headers)."""
    broker, url = metrics_broker
    from logbroker import Admin

    with Admin(bootstrap=broker.bootstrap) as admin:
        admin.create_topic("wide", partitions=16)
    assert value(scrape(url), "logbroker_journal_writes_total") == 0
    with Producer(broker.bootstrap, linger_ms=5) as producer:
        handles = [producer.send("wide", b"v" * 50, partition=p) for p in range(16)]
        producer.flush(30)
        assert all(h.result(10).offset == 0 for h in handles)
    s = scrape(url)
    assert value(s, "logbroker_journal_writes_total") >= 1
    stored = sum(value(s, "logbroker_partition_size_bytes", topic="wide", partition=p)
                 for p in range(16))
    assert value(s, "logbroker_journal_bytes_total") >= stored + 16 * 44
    assert value(s, "logbroker_journal_checkpoints_total") in (0, 1)  # one per 2 s of writes


def test_metric_names_follow_prometheus_conventions(metrics_broker):
    broker, url = metrics_broker
    with Producer(broker.bootstrap) as producer:
        producer.send("names", b"x").result(10)
    with Consumer(broker.bootstrap, group="ng") as consumer:
        consumer.assign([("names", 0)])
        consumer.commit({("names", 0): 1})
    families = scrape(url)["__families__"]
    names = {f.name for f in families}
    assert {"logbroker_connections", "logbroker_group_lag_records",
            "logbroker_request_duration_seconds", "logbroker_fsync_duration_seconds"} <= names
    for fam in families:
        assert fam.name.startswith("logbroker_"), fam.name
        assert re.fullmatch(r"[a-z_]+", fam.name), fam.name
        assert fam.documentation, fam.name
        assert not re.search(r"_(ms|milliseconds|kb|mb|count|sum|bucket|total)$", fam.name), fam.name
        if fam.type == "counter":
            assert all(s.name == fam.name + "_total" for s in fam.samples), fam.name
        elif fam.type == "histogram":
            assert {s.name[len(fam.name):] for s in fam.samples} <= {"_bucket", "_count", "_sum"}
        else:
            assert fam.type == "gauge", fam.name
        if "bytes" in fam.name:
            assert fam.name.endswith("_bytes") or fam.name.endswith("_bytes_in") \
                or fam.name.endswith("_bytes_out"), fam.name
        if "duration" in fam.name or "seconds" in fam.name:
            assert fam.name.endswith("_seconds"), fam.name
    assert value(scrape(url), "logbroker_connections") >= 0


def test_label_values_are_escaped(metrics_broker):
    """Group names may hold quotes and backslashes: the text stays parseable
    and the label is the name."""
    broker, url = metrics_broker
    group = 'we"ird\\group'
    with Producer(broker.bootstrap) as producer:
        producer.send("esc", b"x").result(10)
    with Consumer(broker.bootstrap, group=group) as consumer:
        consumer.assign([("esc", 0)])
        consumer.commit({("esc", 0): 1})
    s = scrape(url)
    assert value(s, "logbroker_group_committed_offset", group=group, topic="esc", partition=0) == 1
    assert value(s, "logbroker_group_lag_records", group=group, topic="esc", partition=0) == 0


def test_client_metrics_sync_and_asyncio(broker):
    from logbroker import aio

    with Producer(broker.bootstrap, linger_ms=20) as producer:
        assert producer.metrics()["records_sent"] == 0
        for i in range(500):
            producer.send("cm", b"v%d" % i)
        producer.flush(30)
        stats = producer.metrics()
    assert stats["records_sent"] == 500 and stats["retries"] == 0
    assert stats["in_flight"] == 0 and stats["buffered_bytes"] == 0
    assert 1 <= stats["batches_sent"] <= 500 and stats["requests_sent"] >= 1
    assert stats["batch_size_mean"] == pytest.approx(500 / stats["batches_sent"])

    with Consumer(broker.bootstrap) as consumer:
        consumer.assign([("cm", 0)])
        consumer.seek("cm", 0, 0)
        assert consumer.metrics()["lag"] == {}  # nothing fetched yet: the HW is unknown
        got = consumer.poll(10, max_records=120)
        assert len(got) == 120
        stats = consumer.metrics()
    assert stats["records_consumed"] == 120 and stats["polls"] == 1 and stats["assigned"] == 1
    assert stats["lag"] == {("cm", 0): 380} and stats["lag_total"] == 380

    async def twins():
        async with aio.Producer(broker.bootstrap) as producer:
            await producer.send_and_wait("cm", b"last")
            sent = producer.metrics()
        async with aio.Consumer(broker.bootstrap) as consumer:
            consumer.assign([("cm", 0)])
            consumer.seek("cm", 0, 500)
            records = await consumer.poll(10)
            return sent, records, consumer.metrics()

    sent, records, stats = asyncio.run(twins())
    assert sent["records_sent"] == 1 and sent["batches_sent"] == 1 and sent["batch_size_mean"] == 1
    assert len(records) == 1 and stats["records_consumed"] == 1 and stats["lag"] == {("cm", 0): 0}


def test_a_failing_collection_still_answers_the_scrape():
    """The broker's loop is gone (as during a shutdown): the snapshot of its
    state fails, is logged and counted, and the counters are still answered."""
    loop = asyncio.new_event_loop()
    loop.close()
    metrics = BrokerMetrics(broker=None)
    metrics.broker_loop, metrics.cache = loop, SnapshotCache(None, 5.0)
    metrics.auth_failed()
    started = time.monotonic()
    text = asyncio.run(metrics.scrape(None)).decode()
    assert time.monotonic() - started < 1
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["logbroker_scrape_errors"].samples[0].value == 1
    assert families["logbroker_auth_failures"].samples[0].value == 1
    assert "logbroker_requests" in families and "logbroker_fsync_duration_seconds" in families
    assert "logbroker_partition_log_end_offset" not in families
