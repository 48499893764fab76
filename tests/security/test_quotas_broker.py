"""Quotas and connection limits against real broker processes on 127.0.0.1
(docs/security.md, "Quotas and limits"): a throttled producer gets every
record acknowledged, slowed to its rate, on one connection; a throttled
consumer reads everything once and in order; a SCRAM user's override is
its own rate; per-address and total connection limits are answered with
TOO_MANY_CONNECTIONS (1002), which the client raises as
``TooManyConnectionsError``; the metrics count both. The pure logic:
test_quotas.py. Waits are bounded; times are asserted as lower bounds."""

from __future__ import annotations

import socket
import time

import pytest
from tests.support.fixtures import BrokerProcess, RawConn, consume, invoke_cli, invoked_ok, wait_until
from tests.support.tls import tls_files
from tests.support.metrics_scrape import scrape, value

from logbroker import Admin, Consumer, Producer
from logbroker.security.quotas import BURST_S
from logbroker.errors import TooManyConnectionsError
from logbroker.protocol import messages as m
from logbroker.protocol.codec import FrameReader, decode, encode_bytes

RATE = 200_000  # bytes/s: every principal's produce and fetch quota
ALICE_FETCH = 50_000  # alice's own fetch rate (and no produce quota)
PASSWORD = "quota-Pa55word"
REQUEST = 32 << 10  # the producers' max_request_size: the last request's throttle is not waited
FAST = dict(request_timeout_ms=5_000, connect_timeout_ms=2_000)


def start(tmp, *extra: str, toml: str) -> BrokerProcess:
    """A broker with ``toml`` as its config file and metrics on (``metrics_url``)."""
    path = tmp / "broker.toml"
    path.write_text(toml)
    b = BrokerProcess(tmp / "data", "--config", str(path), "--metrics-port", "0", *extra).start()
    b.metrics_url = b.proc.stdout.readline().split(" on ", 1)[1].strip()
    return b


@pytest.fixture(scope="module")
def qb(tmp_path_factory):
    b = start(tmp_path_factory.mktemp("quotas"), toml=(
        f"quota_produce_bytes_per_s = {RATE}\nquota_fetch_bytes_per_s = {RATE}\n\n"
        f'[quotas."User:alice"]\nproduce_bytes_per_s = 0\nfetch_bytes_per_s = {ALICE_FETCH}\n'))
    try:
        invoked_ok(invoke_cli(["users", "add", "alice", "--user-password-stdin"],
                              stdin=PASSWORD + "\n", bootstrap=b.bootstrap))
        yield b
    finally:
        b.kill()


def alice(b) -> dict:
    return {"bootstrap": b.bootstrap, "username": "alice", "password": PASSWORD}


def handshakes(b) -> float:
    """Connections opened so far (each client connection starts with a Handshake)."""
    return value(scrape(b.metrics_url), "logbroker_requests_total", request="Handshake")


def fill(b, topic: str, count: int, size: int) -> list[bytes]:
    """``count`` records of ``size`` bytes, produced fast (alice: no produce quota)."""
    values = [b"%06d" % i + b"v" * (size - 6) for i in range(count)]
    with Producer(**alice(b), linger_ms=5, batch_size=16 << 10) as p:
        for v in values:
            p.send(topic, v)
        p.flush()
    return values


def test_a_throttled_producer_gets_everything_acknowledged(qb):
    before = handshakes(qb)
    with Producer(qb.bootstrap, batch_size=16 << 10, max_request_size=REQUEST, **FAST) as p:
        started = time.monotonic()
        handles = [p.send("q-produce", b"%06d" % i + b"x" * 994) for i in range(600)]
        p.flush()
        elapsed = time.monotonic() - started
        stats = p.metrics()
    assert [h.result(0).offset for h in handles] == list(range(600))
    assert stats["produce_throttle_time_ms_max"] > 0 and stats["produce_throttle_time_ms_avg"] > 0
    assert stats["retries"] == 0  # a throttle is neither an error nor a retry
    # ~600 kB at 200 kB/s: one burst free, the last request's throttle not waited for
    assert elapsed >= (stats["bytes_sent"] - RATE * BURST_S - REQUEST) / RATE * 0.9
    assert handshakes(qb) - before <= 2  # its bootstrap and leader connections: never reopened
    samples = scrape(qb.metrics_url)
    assert value(samples, "logbroker_quota_throttle_seconds_total", kind="produce") > 0.5


