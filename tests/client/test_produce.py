"""Producer end to end against a real broker: round trip, partitioning, acks,
idempotence fields, retries without duplicates, broker errors."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections import defaultdict

import pytest

from logbroker import Admin, Consumer, Producer
from logbroker.client import partition_for_key
from logbroker.client.net.link import BrokerLink, ClientOptions
from logbroker.client.net.connection import BrokerConnection
from logbroker.errors import (BrokerUnavailableError, ClientClosedError, RecordTooLargeError,
                              RequestTimedOutError, UnknownTopicOrPartitionError)
from logbroker.protocol import messages as m
from logbroker.records import scan_batches
from tests.support.fixtures import FAST, consume

SHARE_BROKER = True  # one broker for the module (conftest's broker): every test has topics of its own


def read_all(bootstrap, topic, partitions, n):
    with Consumer(bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([(topic, p) for p in range(partitions)])
        return consume(c, n)


def batch_headers(port, topic, partition=0) -> list:
    """Headers of every batch of a partition, fetched with a raw Fetch."""
    async def fetch():
        link = BrokerLink(ClientOptions(bootstrap=(("127.0.0.1", port),)))
        try:
            resp = await link.call(m.Fetch(max_wait_ms=0, parts=((topic, partition, 0, 1 << 24),)))
        finally:
            await link.aclose()
        data = bytes(resp.payload[0])
        return [h for _, h in scan_batches(data)]

    return asyncio.run(fetch())


def test_round_trip_keys_values_headers_timestamps(broker):
    with Producer(broker.bootstrap, **FAST) as p:
        handles = [p.send("rt", b"v%d" % i, key=b"k%d" % i if i % 2 else None,
                          headers=[("n", b"%d" % i)] if i % 3 == 0 else None,
                          timestamp_ms=1_700_000_000_000 + i) for i in range(50)]
        handles.append(p.send("rt", None, key=b"tombstone"))
        metas = [h.result(10) for h in handles]
    assert [md.offset for md in metas] == list(range(51))
    assert all(md.topic == "rt" and md.partition == 0 for md in metas)
    assert metas[3].timestamp == 1_700_000_000_003
    records = read_all(broker.bootstrap, "rt", 1, 51)
    assert [r.offset for r in records] == list(range(51))
    for i, r in enumerate(records[:50]):
        assert r.value == b"v%d" % i and r.timestamp == 1_700_000_000_000 + i
        assert r.key == (b"k%d" % i if i % 2 else None)
        assert r.headers == ((("n", b"%d" % i),) if i % 3 == 0 else ())
    assert records[50].value is None and records[50].key == b"tombstone"


def test_keyed_records_go_to_their_hash_partition_unkeyed_round_robin(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("keyed", partitions=4)
    with Producer(broker.bootstrap, **FAST) as p:
        keyed = [p.send("keyed", b"x", key=b"user-%d" % (i % 10)) for i in range(200)]
        unkeyed = [p.send("keyed", b"y") for _ in range(100)]
        p.flush()
        for i, h in enumerate(keyed):
            assert h.result().partition == partition_for_key(b"user-%d" % (i % 10), 4)
        counts = defaultdict(int)
        for h in unkeyed:
            counts[h.result().partition] += 1
        assert dict(counts) == {0: 25, 1: 25, 2: 25, 3: 25}
        assert p.send("keyed", b"z", partition=3).result(10).partition == 3
        with pytest.raises(UnknownTopicOrPartitionError):
            p.send("keyed", b"z", partition=4)
    by_key = defaultdict(set)
    for r in read_all(broker.bootstrap, "keyed", 4, 301):
        if r.key is not None:
            by_key[r.key].add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values()) and len(by_key) == 10


@pytest.mark.parametrize("acks", ["all", 1, 0])
def test_every_acks_level_delivers(broker, acks):
    topic = f"acks-{acks}"
    with Producer(broker.bootstrap, acks=acks, **FAST) as p:
        handles = [p.send(topic, b"%d" % i) for i in range(100)]
        p.flush()
        offsets = [h.result(10).offset for h in handles]
    assert offsets == ([-1] * 100 if acks == 0 else list(range(100)))
    assert [r.value for r in read_all(broker.bootstrap, topic, 1, 100)] == [b"%d" % i
                                                                         for i in range(100)]


def test_idempotent_batches_carry_producer_id_and_running_sequences(broker):
    with Producer(broker.bootstrap, batch_size=2000, **FAST) as p:
        for i in range(300):
            p.send("seq", b"x" * 50)
        p.flush()
    headers = batch_headers(broker.port, "seq")
    assert len(headers) > 5
    assert len({h.producer_id for h in headers}) == 1 and headers[0].producer_id >= 0
    expected = 0
    for h in headers:
        assert h.base_sequence == expected
        expected += h.record_count
    assert expected == 300


def test_linger_collects_records_into_one_batch(broker):
    with Producer(broker.bootstrap, linger_ms=200, **FAST) as p:
        p.send("linger", b"first").result(10)
        handles = [p.send("linger", b"%d" % i) for i in range(50)]
        assert handles[-1].result(10).offset == 50
    assert [h.record_count for h in batch_headers(broker.port, "linger")] == [1, 50]


def test_lost_connections_are_retried_without_duplicates(broker, monkeypatch):
    """Every 3rd produce request loses its connection right after being
    written: the broker usually appended it but the answer is lost, so the
    retry is a duplicate the broker must recognise (idempotence)."""
    cuts, produced = [], []
    send = BrokerConnection.request_cb

    def flaky(self, message, timeout, callback):
        send(self, message, timeout, callback)
        if isinstance(message, m.Produce):
            produced.append(1)
            if len(produced) % 3 == 0 and len(cuts) < 15:
                cuts.append(1)
                self.close(BrokerUnavailableError("cut by the test"))

    monkeypatch.setattr(BrokerConnection, "request_cb", flaky)
    n = 20_000
    with Producer(broker.bootstrap, batch_size=2_000, retry_backoff_ms=5, **FAST) as p:
        handles = [p.send("dedup", b"%d" % i) for i in range(n)]
        p.flush()
        offsets = [h.result(10).offset for h in handles]
    assert len(cuts) == 15
    assert offsets == list(range(n))
    values = [r.value for r in read_all(broker.bootstrap, "dedup", 1, n)]
    assert values == [b"%d" % i for i in range(n)]


def test_broker_refusals_reach_the_handle(broker):
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("small", configs={"max_batch_bytes": 1024})
    with Producer(broker.bootstrap, **FAST) as p:
        big = p.send("small", b"x" * 5000)
        with pytest.raises(RecordTooLargeError, match=r"small\[0\]"):
            big.result(10)
        assert p.send("small", b"ok").result(10).offset == 0  # the producer goes on


def test_send_argument_errors_and_closed_producer(broker):
    p = Producer(broker.bootstrap, **FAST)
    with pytest.raises(TypeError):
        p.send("t", "text is not bytes")
    with pytest.raises(TypeError):
        p.send("t", b"v", key=5)
    with pytest.raises(TypeError):
        p.send(7, b"v")
    assert p.send("t", bytearray(b"ba"), key=memoryview(b"mv")).result(10).offset == 0
    p.close()
    p.close()  # idempotent
    with pytest.raises(ClientClosedError):
        p.send("t", b"v")


def test_a_full_buffer_blocks_send_then_times_out(broker):
    with Producer(broker.bootstrap, batch_size=2_000, buffer_memory=10_000, max_block_ms=500,
                  **FAST) as p:
        handles = [p.send("bp", b"x" * 100) for _ in range(2_000)]  # waits for space
        assert handles[-1].result(10).offset == 1_999
        os.kill(broker.proc.pid, signal.SIGSTOP)  # nothing is acknowledged any more
        try:
            t = time.monotonic()
            with pytest.raises(RequestTimedOutError, match="buffer_memory"):
                for _ in range(1_000):
                    handles.append(p.send("bp", b"y" * 100))
            assert time.monotonic() - t < 5
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        p.flush(30)
    assert all(h.exception() is None for h in handles)
    assert handles[-1].result().offset == len(handles) - 1  # in order, no duplicates


def test_a_producer_starting_on_many_existing_topics_lists_them_once(broker):
    """The first send to each of 60 existing topics needs its partition
    count: one listing of every topic answers them all (it took one
    Metadata round trip per topic); a topic the listing lacks is still
    asked for, and auto-created."""
    names = [f"many-{i:02d}" for i in range(60)]
    with Admin(broker.bootstrap, **FAST) as admin:
        admin.create_topics([(name, 2) for name in names])
    with Producer(broker.bootstrap, linger_ms=5) as p:
        handles = [p.send(name, b"v", key=name.encode()) for name in names]
        assert all(h.result(10).offset == 0 for h in handles)
        asked = p._core.router.metadata_requests
        assert asked <= 3, asked
        assert p.send("many-new", b"v").result(10).offset == 0  # not listed: asked for, created
        assert p.partitions_for("many-00") == 2 and p.partitions_for("many-new") == 1
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([(name, p) for name in names for p in (0, 1)])
        got = []
        for _ in range(100):
            got += c.poll(0.2)
            if len(got) >= 60:
                break
    assert sorted(r.topic for r in got) == names


def test_waiting_for_a_record_sends_its_open_batch_without_waiting_out_the_linger(broker):
    """A caller blocked on ``result()`` (or awaiting the handle) wants the
    record now: its open batch is sealed and sent, not held for linger_ms."""
    from logbroker import aio

    with Producer(broker.bootstrap, linger_ms=30_000) as p:
        p.partitions_for("hurry")  # the topic exists: the send below is a plain append
        first = p.send("hurry", b"a")
        second = p.send("hurry", b"b")
        start = time.monotonic()
        assert second.result(timeout=5).offset == 1 and first.result(timeout=1).offset == 0
        assert time.monotonic() - start < 3

    async def aio_case():
        async with aio.Producer(broker.bootstrap, linger_ms=30_000) as ap:
            await ap.partitions_for("hurry")
            handle = await ap.send("hurry", b"c")
            return await asyncio.wait_for(handle, 5)

    assert asyncio.run(aio_case()).offset == 2
