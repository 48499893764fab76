"""A Fetch over many partitions: every slice arrives whole and in order,
whether the socket takes it at once (sendfile straight to the socket) or
fills up midway (the rest waits for the reader), and requests pipelined
behind it are answered after it."""

from __future__ import annotations

import socket
import time

from tests.support.fixtures import RawConn
from logbroker.protocol import messages as m
from logbroker.records import build_batch, decode_batch, scan_batches

TOPICS = [f"s{i:03d}" for i in range(120)]
VALUE = 6000  # 120 x 15 x 6 KB = 10.8 MB: more than the socket buffers hold


def _fill(conn: RawConn) -> dict:
    """Three batches in each topic; returns the values per topic."""
    sent = {}
    for t in TOPICS:
        batches = [build_batch([b"%s-%d-%d" % (t.encode(), b, i) + bytes(VALUE) for i in range(5)])
                   for b in range(3)]
        resp = conn.call(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                                   parts=tuple((t, 0, len(b)) for b in batches), payload=batches))
        assert all(p[2] == 0 for p in resp.parts), resp
        sent[t] = [r for b in batches for r in decode_batch(b).records()]
    return {t: [r.value for r in recs] for t, recs in sent.items()}


def _values(resp) -> dict:
    out = {}
    for part, data in zip(resp.parts, resp.payload):
        assert part[2] == 0, part
        data = bytes(data)
        out[part[0]] = [r.value for pos, h in scan_batches(data)
                        for r in decode_batch(data[pos:pos + h.size]).records()]
    return out


def _fetch_all() -> m.Fetch:
    return m.Fetch(max_wait_ms=0, max_bytes=64 << 20, parts=tuple((t, 0, 0, 1 << 20) for t in TOPICS))


def test_one_fetch_of_many_small_slices_sends_every_byte_in_order(broker):
    conn = RawConn(broker.port)
    expected = _fill(conn)
    conn.send(_fetch_all())
    conn.send(m.Handshake())  # pipelined: answered after the fetch's last slice
    first, second = conn.recv(), conn.recv()
    assert first.cid < second.cid and isinstance(second.message, m.HandshakeResponse)
    assert _values(first.message) == expected


def test_a_reader_slower_than_the_socket_gets_the_same_bytes(broker):
    """A small receive buffer and a reader that starts late: the broker's
    socket fills in the middle of a slice and the rest is sent as the reader
    drains it."""
    conn = RawConn(broker.port)
    expected = _fill(conn)
    slow = RawConn(broker.port)
    slow.sock.close()
    slow.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    slow.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.sock.connect(("127.0.0.1", broker.port))
    slow.sock.settimeout(10)
    slow.send(_fetch_all())
    slow.send(m.Handshake())
    time.sleep(0.3)  # the broker's writes run into a full socket meanwhile
    first = slow.recv()
    assert _values(first.message) == expected
    assert isinstance(slow.recv().message, m.HandshakeResponse)
    assert conn.call(m.Handshake()).error == 0  # the broker serves others meanwhile and after


class _Transport:
    def __init__(self, sock) -> None:
        self.sock = sock

    def get_extra_info(self, name):
        return self.sock if name == "socket" else None


def test_an_answer_of_many_slices_is_corked_then_uncorked():
    """net/sendfile.cork: set on a TCP socket while its slices go, cleared
    after (else the next answer waits up to 200 ms); nothing on a socket it
    does not apply to, or one already closed."""
    from logbroker.net.sendfile import cork

    server = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(server.getsockname())
    peer, _ = server.accept()
    try:
        t = _Transport(peer)
        assert cork(t, True) and peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 1
        assert cork(t, False) and peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_CORK) == 0
        a, b = socket.socketpair()
        assert not cork(_Transport(a), True) and not cork(_Transport(None), True)
        a.close(), b.close()
        peer.close()
        assert not cork(t, False)
    finally:
        for s in (client, peer, server):
            s.close()