def test_a_user_override_is_its_own_rate(qb):
    """Runs before any other anonymous fetch: anonymous's burst is whole."""
    values = fill(qb, "q-alice", 75, 2000)  # 150 kB: within anonymous's burst, 3 s of alice's
    with Consumer(qb.bootstrap, auto_offset_reset="earliest", **FAST) as anonymous:
        anonymous.assign([("q-alice", 0)])
        assert [r.value for r in consume(anonymous, 75)] == values
        assert anonymous.metrics()["fetch_throttle_time_ms_max"] == 0
    started = time.monotonic()
    with Consumer(**alice(qb), auto_offset_reset="earliest", **FAST) as c:
        c.assign([("q-alice", 0)])
        assert [r.value for r in consume(c, 75)] == values
        assert c.metrics()["fetch_throttle_time_ms_max"] >= 500
    # one burst free, and the last answer's throttle is not waited for
    assert time.monotonic() - started >= (150_000 - 2 * ALICE_FETCH * BURST_S) / ALICE_FETCH * 0.9


def test_a_fetch_throttled_consumer_reads_everything_once_in_order(qb):
    values = fill(qb, "q-fetch", 300, 2000)  # 600 kB
    started = time.monotonic()
    with Consumer(qb.bootstrap, auto_offset_reset="earliest", **FAST) as c:
        c.subscribe(["q-fetch"])
        got = consume(c, len(values), timeout=20)
        elapsed = time.monotonic() - started
        stats = c.metrics()
    assert [r.value for r in got] == values and [r.offset for r in got] == list(range(300))
    assert stats["fetch_throttle_time_ms_max"] > 0 and stats["lag_total"] == 0
    assert elapsed >= (len(values) * 2000 - 2 * RATE * BURST_S) / RATE * 0.9
    assert value(scrape(qb.metrics_url), "logbroker_quota_throttle_seconds_total",
                 kind="fetch") > 0.5


def test_a_fetch_over_quota_is_answered_empty_at_once(qb):
    """A connection's mute holds its own next fetch until the debt is paid;
    another connection of the same principal, fetching meanwhile, is
    answered at once with no data and the time left."""
    fill(qb, "q-raw", 150, 2000)  # 300 kB in batches of 16 KiB
    first, second = RawConn(qb.port), RawConn(qb.port)
    fetch = m.Fetch(max_wait_ms=0, parts=(("q-raw", 0, 0, 1 << 20),))
    for _ in range(10):
        got = first.call(fetch)
        assert got.parts[0][6] <= RATE * BURST_S  # capped to one burst of the quota
        if got.throttle_ms and got.parts[0][6]:
            break
    else:
        raise AssertionError("no fetch answer carried a throttle")
    empty = second.call(fetch)
    assert empty.parts == (("q-raw", 0, 0, "", -1, -1, 0),) and empty.payload == (b"",)
    assert 0 < empty.throttle_ms <= got.throttle_ms


# -- connection limits ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lb(tmp_path_factory):
    b = start(tmp_path_factory.mktemp("limits"), "--max-connections-per-ip", "2", toml=(
        "max_connections = 3\nframe_timeout_ms = 1000\n\n"
        '[max_connections_per_ip_overrides]\n"127.0.0.3" = 0\n'))
    yield b
    b.kill()


def connect(b, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", b.port), timeout=10,
                                    source_address=(source, 0))


def answer(sock: socket.socket, msg) -> "tuple":
    """Send ``msg``; (the answer's envelope, whether EOF followed it)."""
    sock.sendall(encode_bytes(msg, 77))
    reader, env = FrameReader(), None
    while True:
        data = sock.recv(1 << 16)
        if not data:
            return env, True
        reader.receive_data(data)
        frame = reader.next_frame()
        if frame is not None:
            env = decode(frame)
            sock.settimeout(5)


def idle(b) -> None:
    """Wait until the broker counts no client connection (closed ones are gone)."""
    wait_until(lambda: value(scrape(b.metrics_url), "logbroker_connections") == 0,
               what="the broker's connections closed")


