"""A produce part is checked whole before any of it is written (docs/broker.md):
a bad batch anywhere in a part refuses the part, and the log end does not move."""

from __future__ import annotations

import pytest

from tests.support.fixtures import RawConn
from logbroker.errors import CorruptRecordError, OutOfOrderSequenceError
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
