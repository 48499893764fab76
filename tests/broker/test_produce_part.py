"""A produce part is checked whole before any of it is written (docs/broker.md):
a bad batch anywhere in a part refuses the part, and the log end does not move."""

from __future__ import annotations

import pytest

from tests.support.fixtures import RawConn
from logbroker.errors import (CorruptRecordError, OutOfOrderSequenceError,
                              UnknownTopicOrPartitionError)
from logbroker.protocol import messages as m
from logbroker.records import build_batch


def part(topic: str, data: bytes, pid: int = -1) -> m.Produce:
    return m.Produce(acks=-1, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                     parts=((topic, 0, len(data)),), payload=(data,))


def log_end(conn: RawConn, topic: str) -> int:
    """The log end, as the offset the broker gives a plain probe batch (minus
    the probe): the HW alone would hide an unacknowledged write."""
    return conn.call(part(topic, build_batch([b"probe"]))).parts[0][4]


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_part_with_a_bad_second_batch_writes_nothing(broker, idempotent):
    c = RawConn(broker.port)
    pid = c.call(m.InitProducerId()).producer_id if idempotent else -1
    kw = dict(producer_id=pid, producer_epoch=0) if idempotent else {}
    topic = f"p{int(idempotent)}"
    assert c.call(part(topic, build_batch([b"seed"], **kw, **({"base_sequence": 0} if idempotent else {})),
                       pid)).parts[0][2] == 0
    good = build_batch([b"a"], **kw, **({"base_sequence": 1} if idempotent else {}))
    bad = bytearray(build_batch([b"b"], **kw, **({"base_sequence": 2} if idempotent else {})))
    bad[-1] ^= 0xFF
    resp = c.call(part(topic, good + bytes(bad), pid)).parts[0]
    assert resp[2] == CorruptRecordError.code, resp
    assert log_end(c, topic) == 1  # the probe landed at 1: nothing of the part was written
    if idempotent:  # a sequence gap in the second batch refuses the first one too
        gap = build_batch([b"c"], **kw, base_sequence=7)
        resp = c.call(part(topic, good + gap, pid)).parts[0]
        assert resp[2] == OutOfOrderSequenceError.code, resp
        assert log_end(c, topic) == 2
        # and the good batch alone is still accepted at its sequence
        assert c.call(part(topic, good, pid)).parts[0][2:5] == (0, "", 3)


def test_batches_behind_a_refused_one_wait_for_its_retry_on_the_connection(broker):
    """Decision 110: a producer pipelines a partition's batches from its
    first. Batch 0 of a producer the leader does not know is refused
    (UNKNOWN_TOPIC_OR_PARTITION: the partition does not exist yet); the
    partition appears; batch 1, already sent behind it on the connection,
    is refused too, so the retried batch 0 lands first and both in order.
    The retry lifts the fence; another producer's batches pass it."""
    from logbroker.protocol.partition_messages import CreatePartitions, PartitionsIncrease

    UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code

    c = RawConn(broker.port)
    assert c.call(m.CreateTopics(topics=(("late", 1, {}),))).topics[0][1] == 0
    pid = c.call(m.InitProducerId()).producer_id

    def send(seq: int, values: list, partition: int = 1, producer: int = pid):
        data = build_batch(values, producer_id=producer, producer_epoch=0, base_sequence=seq)
        resp = c.call(m.Produce(acks=-1, producer_id=producer, producer_epoch=0,
                                parts=(("late", partition, len(data)),), payload=(data,)))
        return resp.parts[0]

    first = send(0, [b"a", b"b"])
    assert first.error == UNKNOWN_TOPIC_OR_PARTITION
    grown = c.call(CreatePartitions(topics=(PartitionsIncrease("late", 2, ()),)))
    assert grown.topics[0][1] == 0, grown
    behind = send(2, [b"c"])  # sent before the client heard of the refusal
    assert behind.error == UNKNOWN_TOPIC_OR_PARTITION and "send again in order" in behind.message
    assert send(3, [b"d"]).error == UNKNOWN_TOPIC_OR_PARTITION  # and the one behind it
    retried = send(0, [b"a", b"b"])
    assert (retried.error, retried.base_offset) == (0, 0)
    assert [(p.error, p.base_offset) for p in (send(2, [b"c"]), send(3, [b"d"]))] == [(0, 2), (0, 3)]
    # another producer's batches pass the fence, and do not lift it
    assert send(5, [b"e"], partition=2).error == UNKNOWN_TOPIC_OR_PARTITION
    grown = c.call(CreatePartitions(topics=(PartitionsIncrease("late", 3, ()),)))
    assert grown.topics[0][1] == 0, grown
    other = c.call(m.InitProducerId()).producer_id
    assert (send(0, [b"y"], partition=2, producer=other).error,) == (0,)
    assert send(6, [b"f"], partition=2).error == UNKNOWN_TOPIC_OR_PARTITION
    assert [send(seq, [v], partition=2).base_offset for seq, v in ((5, b"e"), (6, b"f"))] == [1, 2]
    c.close()
