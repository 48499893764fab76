"""What the broker tells an operator (issue 9): offline partitions shown as
offline with their reason, the start-up line of a fresh data dir, no
traceback when a client leaves mid-sendfile, unknown groups said so."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest

from tests.support.fixtures import FAST, BrokerProcess, RawConn, cli_error, cli_ok, run_cli
from logbroker import Admin
from logbroker.errors import GroupNotFoundError, InvalidGroupError
from logbroker.protocol import messages as m
from logbroker.protocol.codec import encode_bytes
from logbroker.records import build_batch


def produce(conn: RawConn, topic: str, payload: bytes) -> None:
    resp = conn.call(m.Produce(parts=((topic, 0, len(payload)),), payload=(payload,)))
    assert resp.parts[0][2] == 0, resp


def clean_log(broker: BrokerProcess) -> str:
    text = broker.log()
    assert "Traceback" not in text and "never retrieved" not in text, text[-3000:]
    return text


# -- offline partitions ------------------------------------------------------------------------
@pytest.fixture
def offline_broker(tmp_path):
    """A broker whose topic ``t`` partition 0 is offline (a sealed, flushed
    segment shrank under it) while ``t`` partition 1 and ``ok`` serve."""
    b = BrokerProcess(tmp_path / "d").start()
    c = RawConn(b.port)
    assert c.call(m.CreateTopics(topics=(("t", 2, {"segment_bytes": 1024}), ("ok", 1, {})))).topics \
        == (("t", 0, ""), ("ok", 0, ""))
    for i in range(20):
        produce(c, "t", build_batch([b"y%02d" % i * 20]))
    produce(c, "ok", build_batch([b"fine"]))
    c.close()
    assert b.stop() == 0
    sealed = sorted(Path(tmp_path / "d" / "t-0").glob("*.log"))[0]
    with open(sealed, "r+b") as fh:
        fh.truncate(os.path.getsize(sealed) - 10)
    try:
        yield b.start(), sealed.name
    finally:
        b.kill()


def test_describe_topics_shows_an_offline_partition_with_its_reason(offline_broker):
    b, segment = offline_broker
    c = RawConn(b.port)
    (topic,) = c.call(m.DescribeTopics(topics=("t",))).topics
    assert topic[:3] == ("t", 0, "")
    p0, p1 = topic[4]
    assert p0[0] == 0 and p0[6] == 57 and segment in p0[7] and "byte" in p0[7], p0
    assert p1[0] == 1 and p1[6:] == (0, "")
    assert c.call(m.DescribeTopics(topics=("ok",))).topics[0][4][0][6:] == (0, "")
    with Admin(bootstrap=b.bootstrap, **FAST) as admin:
        parts = admin.describe_topics(["t"])["t"].partitions
    assert parts[0].error == 57 and segment in parts[0].message and parts[1].error == 0
    out = cli_ok(run_cli("topics", "describe", "t", bootstrap=b.bootstrap))
    rows = [r for r in map(str.split, out.splitlines()) if r[:1] == ["t"] and len(r) == 8]
    assert [(r[1], r[-1]) for r in rows] == [("0", "offline"), ("1", "online")], out
    assert f"t-0 offline: {parts[0].message}" in out
    clean_log(b)


# -- the start-up line -----------------------------------------------------------------------
def test_start_up_line_says_fresh_clean_or_not(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    first = clean_log(b)
    assert "fresh data dir" in first and "clean_start" not in first
    assert b.stop() == 0
    b.start()
    assert "clean_start=True" in b.log()[len(first):]
    b.kill()
    before = len(b.log())
    b.start()
    assert "clean_start=False" in b.log()[before:]
    b.kill()


# -- a client leaving during a sendfile -------------------------------------------------------------
def test_client_gone_during_sendfile_leaves_no_traceback(tmp_path):
    b = BrokerProcess(tmp_path / "d").start()
    c = RawConn(b.port)
    big = build_batch([os.urandom(1 << 20)])
    for _ in range(12):
        produce(c, "big", big)
    fetch = encode_bytes(m.Fetch(max_wait_ms=0, max_bytes=64 << 20, parts=(("big", 0, 0, 64 << 20),)), 1)
    for _ in range(20):
        s = socket.create_connection(("127.0.0.1", b.port), timeout=10)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.sendall(fetch)
        assert s.recv(64)  # the response has begun
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST
        s.close()
    assert c.call(m.Handshake()).error == 0
    c.close()
    assert b.stop() == 0  # a clean shutdown, and every task's end is logged by now
    clean_log(b)


# -- unknown groups -------------------------------------------------------------------------------
def test_describe_of_an_unknown_group_says_so(broker):
    c = RawConn(broker.port)
    assert c.call(m.CommitOffsets(group="known", offsets=(("t", 0, 0, ""),))).parts[0][2] == 3
    produce(c, "t", build_batch([b"a"]))
    assert c.call(m.CommitOffsets(group="known", offsets=(("t", 0, 1, ""),))).parts[0][2] == 0
    groups = c.call(m.DescribeGroups(groups=("known", "nope", ""))).groups
    assert groups[0][:3] == ("known", 0, "") and groups[0][3][0][:4] == ("t", 0, 1, 1)
    assert groups[1][:2] == ("nope", GroupNotFoundError.code) and "unknown group 'nope'" in groups[1][2]
    assert groups[2][:2] == ("", InvalidGroupError.code) and groups[2][3] == ()
    with Admin(bootstrap=broker.bootstrap, **FAST) as admin:
        with pytest.raises(GroupNotFoundError, match="unknown group 'nope'"):
            admin.describe_groups(["nope"])
        assert admin.describe_groups(["known"])["known"].partitions[0].lag == 0
    message = cli_error(run_cli("groups", "describe", "nope", bootstrap=broker.bootstrap),
                        "GROUP_ID_NOT_FOUND")
    assert "unknown group 'nope'" in message
