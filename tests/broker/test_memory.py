"""The broker's memory per connection (issue 9): frame memory follows the bytes
that arrived, never a length a peer announced; ``frame_timeout_ms`` runs from
a frame's first byte; idle connections are cheap and their memory comes back."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from tests.support.fixtures import BrokerProcess, RawConn, broker_rss, raise_nofile, wait_until
from logbroker.protocol import messages as m
from logbroker.protocol.codec import encode_bytes
from logbroker.records import build_batch

CONNECTIONS = 1024
RSS_LIMIT = 200 << 20
MAX_FRAME = 64 << 20


def _hold(broker: BrokerProcess, normal: RawConn, prefix: bytes, count: int) -> list:
    """``count`` connections that each sent ``prefix`` and nothing more; checks
    the broker's RSS and that it answers ``normal`` after every 128."""
    held = []
    for i in range(count):
        s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
        s.sendall(prefix)
        held.append(s)
        if (i + 1) % 64 == 0:
            assert normal.call(m.Handshake(), timeout=10).error == 0
            assert broker_rss(broker) < RSS_LIMIT, f"{broker_rss(broker) >> 20} MiB after {i + 1}"
    return held


@pytest.mark.parametrize("prefix", [b"\x00\x00", struct.pack(">I", MAX_FRAME - 1)],
                         ids=["incomplete-header", "length-just-under-the-limit"])
def test_1024_stalled_frames_stay_under_200_mib(tmp_path, prefix):
    raise_nofile(CONNECTIONS + 256)
    cfg = {"max_connections": CONNECTIONS + 16, "max_frame_bytes": MAX_FRAME}
    with BrokerProcess(tmp_path / "d", config=cfg) as b:
        normal = RawConn(b.port)
        baseline = broker_rss(b)
        held = _hold(b, normal, prefix, CONNECTIONS)
        payload = build_batch([b"still serving"])
        resp = normal.call(m.Produce(parts=(("t", 0, len(payload)),), payload=(payload,)))
        assert resp.parts[0][2] == 0
        rss = broker_rss(b)
        assert rss < RSS_LIMIT and rss - baseline < 64 << 20, (baseline >> 20, rss >> 20)
        for s in held:
            s.close()
        # the broker has read every EOF and run every connection_lost once two
        # round trips on another connection came back (one loop turn each); each
        # EOF read had a 256 KiB chunk (asyncio asks for a buffer first), which
        # stayed with the connection until a GC pass found it: +256 MiB
        for _ in range(3):
            assert normal.call(m.Handshake()).error == 0
        closed_rss = broker_rss(b)
        # freed memory leaves RSS at the broker's next malloc trim (its 1 s sweep,
        # once 64 connections closed); memory still held never does (+256 MiB)
        wait_until(lambda: broker_rss(b) - baseline < 16 << 20, timeout=35,
                   what=f"RSS back after close (baseline {baseline >> 20} MiB, "
                        f"{closed_rss >> 20} MiB once the closes were read)")
        assert normal.call(m.Handshake()).error == 0


def test_frame_timeout_runs_from_the_prefix_of_a_big_frame(tmp_path):
    """A client that announces a big frame and sends nothing more is cut off
    after frame_timeout_ms (it used to wait for idle_timeout_ms)."""
    with BrokerProcess(tmp_path / "d", config={"frame_timeout_ms": 300}) as b:
        stalled = RawConn(b.port)
        stalled.send_raw(struct.pack(">I", 8 << 20))
        fine = RawConn(b.port)
        assert fine.call(m.Handshake()).error == 0
        assert stalled.closed_by_peer(timeout=10)
        assert "frame_timeout_ms" in b.log()


def test_a_steady_stream_of_split_frames_is_not_timed_out(tmp_path):
    """Every read ending inside a frame is normal for a busy producer: the
    timeout is per frame, not for as long as some frame is incomplete."""
    with BrokerProcess(tmp_path / "d", config={"frame_timeout_ms": 300}) as b:
        c = RawConn(b.port)
        frames = [encode_bytes(m.ListGroups(), cid) for cid in range(1, 31)]
        half = len(frames[0]) // 2
        c.send_raw(frames[0][:half])
        for i, frame in enumerate(frames):  # each send ends inside the next frame
            time.sleep(0.05)  # pacing, not a sync point: 30 x 50 ms is well past frame_timeout_ms
            c.send_raw(frame[half:] + (frames[i + 1][:half] if i + 1 < len(frames) else b""))
            env = c.recv(timeout=5)
            assert env is not None and env.cid == i + 1, f"closed at frame {i + 1}: {b.log()[-300:]}"
