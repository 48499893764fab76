"""Fetch sessions (api/fetch_session.py, Kafka's KIP-227 kept on the
connection), over our protocol on a real broker: after the opening fetch a
request names only what changed and is answered only about partitions with
news; the epoch guards the exchange; a partition that fails leaves the
session; forgotten partitions are not answered about; a deleted topic is
found by the sweep."""

from __future__ import annotations

import time

import pytest

from logbroker.errors import InvalidFetchSessionEpochError, UnknownTopicOrPartitionError
from logbroker.protocol import messages as m
from logbroker.records import build_batch
from tests.support.fixtures import RawConn

SHARE_BROKER = True


def _topic(conn: RawConn, name: str, partitions: int) -> None:
    resp = conn.call(m.CreateTopics(topics=((name, partitions, {}),)))
    assert resp.topics[0][1] == 0, resp


def _produce(conn: RawConn, topic: str, partition: int, values) -> None:
    batch = build_batch(list(values))
    resp = conn.call(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                               parts=((topic, partition, len(batch)),), payload=(batch,)))
    assert resp.parts[0][2] == 0, resp


def _fetch(epoch: int, parts=(), forget=(), wait_ms: int = 0) -> m.Fetch:
    return m.Fetch(max_wait_ms=wait_ms, max_bytes=1 << 20, session_epoch=epoch,
                   parts=tuple(parts), forget=tuple(forget))


def _names(resp) -> list:
    return [(p.topic, p.partition) for p in resp.parts]


def test_after_the_opening_fetch_only_partitions_with_news_are_answered(broker):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-news", 4)
    for q in range(4):
        _produce(admin, "fs-news", q, [b"a%d" % q])
    opened = conn.call(_fetch(0, [("fs-news", q, 0, 1 << 20) for q in range(4)]))
    assert opened.session_epoch == 0
    assert _names(opened) == [("fs-news", q) for q in range(4)]
    assert all(p.nbytes > 0 for p in opened.parts)
    # the client names the partitions it got bytes for at their new offsets
    t0 = time.monotonic()
    quiet = conn.call(_fetch(1, [("fs-news", q, 1, 1 << 20) for q in range(4)], wait_ms=300))
    assert quiet.session_epoch == 1 and quiet.parts == ()
    assert time.monotonic() - t0 >= 0.25  # a long poll: nothing changed
    # one partition gets a record while the next fetch (naming nothing) waits
    cid = conn.send(_fetch(2, wait_ms=10_000))
    _produce(admin, "fs-news", 2, [b"b2"])
    env = conn.recv(10)
    assert env.cid == cid and env.message.session_epoch == 2
    assert _names(env.message) == [("fs-news", 2)]
    assert env.message.parts[0].high_watermark == 2 and env.message.parts[0].nbytes > 0
    # and the same offsets again: nothing new, nothing answered
    again = conn.call(_fetch(3, [("fs-news", 2, 2, 1 << 20)], wait_ms=100))
    assert again.parts == () and again.session_epoch == 3


def test_a_seek_back_names_the_partition_again_and_gets_its_records_again(broker):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-seek", 1)
    _produce(admin, "fs-seek", 0, [b"x", b"y"])
    first = conn.call(_fetch(0, [("fs-seek", 0, 0, 1 << 20)]))
    again = conn.call(_fetch(1, [("fs-seek", 0, 0, 1 << 20)], wait_ms=5000))
    assert _names(again) == [("fs-seek", 0)]
    assert bytes(again.payload[0]) == bytes(first.payload[0])


def test_the_epoch_guards_the_session(broker):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-epoch", 1)
    code = InvalidFetchSessionEpochError.code
    assert conn.call(_fetch(1)).error == code  # none open on this connection
    conn.call(_fetch(0, [("fs-epoch", 0, 0, 1 << 20)]))
    assert conn.call(_fetch(5)).error == code  # not the session's epoch
    other = RawConn(broker.port)  # a session belongs to its connection
    assert other.call(_fetch(1)).error == code
    assert conn.call(_fetch(1)).error == 0  # the refusals changed nothing
    assert conn.call(_fetch(0, [("fs-epoch", 0, 0, 1 << 20)])).session_epoch == 0  # reopened
    assert conn.call(_fetch(2)).error == code
    assert conn.call(_fetch(1)).session_epoch == 1


def test_forgotten_and_failed_partitions_leave_the_session(broker):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-leave", 2)
    opened = conn.call(_fetch(0, [("fs-leave", 0, 0, 1 << 20), ("fs-leave", 1, 0, 1 << 20),
                                  ("fs-leave", 7, 0, 1 << 20)]))
    assert [p.error for p in opened.parts] == [0, 0, UnknownTopicOrPartitionError.code]
    conn.call(_fetch(1, forget=[("fs-leave", 0)]))
    _produce(admin, "fs-leave", 0, [b"not for us"])
    _produce(admin, "fs-leave", 1, [b"for us"])
    resp = conn.call(_fetch(2, wait_ms=5000))
    assert _names(resp) == [("fs-leave", 1)]  # not the forgotten one, nor the failed one


