"""The broker over raw frames: protocol behaviour, limits, bad input, shutdown."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import struct
import time


from tests.support.fixtures import BrokerProcess, broker_unread_bytes, wait_until
from logbroker.protocol import messages as m
from logbroker.protocol.codec import encode_bytes
from logbroker.records import build_batch, decode_batch, scan_batches
from tests.support.fixtures import RawConn

SHARE_BROKER = True  # one broker for the module (conftest's broker): every test has topics of its own


def produce(topic, *batches, acks=-1, pid=-1, epoch=-1):
    return m.Produce(acks=acks, producer_id=pid, producer_epoch=epoch,
                     parts=tuple((topic, 0, len(b)) for b in batches), payload=batches)


def fetch_values(conn, topic, offset=0):
    resp = conn.call(m.Fetch(max_wait_ms=0, parts=((topic, 0, offset, 1 << 20),)))
    data = bytes(resp.payload[0])
    return [r.value for pos, h in scan_batches(data)
            for r in decode_batch(data[pos:pos + h.size]).records()]


def test_produce_fetch_and_pipelined_order(broker):
    c = RawConn(broker.port)
    assert c.call(m.Handshake()).server.startswith("logbroker")
    cids = [c.send(produce("t", build_batch([b"v%d" % i]))) for i in range(20)]
    got = [c.recv() for _ in cids]
    assert [e.cid for e in got] == cids
    assert [e.message.parts[0][4] for e in got] == list(range(20))
    assert fetch_values(c, "t") == [b"v%d" % i for i in range(20)]


def test_acks_zero_gets_no_response(broker):
    c = RawConn(broker.port)
    c.send(produce("z", build_batch([b"a"]), acks=0))
    cid = c.send(m.ListOffsets(parts=(("z", 0, m.LATEST),)))
    env = c.recv()
    assert env.cid == cid  # the first answer is the second request's
    wait_until(lambda: fetch_values(c, "z") == [b"a"], 10, "the acks=0 record read")


def test_an_acks_zero_produce_with_an_error_closes_the_connection(broker):
    """Nobody hears an acks=0 error: the broker closes the connection, so
    the client refreshes its metadata (Kafka's rule), and keeps what it
    had accepted before."""
    c = RawConn(broker.port)
    c.send(produce("z0", build_batch([b"a"]), acks=0))
    # no error: the connection stays (the record is read once its fsync is done: a
    # loaded machine's fsyncs run in threads, and the Fetch may come before)
    wait_until(lambda: fetch_values(c, "z0") == [b"a"], 10, "the acks=0 record read")
    data = build_batch([b"b"])
    c.send(m.Produce(acks=0, parts=(("z0", 7, len(data)),), payload=(data,)))
    assert c.closed_by_peer(5)  # partition 7 of a 1-partition topic
    assert fetch_values(RawConn(broker.port), "z0") == [b"a"]


def test_bad_crc_is_refused_and_nothing_is_written(broker):
    c = RawConn(broker.port)
    good = build_batch([b"ok"])
    bad = bytearray(build_batch([b"evil"]))
    bad[-1] ^= 1
    resp = c.call(produce("c", good))
    assert resp.parts[0][2] == 0
    resp = c.call(produce("c", bytes(bad)))
    assert resp.parts[0][2] == 2 and "CRC" in resp.parts[0][3]
    assert fetch_values(c, "c") == [b"ok"]


def test_idempotent_retry_is_deduplicated(broker):
    c = RawConn(broker.port)
    pid = c.call(m.InitProducerId()).producer_id
    b0 = build_batch([b"x", b"y"], producer_id=pid, producer_epoch=0, base_sequence=0)
    b1 = build_batch([b"z"], producer_id=pid, producer_epoch=0, base_sequence=2)
    first = c.call(produce("i", b0, pid=pid, epoch=0)).parts[0]
    again = c.call(produce("i", b0, pid=pid, epoch=0)).parts[0]
    assert first[4] == again[4] == 0
    assert c.call(produce("i", b1, pid=pid, epoch=0)).parts[0][4] == 2
    gap = build_batch([b"w"], producer_id=pid, producer_epoch=0, base_sequence=9)
    assert c.call(produce("i", gap, pid=pid, epoch=0)).parts[0][2] == 45
    assert fetch_values(c, "i") == [b"x", b"y", b"z"]


def test_long_poll_wakes_up_on_produce(broker):
    waiter, writer = RawConn(broker.port), RawConn(broker.port)
    writer.call(produce("lp", build_batch([b"first"])))
    cid = waiter.send(m.Fetch(max_wait_ms=20_000, min_bytes=1, parts=(("lp", 0, 1, 1 << 20),)))
    writer.call(produce("lp", build_batch([b"second"])))
    env = waiter.recv(timeout=5)  # far below max_wait: the produce woke it
    assert env.cid == cid and env.message.parts[0][6] > 0


def test_unknown_api_and_bad_fields_get_errors_and_the_connection_lives(broker):
    import msgpack

    c = RawConn(broker.port)
    header = msgpack.packb({"api": 99, "cid": 5, "resp": False, "v": 1, "body": {}})
    c.send_raw(struct.pack(">II", 4 + len(header), len(header)) + header)
    env = c.recv()
    assert env.cid == 5 and env.message.error == 42
    header = msgpack.packb({"api": 6, "cid": 6, "resp": False, "v": 1, "body": {"parts": "x"}})
    c.send_raw(struct.pack(">II", 4 + len(header), len(header)) + header)
    env = c.recv()
    assert env.cid == 6 and env.message.error == 42 and "max_wait_ms" in env.message.message
    assert c.call(m.Handshake()).error == 0


def test_garbage_and_oversize_frames_close_only_that_connection(broker):
    rng = random.Random(7)
    for i in range(30):
        c = RawConn(broker.port)
        if i % 3 == 0:
            c.send_raw(struct.pack(">I", 1 << 30) + b"\0" * 8)  # oversize
        elif i % 3 == 1:
            c.send_raw(struct.pack(">II", 40, 36) + os.urandom(36))  # garbage header
        else:
            frame = bytearray(encode_bytes(m.Handshake(), 1))
            for _ in range(3):
                frame[rng.randrange(4, len(frame))] = rng.randrange(256)
            c.send_raw(bytes(frame))
        try:
            env = c.recv(timeout=10)
        except (TimeoutError, OSError):
            env = None
        assert env is None or env.message.error != 0 or env.cid == 1
        c.close()
    assert broker.alive()
    assert RawConn(broker.port).call(m.Handshake()).error == 0


def test_slow_loris_is_cut_off(tmp_path):
    with BrokerProcess(tmp_path / "d", config={"frame_timeout_ms": 300}) as b:
        slow = RawConn(b.port)
        slow.send_raw(struct.pack(">I", 100) + b"\0\0")  # a frame that never completes
        fine = RawConn(b.port)
        assert fine.call(m.Handshake()).error == 0
        assert slow.closed_by_peer(timeout=10)
        assert fine.call(m.Handshake()).error == 0


def test_max_connections(tmp_path):
    with BrokerProcess(tmp_path / "d", config={"max_connections": 2}) as b:
        first, second = RawConn(b.port), RawConn(b.port)
        assert first.call(m.Handshake()).error == 0 and second.call(m.Handshake()).error == 0
        third = RawConn(b.port)  # answered TOO_MANY_CONNECTIONS, then closed (admission.py)
        assert third.call(m.Handshake()).error == 1002
        assert third.closed_by_peer(timeout=10)
        second.close()
        assert first.call(m.Handshake()).error == 0


def test_auto_create_can_be_disabled(tmp_path):
    with BrokerProcess(tmp_path / "d", config={"auto_create_topics": False}) as b:
        c = RawConn(b.port)
        assert c.call(produce("nope", build_batch([b"a"]))).parts[0][2] == 3
        assert c.call(m.CreateTopics(topics=(("yes", 2, {"segment_bytes": 4096}),))).topics[0][1] == 0
        assert c.call(m.CreateTopics(topics=(("bad", 1, {"nonsense": 1}),))).topics[0][1] == 40
        assert c.call(produce("yes", build_batch([b"a"]))).parts[0][2] == 0


def test_sigterm_is_a_clean_shutdown(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    c = RawConn(b.port)
    c.call(produce("s", build_batch([b"kept"])))
    assert b.stop() == 0
    assert os.path.exists(tmp_path / "d" / ".clean_shutdown")
    b.start()
    assert fetch_values(RawConn(b.port), "s") == [b"kept"]
    b.kill()


def test_more_sigterms_while_it_stops_still_end_in_a_clean_exit(tmp_path):
    """A supervisor may signal again while the broker stops: SIGTERM after
    SIGTERM until it is gone (every 2 ms, through the loop's close and the
    interpreter's exit) leaves exit status 0 and the clean-shutdown marker,
    never death by the signal's default action."""
    b = BrokerProcess(tmp_path / "d").start()
    c = RawConn(b.port)
    c.call(produce("s", build_batch([b"kept"])))
    c.close()
    proc, deadline = b.proc, time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(0.002)
        except subprocess.TimeoutExpired:
            pass
    assert b.stop() == 0
    assert os.path.exists(tmp_path / "d" / ".clean_shutdown")


def test_shutdown_answers_requests_in_flight_then_closes(tmp_path):
    """SIGTERM: the broker stops reading (pause), answers what it read
    (drain: a long poll in flight ends at its max_wait), then closes."""
    b = BrokerProcess(tmp_path / "d", config={"shutdown_timeout_ms": 10_000}).start()
    c = RawConn(b.port)
    c.call(produce("sd", build_batch([b"a"])))
    cid = c.send(m.Fetch(max_wait_ms=1_500, min_bytes=1 << 20, parts=(("sd", 0, 1, 1 << 20),)))
    wait_until(lambda: broker_unread_bytes(b, c) == 0, what="the fetch read by the broker")
    started = time.monotonic()
    b.proc.send_signal(signal.SIGTERM)
    env = c.recv(timeout=10)
    assert env is not None and env.cid == cid and env.message.error == 0
    assert c.closed_by_peer(timeout=10)
    assert b.stop() == 0 and time.monotonic() - started < 8
