"""Consumer end to end: seeks (offset, beginning, end, timestamp), positions,
reset policies, subscriptions, long-poll wake-up, iteration."""

from __future__ import annotations

import threading
import time

import pytest

from logbroker import Admin, Consumer, Producer
from logbroker.errors import OffsetOutOfRangeError
from tests.support.fixtures import FAST, consume, wait_until

SHARE_BROKER = True  # one broker for the module (conftest's broker): every test has topics of its own

T0 = 1_700_000_000_000


def fill(bootstrap, topic, n, partitions=1, step_ms=1000):
    """``n`` records per partition, value ``b"<p>-<i>"``, timestamp T0 + i*step."""
    with Admin(bootstrap, **FAST) as a:
        a.create_topic(topic, partitions=partitions, exist_ok=True)
    with Producer(bootstrap, **FAST) as p:
        for part in range(partitions):
            for i in range(n):
                p.send(topic, b"%d-%d" % (part, i), partition=part, timestamp_ms=T0 + i * step_ms)
        p.flush()


def test_seek_variants(broker):
    fill(broker.bootstrap, "s", 10)
    with Consumer(broker.bootstrap, **FAST) as c:
        c.assign([("s", 0)])
        assert c.position("s", 0) == 10  # latest by default
        c.seek("s", 0, 4)
        assert [r.offset for r in consume(c, 6)] == [4, 5, 6, 7, 8, 9]
        assert c.position("s", 0) == 10
        c.seek_to_beginning()
        assert c.position("s", 0) == 0
        assert consume(c, 10)[0].value == b"0-0"
        c.seek_to_timestamp(T0 + 6500)  # first record at or after it: offset 7
        assert c.position("s", 0) == 7
        assert [r.timestamp for r in consume(c, 3)] == [T0 + 7000, T0 + 8000, T0 + 9000]
        c.seek_to_timestamp(T0 + 60_000)  # later than every record: the end
        assert c.position("s", 0) == 10
        c.seek_to_beginning([("s", 0)])
        c.seek_to_end()
        assert c.position("s", 0) == 10 and c.poll(0.2) == []
        with pytest.raises(ValueError):
            c.seek("other", 0, 1)


def test_seek_inside_a_batch_and_max_records(broker):
    fill(broker.bootstrap, "mid", 100)  # a few batches only
    with Consumer(broker.bootstrap, max_poll_records=7, **FAST) as c:
        c.assign([("mid", 0)])
        c.seek("mid", 0, 42)
        first = c.poll(5)
        assert [r.offset for r in first] == list(range(42, 49))
        assert [r.offset for r in c.poll(5, max_records=3)] == [49, 50, 51]
        assert c.position("mid", 0) == 52


def test_reset_policies(broker):
    fill(broker.bootstrap, "r", 5)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("r", 0)])
        assert [r.offset for r in consume(c, 5)] == [0, 1, 2, 3, 4]
        c.seek("r", 0, 1000)  # past the end: reset to earliest at the next fetch
        assert [r.offset for r in consume(c, 5)] == [0, 1, 2, 3, 4]
    with Consumer(broker.bootstrap, auto_offset_reset="none", **FAST) as c:
        c.assign([("r", 0)])
        with pytest.raises(OffsetOutOfRangeError):
            c.poll(2)
        c.seek("r", 0, 3)
        assert [r.offset for r in consume(c, 2)] == [3, 4]


def test_subscribe_reads_every_partition_and_picks_up_new_topics(broker):
    fill(broker.bootstrap, "multi", 20, partitions=3)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.subscribe(["multi", "later"])
        assert c.assignment() == {("multi", 0), ("multi", 1), ("multi", 2)}
        records = consume(c, 60)
        assert sorted(r.value for r in records) == sorted(b"%d-%d" % (p, i)
                                                          for p in range(3) for i in range(20))
        for p in range(3):  # in offset order within each partition
            offs = [r.offset for r in records if r.partition == p]
            assert offs == sorted(offs)
        fill(broker.bootstrap, "later", 2)
        late = consume(c, 2)
        assert [r.value for r in late] == [b"0-0", b"0-1"] and late[0].topic == "later"


def test_a_blocked_poll_wakes_up_soon_after_a_produce(broker):
    fill(broker.bootstrap, "wake", 1)
    with Consumer(broker.bootstrap, fetch_max_wait_ms=30_000, **FAST) as c, \
            Producer(broker.bootstrap, **FAST) as p:
        c.assign([("wake", 0)])
        assert c.position("wake", 0) == 1
        assert c.poll(0.3) == []  # a 30 s long poll is now in flight
        got, took = [], []

        def reader():
            t = time.monotonic()
            got.extend(c.poll(20))
            took.append(time.monotonic() - t)

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            time.sleep(0.2)  # let the poll block first (not a synchronisation)
            sent = time.monotonic()
            p.send("wake", b"now").result(10)
            thread.join(15)
            assert [r.value for r in got] == [b"now"]
            assert took[0] < 5 and time.monotonic() - sent < 5
        finally:
            thread.join(20)