def test_a_deleted_topic_is_answered_within_a_sweep(broker):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-gone", 1)
    conn.call(_fetch(0, [("fs-gone", 0, 0, 1 << 20)]))
    assert admin.call(m.DeleteTopics(topics=("fs-gone",))).topics[0][1] == 0
    epoch, deadline = 1, time.monotonic() + 10
    while True:  # each long poll ends within 0.5 s; the sweep runs at most every second
        resp = conn.call(_fetch(epoch, wait_ms=500))
        epoch += 1
        if resp.parts or time.monotonic() > deadline:
            break
    assert [(p.topic, p.error) for p in resp.parts] == [("fs-gone",
                                                         UnknownTopicOrPartitionError.code)]
    quiet = conn.call(_fetch(epoch, wait_ms=0))  # it left the session
    assert quiet.parts == () and quiet.error == 0


@pytest.mark.parametrize("isolation", [0, 1])
def test_an_opening_fetch_answers_like_one_without_a_session(broker, isolation):
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    topic = f"fs-same-{isolation}"
    _topic(admin, topic, 3)
    for q in range(3):
        _produce(admin, topic, q, [b"v%d" % i for i in range(q + 1)])
    parts = tuple((topic, q, 0, 1 << 20) for q in range(3))
    plain = conn.call(m.Fetch(max_wait_ms=0, max_bytes=1 << 20, parts=parts, isolation=isolation))
    opened = conn.call(m.Fetch(max_wait_ms=0, max_bytes=1 << 20, parts=parts,
                               isolation=isolation, session_epoch=0))
    assert plain.session_epoch == -1 and opened.session_epoch == 0
    assert opened.parts == plain.parts and opened.txn == plain.txn
    assert [bytes(p) for p in opened.payload] == [bytes(p) for p in plain.payload]


@pytest.mark.parametrize("isolation", [0, 1])
def test_a_session_fetch_stops_where_its_bytes_are_spent_and_the_rest_follow(broker, isolation):
    """The opening fetch of 6 partitions with room for about two answers the
    partitions it reached only; each later fetch, naming nothing, goes on
    with the ones not reached, first in line: every partition's records
    come exactly once, in the order asked."""
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    topic = f"fs-budget-{isolation}"
    _topic(admin, topic, 6)
    for q in range(6):
        _produce(admin, topic, q, [b"%d" % q * 200])
    one = len(build_batch([b"0" * 200]))
    fetch = dict(max_wait_ms=0, max_bytes=2 * one, isolation=isolation)
    opened = conn.call(m.Fetch(session_epoch=0, parts=tuple((topic, q, 0, 1 << 20)
                                                            for q in range(6)), **fetch))
    assert _names(opened) == [(topic, 0), (topic, 1)]
    got = [(p.partition, bytes(d)) for p, d in zip(opened.parts, opened.payload)]
    epoch = 1
    while len(got) < 6 and epoch < 10:
        # the client names the partitions it got bytes for at their next offsets
        named = tuple((topic, p.partition, 1, 1 << 20) for p in opened.parts)
        opened = conn.call(m.Fetch(session_epoch=epoch, parts=named, **fetch))
        got += [(p.partition, bytes(d)) for p, d in zip(opened.parts, opened.payload) if p.nbytes]
        epoch += 1
    assert [q for q, _ in got] == list(range(6))
    assert all(b"%d" % q * 200 in data for q, data in got)
    quiet = conn.call(m.Fetch(session_epoch=epoch, **{**fetch, "max_wait_ms": 100}))
    assert quiet.parts == ()  # all read: nothing more to say


def test_a_session_fetch_answers_once_its_max_bytes_are_there(broker):
    """min_bytes above max_bytes: the answer comes once max_bytes are read
    (all it may hold), not after the long poll."""
    admin, conn = RawConn(broker.port), RawConn(broker.port)
    _topic(admin, "fs-full", 3)
    for q in range(3):
        _produce(admin, "fs-full", q, [b"z" * 500])
    t0 = time.monotonic()
    resp = conn.call(m.Fetch(max_wait_ms=20_000, min_bytes=1 << 20, max_bytes=600,
                             session_epoch=0,
                             parts=tuple(("fs-full", q, 0, 1 << 20) for q in range(3))), 30)
    assert time.monotonic() - t0 < 10  # not the 20 s long poll
    assert _names(resp) == [("fs-full", 0), ("fs-full", 1)] and resp.parts[0].nbytes > 0
