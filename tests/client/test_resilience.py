"""Failures end to end: unreachable broker, broker restarts (reconnect,
committed offsets survive), corrupted data on disk, closed clients."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.support.fixtures import BrokerProcess
from logbroker import Admin, Consumer, Producer
from logbroker.errors import BrokerUnavailableError, CorruptRecordError, RequestTimedOutError
from logbroker.records import scan_batches
from tests.support.fixtures import FAST, closed_port, consume, wait_until


def test_unreachable_broker_raises_documented_errors_quickly():
    bootstrap = f"127.0.0.1:{closed_port()}"
    t = time.monotonic()
    with Producer(bootstrap, max_block_ms=1000, **FAST) as p:
        with pytest.raises(BrokerUnavailableError, match="unreachable|cannot connect"):
            p.send("t", b"v")
    with Producer(bootstrap, delivery_timeout_ms=1000, **FAST) as p:
        p._core.counts["t"] = 1  # metadata known: the record is queued, then expires
        handle = p.send("t", b"v")
        with pytest.raises(RequestTimedOutError):
            handle.result(10)
    with Consumer(bootstrap, **FAST) as c:
        c.assign([("t", 0)])
        with pytest.raises(BrokerUnavailableError):
            c.poll(1.0)
    with Admin(bootstrap, request_timeout_ms=1000, connect_timeout_ms=500) as a:
        with pytest.raises(BrokerUnavailableError):
            a.list_topics()
    assert time.monotonic() - t < 20


def test_producer_and_consumer_reconnect_after_a_broker_restart(broker):
    with Producer(broker.bootstrap, **FAST) as p, \
            Consumer(broker.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.assign([("rs", 0)])
        for i in range(10):
            p.send("rs", b"a%d" % i)
        p.flush()
        assert len(consume(c, 10)) == 10
        broker.stop()
        broker.start()  # same port, same data
        handles = [p.send("rs", b"b%d" % i) for i in range(10)]
        assert [h.result(30).offset for h in handles] == list(range(10, 20))

        def more():
            try:
                return c.poll(0.5)
            except BrokerUnavailableError:
                return []  # transient while the broker was down: the consumer retries

        records = wait_until(more, 30, "records after the restart")
        records += consume(c, 10 - len(records))
        assert [r.value for r in records] == [b"b%d" % i for i in range(10)]


def test_committed_offsets_survive_a_broker_restart(broker):
    with Producer(broker.bootstrap, **FAST) as p:
        for i in range(20):
            p.send("co", b"%d" % i)
    with Consumer(broker.bootstrap, group="g1", auto_offset_reset="earliest", **FAST) as c:
        c.assign([("co", 0)])
        assert c.committed("co", 0) is None
        assert c.position("co", 0) == 0  # nothing committed: auto_offset_reset
        consume(c, 12, timeout=10)
        c.seek("co", 0, 12)
        c.commit()
        assert c.committed("co", 0) == 12 and c.committed() == {("co", 0): 12}
        c.commit({("co", 0): (15, "manual")})
    broker.stop()
    broker.start()
    with Consumer(broker.bootstrap, group="g1", **FAST) as c:
        c.assign([("co", 0)])
        assert c.committed("co", 0) == 15
        assert [r.value for r in consume(c, 5)] == [b"%d" % i for i in range(15, 20)]
    with Admin(broker.bootstrap, **FAST) as a:
        assert a.fetch_offsets("g1")[("co", 0)][:2] == (15, "manual")


def segment_files(data_dir, topic, partition=0) -> list:
    d = os.path.join(data_dir, f"{topic}-{partition}")
    return sorted(os.path.join(d, f) for f in os.listdir(d) if f.endswith(".log"))


def test_a_corrupted_batch_on_disk_is_detected_and_named(tmp_path):
    b = BrokerProcess(tmp_path / "data")
    try:
        b.start()
        with Producer(b.bootstrap, **FAST) as p:
            for i in range(10):
                p.send("bad", b"value-%d" % i).result(10)  # one batch per record
        b.stop()
        [path] = segment_files(b.data_dir, "bad")
        with open(path, "r+b") as fh:
            data = bytearray(fh.read())
            pos, header = list(scan_batches(bytes(data)))[5]
            data[pos + header.size - 1] ^= 0xFF  # a value byte of offset 5
            fh.seek(0)
            fh.write(data)
        b.start()
        with Consumer(b.bootstrap, auto_offset_reset="earliest", **FAST) as c:
            c.assign([("bad", 0)])
            good = consume(c, 5)
            assert [r.offset for r in good] == [0, 1, 2, 3, 4]
            for _ in range(2):  # raised again and again until the application seeks
                with pytest.raises(CorruptRecordError,
                                   match=r"bad\[0\] offset 5: CRC mismatch.*next readable offset is 6"):
                    consume(c, 1, timeout=10)
            assert c.position("bad", 0) == 5
            c.seek("bad", 0, 6)
            assert [r.value for r in consume(c, 4)] == [b"value-%d" % i for i in range(6, 10)]
    finally:
        b.kill()


def test_requests_time_out_when_the_broker_stops_answering(broker):
    with Admin(broker.bootstrap, request_timeout_ms=800, connect_timeout_ms=800) as a:
        assert a.list_topics() == {}
        os.kill(broker.proc.pid, signal.SIGSTOP)  # the broker hangs, connections stay open
        try:
            t = time.monotonic()
            with pytest.raises((RequestTimedOutError, BrokerUnavailableError)):
                a.list_topics()
            assert time.monotonic() - t < 10
        finally:
            os.kill(broker.proc.pid, signal.SIGCONT)
        wait_until(lambda: _answers(a), 20, "the admin client to recover")


def _answers(admin) -> bool:
    try:
        return admin.list_topics() == {}
    except (RequestTimedOutError, BrokerUnavailableError):
        return False
