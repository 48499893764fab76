"""A Fetch at EARLIEST (-2) or LATEST (-1) reads from where ListOffsets
would put it and says so (``resolved``; decision 111; docs/protocol.md
§5.3): a consumer starting at either end needs no ListOffsets first. Such a
fetch answers at once; in a fetch session the part is held from the
resolved offset on, so records written after the answer are the next
fetch's."""

from __future__ import annotations

from tests.support.fixtures import RawConn
from logbroker.protocol import messages as m
from logbroker.protocol.partition_messages import DeleteRecords, RecordsCut
from logbroker.records import build_batch

SHARE_BROKER = True
EARLIEST, LATEST = -2, -1


def _produce(c: RawConn, topic: str, values: list) -> int:
    data = build_batch(values)
    part = c.call(m.Produce(acks=-1, parts=((topic, 0, len(data)),), payload=(data,))).parts[0]
    assert part.error == 0, part
    return part.base_offset


def _fetch(c: RawConn, topic: str, offset: int, **kw) -> m.FetchResponse:
    kw = {"max_wait_ms": 0, "min_bytes": 0, **kw}
    return c.call(m.Fetch(parts=((topic, 0, offset, 1 << 20),), **kw))


def test_earliest_and_latest_read_from_the_log_start_and_the_high_watermark(broker):
    c = RawConn(broker.port)
    assert c.call(m.CreateTopics(topics=(("ends", 1, {}),))).topics[0][1] == 0
    _produce(c, "ends", [b"a"])
    _produce(c, "ends", [b"b", b"c"])
    cut = c.call(DeleteRecords(parts=(RecordsCut("ends", 0, 1),)))
    assert [(p.error, p.low_watermark) for p in cut.parts] == [(0, 1)]
    first = _fetch(c, "ends", EARLIEST)
    [(_, _, error, _msg, hw, log_start, nbytes)] = first.parts
    assert (error, hw, log_start) == (0, 3, 1) and nbytes > 0
    assert first.resolved == (("ends", 0, 1),)  # where it read: the consumer's position
    assert bytes(first.payload[0]) == bytes(_fetch(c, "ends", 1).payload[0])
    # a long poll that resolved a part answers at once, saying where it would read
    last = _fetch(c, "ends", LATEST, max_wait_ms=60_000, min_bytes=1)
    assert [(p.error, p.high_watermark, p.nbytes) for p in last.parts] == [(0, 3, 0)]
    assert last.resolved == (("ends", 0, 3),)
    assert _fetch(c, "ends", 2).resolved == ()
    bad = _fetch(c, "ends", -3)
    assert bad.parts[0].error != 0 and "offset -3" in bad.parts[0].message
    c.close()


def test_a_session_holds_a_latest_part_from_the_high_watermark_it_resolved(broker):
    c = RawConn(broker.port)
    assert c.call(m.CreateTopics(topics=(("tail", 1, {}),))).topics[0][1] == 0
    _produce(c, "tail", [b"old"])
    opened = _fetch(c, "tail", LATEST, session_epoch=0)
    assert [(p.error, p.high_watermark, p.nbytes) for p in opened.parts] == [(0, 1, 0)]
    assert opened.resolved == (("tail", 0, 1),)
    assert _produce(c, "tail", [b"new", b"newer"]) == 1
    nxt = c.call(m.Fetch(max_wait_ms=0, min_bytes=0, session_epoch=1))  # names nothing
    assert [(p.error, p.high_watermark) for p in nxt.parts] == [(0, 3)] and nxt.parts[0].nbytes > 0
    assert bytes(nxt.payload[0]) == bytes(_fetch(c, "tail", 1).payload[0])  # from 1, not 3
    c.close()
