"""How the broker answers pipelined requests on one connection: a produce is
appended in the loop turn that read it and answered from its fsync's
callback (no task), other requests run as tasks; either way requests start
in the order read and are answered in that order."""

from __future__ import annotations

from tests.support.fixtures import RawConn
from logbroker.protocol import messages as m
from logbroker.protocol.codec import encode_bytes
from logbroker.records import build_batch

SHARE_BROKER = True  # one broker for the module (conftest's broker): every test has topics of its own


def produce(topic, partition, value, acks=-1):
    batch = build_batch([value])
    return m.Produce(acks=acks, parts=((topic, partition, len(batch)),), payload=(batch,))


def test_requests_in_one_read_start_and_are_answered_in_order(broker):
    """CreateTopics (a task) before a Produce (no task) in the same bytes:
    the produce must see the topic the create made (2 partitions), not
    auto-create it with 1; a long poll in the middle holds back the answers
    behind it but not the appends."""
    c = RawConn(broker.port)
    msgs = [m.CreateTopics(topics=(("ord", 2, {}),)),
            produce("ord", 1, b"a"),
            m.Fetch(max_wait_ms=300, min_bytes=1 << 20, parts=(("ord", 0, 0, 1 << 20),)),
            produce("ord", 1, b"b"),
            m.ListOffsets(parts=(("ord", 1, m.LATEST),)),
            produce("ord", 1, b"c", acks=1)]
    c.send_raw(b"".join(encode_bytes(msg, cid) for cid, msg in enumerate(msgs, 1)))
    got = [c.recv() for _ in msgs]
    assert [e.cid for e in got] == [1, 2, 3, 4, 5, 6]
    create, first, poll, second, latest, third = (e.message for e in got)
    assert create.topics[0][1] == 0, create
    assert first.parts[0][2:5] == (0, "", 0)
    assert poll.parts[0][2] == 0 and poll.parts[0][4] == 0  # partition 0 stayed empty
    assert second.parts[0][2:5] == (0, "", 1)
    assert latest.parts[0][2] == 0
    assert third.parts[0][2:5] == (0, "", 2)


def test_many_pipelined_durable_produces_share_fsyncs_and_stay_in_order(broker):
    c = RawConn(broker.port)
    c.call(m.CreateTopics(topics=(("many", 1, {}),)))
    n = 200
    c.send_raw(b"".join(encode_bytes(produce("many", 0, b"v%d" % i), i + 1) for i in range(n)))
    got = [c.recv() for _ in range(n)]
    assert [e.cid for e in got] == list(range(1, n + 1))
    assert [e.message.parts[0][4] for e in got] == list(range(n))
    assert all(e.message.parts[0][2] == 0 for e in got)


def test_a_refused_produce_is_answered_in_its_place(broker):
    c = RawConn(broker.port)
    bad = m.Produce(acks=7, parts=(("x", 0, 1),), payload=(b"z",))
    msgs = [produce("ok", 0, b"a"), bad, produce("ok", 0, b"b"),
            produce("__consumer_offsets", 0, b"c")]
    c.send_raw(b"".join(encode_bytes(msg, cid) for cid, msg in enumerate(msgs, 1)))
    got = [c.recv() for _ in msgs]
    assert [e.cid for e in got] == [1, 2, 3, 4]
    assert got[0].message.parts[0][4] == 0 and got[2].message.parts[0][4] == 1
    assert got[1].message.error == 42 and "acks" in got[1].message.message
    assert got[3].message.error == 17  # INVALID_TOPIC: clients never write the offsets topic