def test_a_refused_connection_gets_1002_then_eof(lb):
    idle(lb)
    held = [RawConn(lb.port) for _ in range(2)]
    assert all(c.call(m.Handshake()).error == 0 for c in held)
    with connect(lb) as third:
        env, eof = answer(third, m.Handshake())
    assert env.cid == 77 and env.message.error == 1002 and eof
    assert "too many connections from 127.0.0.1: its limit is 2 (max_connections_per_ip)" \
        in env.message.message
    with connect(lb) as fourth:  # a produce first: answered from its header, with its class
        env, eof = answer(fourth, m.Produce(acks=1, parts=(("t", 0, 3),), payload=(b"abc",)))
    assert env.message.__class__ is m.ProduceResponse and env.message.error == 1002 and eof
    held[0].close()
    wait_until(lambda: RawConn(lb.port).call(m.Handshake()).error == 0,
               what="a connection accepted again")


def test_the_client_raises_too_many_connections(lb):
    idle(lb)
    held = [RawConn(lb.port) for _ in range(2)]
    assert all(c.call(m.Handshake()).error == 0 for c in held)
    with pytest.raises(TooManyConnectionsError) as info:
        with Admin(lb.bootstrap, request_timeout_ms=1500, connect_timeout_ms=1000) as admin:
            admin.list_topics()
    assert info.value.code == 1002 and info.value.retriable
    assert "its limit is 2 (max_connections_per_ip)" in info.value.message
    for c in held:
        c.close()
    idle(lb)
    with Admin(lb.bootstrap, **FAST) as admin:
        admin.list_topics()


def test_max_connections_and_an_override(lb):
    idle(lb)
    held = [connect(lb, "127.0.0.1"), connect(lb, "127.0.0.2"), connect(lb, "127.0.0.2")]
    for s in held:
        env, _ = answer_open(s)
        assert env.message.error == 0
    with connect(lb, "127.0.0.4") as extra:
        env, eof = answer(extra, m.Metadata())
    assert env.message.__class__ is m.MetadataResponse and eof
    assert env.message.error == 1002 and "max_connections 3" in env.message.message
    held.pop().close()
    idle_below = lambda: value(scrape(lb.metrics_url), "logbroker_connections") < 3  # noqa: E731
    wait_until(idle_below, what="one connection closed")
    with connect(lb, "127.0.0.3") as banned:  # its override is 0
        env, _ = answer(banned, m.Handshake())
    assert env.message.error == 1002 and "(max_connections_per_ip_overrides)" in env.message.message
    with connect(lb, "127.0.0.4") as fine:
        assert answer_open(fine)[0].message.error == 0
    for s in held:
        s.close()
    samples = scrape(lb.metrics_url)
    assert value(samples, "logbroker_connections_refused_total", reason="max_connections") >= 1
    assert value(samples, "logbroker_connections_refused_total", reason="per_ip") >= 2


def answer_open(sock: socket.socket):
    """A Handshake on an admitted connection: (its answer, False)."""
    sock.sendall(encode_bytes(m.Handshake(), 5))
    reader = FrameReader()
    while (frame := reader.next_frame()) is None:
        data = sock.recv(1 << 16)
        assert data, "closed by the broker"
        reader.receive_data(data)
    return decode(frame), False


def test_a_tls_listener_answers_1002_after_the_handshake(tmp_path):
    ca_pem, cert, key = tls_files(tmp_path)
    b = start(tmp_path, "--tls-cert", str(cert), "--tls-key", str(key),
              toml="max_connections_per_ip = 1\nframe_timeout_ms = 1000\n")
    try:
        with Admin(b.bootstrap, tls_ca=str(ca_pem), **FAST) as first:
            first.list_topics()  # holds the address's one connection
            with pytest.raises(TooManyConnectionsError) as info:
                with Admin(b.bootstrap, tls_ca=str(ca_pem), connect_timeout_ms=1000,
                           request_timeout_ms=1000) as second:
                    second.list_topics()
            assert "its limit is 1 (max_connections_per_ip)" in info.value.message
            first.list_topics()  # the first connection is untouched
        wait_until(lambda: value(scrape(b.metrics_url), "logbroker_connections") == 0,
                   what="the broker's connections closed")
        with Admin(b.bootstrap, tls_ca=str(ca_pem), **FAST) as again:
            again.list_topics()
    finally:
        b.kill()