def test_iteration_stops_after_consumer_timeout(broker):
    fill(broker.bootstrap, "it", 30)
    with Consumer(broker.bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=500,
                  **FAST) as c:
        c.assign([("it", 0)])
        t = time.monotonic()
        values = [r.value for r in c]
        assert values == [b"0-%d" % i for i in range(30)]
        assert time.monotonic() - t < 10


def test_highwater_and_closed_consumer(broker):
    fill(broker.bootstrap, "hw", 3)
    c = Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST)
    c.assign([("hw", 0)])
    assert c.highwater("hw", 0) is None
    consume(c, 3)
    assert c.highwater("hw", 0) == 3
    c.close()
    c.close()
    from logbroker.errors import ClientClosedError

    with pytest.raises(ClientClosedError):
        c.poll(0)


def test_a_full_prefetch_buffer_stops_fetching_until_a_poll_frees_room(broker):
    """The fetch loop starts no session while the prefetch buffer is full: it
    used to start one that ended at once, again and again, a busy loop on
    the I/O thread that held the GIL from the polling thread (one partition
    of 1,000,000 records read ~8x slower). A poll that frees room starts
    fetching again, and every record arrives."""
    values = [b"%06d" % i + b"x" * 1000 for i in range(3000)]  # ~3 MB
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("full", partitions=1)
    with Producer(broker.bootstrap, **FAST) as p:
        for v in values:
            p.send("full", v)
        p.flush()
    with Consumer(broker.bootstrap, prefetch_bytes=256 << 10, max_partition_fetch_bytes=128 << 10,
                  max_poll_records=10, **FAST) as c:
        c.assign([("full", 0)])
        c.seek_to_beginning()
        got = c.poll(5.0)  # starts the fetch loop
        fetcher, buffer = c._core.fetcher, c._core.buffer
        wait_until(lambda: buffer.full, 10, "the prefetch buffer full")
        started = fetcher.sessions_started
        time.sleep(0.3)  # an observation window, not a wait for a condition
        assert fetcher.sessions_started - started <= 1  # at most the one ending on the full buffer
        while len(got) < len(values):
            batch = c.poll(5.0)
            assert batch, f"stalled after {len(got)} records"
            got += batch
        assert [r.value for r in got] == values


def test_a_consumer_asks_about_one_mebibyte_a_fetch_and_gets_every_record(broker):
    """By default a Fetch asks ``fetch_max_bytes`` = 1 MiB (decision 114):
    the first answer over 6 partitions of ~400 KB each holds about 1 MiB,
    not all 2.4 MB, so decoding starts while the broker reads the rest;
    the later fetches bring every record, each exactly once, in order."""
    values = [b"%06d" % i + b"y" * 1000 for i in range(400)]
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("mib", partitions=6)
    with Producer(broker.bootstrap, batch_size=32 << 10, **FAST) as p:
        for q in range(6):
            for v in values:
                p.send("mib", v, partition=q)
        p.flush()
    sizes = []
    with Consumer(broker.bootstrap, **FAST) as c:
        buffer = c._core.buffer
        absorb = buffer.absorb

        def observed(parts, gens, payload, *rest):  # sees each answer's bytes, changes nothing
            sizes.append(sum(len(d) for d in payload))
            return absorb(parts, gens, payload, *rest)
        buffer.absorb = observed
        c.assign([("mib", q) for q in range(6)])
        c.seek_to_beginning()
        got = consume(c, 6 * 400)
    assert {q: [r.value for r in got if r.partition == q] for q in range(6)} == \
        {q: values for q in range(6)}
    assert len(got) == 6 * 400
    assert sizes and max(sizes) <= (1 << 20) + (40 << 10)  # 1 MiB, and the batch that passed it
    assert len([s for s in sizes if s]) >= 3  # 2.4 MB came in several answers


def test_a_consumer_starting_on_many_partitions_distributes_each_once(broker):
    """At its start a consumer knows no leader: it asks for its topics' before
    handing its partitions to the brokers' fetch sessions, so each partition
    is looked at once to start and once more after its records were taken;
    it used to be looked at a third time (first found unrouted, then all
    again once the metadata came)."""
    parts = 40
    with Admin(broker.bootstrap, **FAST) as a:
        a.create_topic("many", partitions=parts)
    with Producer(broker.bootstrap, **FAST) as p:
        for q in range(parts):
            p.send("many", b"v%d" % q, partition=q)
        p.flush()
    with Consumer(broker.bootstrap, **FAST) as c:
        c.assign([("many", q) for q in range(parts)])
        c.seek_to_beginning()
        got = []
        deadline = time.monotonic() + 10
        while len(got) < parts and time.monotonic() < deadline:
            got += c.poll(1.0)
        assert sorted(r.value for r in got) == sorted(b"v%d" % q for q in range(parts))
        assert c._core.fetcher.visits <= 2 * parts + 5, c._core.fetcher.visits
