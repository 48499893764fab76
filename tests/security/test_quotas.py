"""Quotas and connection limits as pure logic (docs/security.md, "Quotas
and limits"): the per-principal byte-rate accounting with an injected
clock, what a Produce or Fetch costs and how its answer carries the
throttle, the connection counts and the refusal's answer fed bytes whole
and byte by byte, the client's throttle bookkeeping, and the settings'
checks. The same behaviour against real brokers: test_quotas_broker.py."""

from __future__ import annotations

import asyncio

import pytest

from logbroker.net.admission import (HEAD_MAX, MAX_CONNECTIONS, MAX_REFUSING, PER_IP,
                                        Admission, Refusal)
from logbroker.broker.config import BrokerConfig
from logbroker.security.quotas import (ACCOUNT, ANONYMOUS, BURST_S, MAX_THROTTLE_S, ByteRate,
                                     Quotas, principal_of)
from logbroker.client.net.throttle import Throttles
from logbroker.errors import InvalidConfigError, TooManyConnectionsError
from logbroker.protocol import messages as m
from logbroker.protocol.parts import FetchedPart, FetchPart, ProducePart
from logbroker.protocol.codec import FrameReader, decode, encode_bytes

RATE = 1000  # bytes per second


# -- byte rates ------------------------------------------------------------------------------
def test_a_burst_passes_then_the_rate_holds():
    r = ByteRate("produce", RATE)
    assert r.record("User:a", RATE * BURST_S, now=100.0) == 0  # an idle principal's burst
    assert r.record("User:a", 500, now=100.0) == 500  # half a second beyond it
    assert r.delay("User:a", 100.25) == 250
    assert r.delay("User:a", 100.5) == 0
    assert r.record("User:b", RATE, now=100.0) == 0  # principals are accounted apart


def test_a_client_honouring_the_throttle_gets_the_rate():
    r, now, sent = ByteRate("produce", RATE), 0.0, 0
    while sent < 20 * RATE:
        now += r.record("User:a", 100, now) / 1000  # waits what each answer says
        sent += 100
    # the first BURST_S worth came at once, the rest at RATE
    assert (sent - RATE * BURST_S) / RATE - 0.1 <= now <= (sent - RATE * BURST_S) / RATE + 0.1


def test_idle_time_refills_only_one_burst():
    r = ByteRate("produce", RATE)
    r.record("User:a", 3 * RATE, now=0.0)
    assert r.delay("User:a", 0.0) == 2000
    assert r.record("User:a", 2 * RATE, now=60.0) == 1000  # idle a minute: one burst, not 60


def test_one_throttle_is_bounded_and_older_debt_forgiven():
    r = ByteRate("produce", RATE)
    assert r.record("User:a", 10**9, now=0.0) == MAX_THROTTLE_S * 1000
    assert r.delay("User:a", MAX_THROTTLE_S) == 0


def test_throttle_rounds_up_and_delay_down():
    r = ByteRate("fetch", 3)
    assert r.record("User:a", 4, now=0.0) == 334  # 1/3 s rounded up: a waiting client is paid up
    assert r.delay("User:a", 0.3334) == 0  # under 1 ms of debt: served, not refused
    assert r.throttled_s == pytest.approx(0.334)


def test_no_quota_means_no_entry_and_paid_entries_are_forgotten():
    r = ByteRate("produce", 0, {"User:slow": RATE, "User:free": 0})
    assert r.rate("User:x") == 0 and r.rate("User:slow") == RATE
    assert r.record("User:x", 10**9, now=0.0) == 0 and r.record("User:free", 10**9, 0.0) == 0
    assert len(r) == 0 and r.window("User:x") == 0
    assert r.record("User:slow", 2 * RATE, now=0.0) == 1000
    assert r.forget(0.5) == 0 and len(r) == 1  # still in debt
    assert r.forget(1.0 + BURST_S) == 1 and len(r) == 0  # paid up and a burst refilled: as new
    assert r.record("User:slow", RATE, now=2.0) == 0


def test_quotas_from_config():
    assert Quotas.of(BrokerConfig()) is None
    q = Quotas.of(BrokerConfig(quota_fetch_bytes_per_s=5, quotas={"User:etl": {
        "produce_bytes_per_s": 7}}))
    assert q.produce.rate("User:etl") == 7 and q.produce.rate(ANONYMOUS) == 0
    assert q.fetch.rate("User:etl") == 5  # a kind left out of an override: the default
    assert Quotas.of(BrokerConfig(quotas={"User:etl": {"fetch_bytes_per_s": 9}})).produce is None
    assert principal_of("") == ANONYMOUS and principal_of("User:bob") == "User:bob"


# -- what a Produce or Fetch costs --------------------------------------------------------------
def produce_of(*sizes: int) -> m.Produce:
    return m.Produce(parts=tuple(ProducePart("t", i, n) for i, n in enumerate(sizes)),
                     payload=tuple(b"x" * n for n in sizes))


FETCH = m.Fetch(max_bytes=50 << 20, parts=(FetchPart("t", 0, 5, 1 << 20),
                                           FetchPart("u", 1, 0, 1 << 20)))


def test_a_produce_is_accounted_by_its_parts_bytes():
    q = Quotas(ByteRate("produce", RATE), None)
    msg = produce_of(600, 900)
    assert q.meter(msg, ANONYMOUS, 0.0) == (msg, 500)
    out, mute = q.answer(m.ProduceResponse(parts=(("t", 0, 0, "", 0, 0),)), 500, ANONYMOUS, 0.0)
    assert out.throttle_ms == 500 and out.parts == (("t", 0, 0, "", 0, 0),) and mute == 0
    assert q.answer(None, 500, ANONYMOUS, 0.0) == (None, 0)  # acks=0: nothing to carry it
    assert q.meter(FETCH, ANONYMOUS, 0.0) == (FETCH, 0)  # no fetch quota


def test_a_fetch_is_capped_then_accounted_when_answered():
    q = Quotas(None, ByteRate("fetch", RATE))
    capped, throttle = q.meter(FETCH, "User:c", 0.0)
    assert throttle == ACCOUNT and capped.max_bytes == RATE * BURST_S and capped.parts == FETCH.parts
    resp = m.FetchResponse(parts=(FetchedPart("t", 0, 0, "", 9, 0, 1500),
                                  FetchedPart("u", 1, 0, "", 3, 0, 0)),
                           payload=(b"x" * 1500, b""))
    out, mute = q.answer(resp, ACCOUNT, "User:c", 0.0)
    assert (out.throttle_ms, mute) == (500, 500) and out.payload is resp.payload
    empty = m.FetchResponse(parts=(FetchedPart("t", 0, 0, "", 9, 0, 0),))
    assert q.answer(empty, ACCOUNT, "User:d", 0.0) == (empty, 0)


def test_a_fetch_in_debt_is_answered_empty_at_once():
    q = Quotas(None, ByteRate("fetch", RATE))
    q.fetch.record("User:c", 2 * RATE, now=0.0)
    out, throttle = q.meter(FETCH, "User:c", 0.25)
    assert out.__class__ is m.FetchResponse and throttle == out.throttle_ms == 750
    assert out.parts == (("t", 0, 0, "", -1, -1, 0), ("u", 1, 0, "", -1, -1, 0))
    assert decode(encode_bytes(out, 3)[4:]).message == out  # a valid answer on the wire
    assert q.meter(FETCH, "User:other", 0.25)[1] == ACCOUNT


# -- connection counts ------------------------------------------------------------------------
def admission(**cfg) -> Admission:
    return Admission(BrokerConfig(**cfg))


def test_admission_counts_per_address_and_in_all():
    a = admission(max_connections=4, max_connections_per_ip=2,
                  max_connections_per_ip_overrides={"10.0.0.9": 3, "10.0.0.8": 0})
    assert a.admit("10.0.0.1") is None and a.admit("10.0.0.1") is None
    assert a.admit("10.0.0.1") == PER_IP
    assert a.admit("10.0.0.8") == PER_IP  # an override of 0 refuses the address
    assert a.admit("10.0.0.9") is None and a.admit("10.0.0.9") is None
    assert a.admit("10.0.0.2") == MAX_CONNECTIONS
    assert a.refused == {MAX_CONNECTIONS: 1, PER_IP: 2}
    a.release("10.0.0.1")
    assert a.admit("10.0.0.1") is None
    for _ in range(2):
        a.release("10.0.0.1")
    assert "10.0.0.1" not in a.by_ip and a.total == 2
    assert "limit is 3 (max_connections_per_ip_overrides)" in a.message(PER_IP, "10.0.0.9")
    assert "10.0.0.1: its limit is 2 (max_connections_per_ip)" in a.message(PER_IP, "10.0.0.1")
    assert "max_connections 4" in a.message(MAX_CONNECTIONS, "10.0.0.1")


class FakeTransport:
    def __init__(self) -> None:
        self.out, self.eof, self.closed = bytearray(), False, False

    def write(self, data) -> None:
        self.out += data

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        self.eof = True

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def feed(refusal: Refusal, data: bytes, step: int) -> None:
    for i in range(0, len(data), step):
        chunk = data[i:i + step]
        buf = refusal.get_buffer(len(chunk))
        buf[:len(chunk)] = chunk
        refusal.buffer_updated(len(chunk))


def refuse(data: bytes, step: int, early: bool = False):
    """What a refusal answers to ``data`` (``early``: all of it read before
    ``connection_made``, as start_tls may deliver it): (envelope or None, transport)."""
    async def run():
        a = admission(frame_timeout_ms=60_000)
        refusal = a.refusal(PER_IP, "10.0.0.1", bytearray(1 << 16))
        t = FakeTransport()
        if early:
            feed(refusal, data, step)
        refusal.connection_made(t)
        if not early:
            feed(refusal, data, step)
        refusal.connection_lost(None)
        assert a.refusing == 0
        reader = FrameReader()
        reader.receive_data(bytes(t.out))
        frame = reader.next_frame()
        return (None if frame is None else decode(frame)), t
    return asyncio.run(run())


@pytest.mark.parametrize("step, early", [(1, False), (7, False), (1 << 20, False), (5, True)])
def test_a_refusal_answers_the_first_request_with_1002(step, early):
    env, t = refuse(encode_bytes(m.Handshake(), 41) + b"trailing", step, early)
    assert env.cid == 41 and env.message.__class__ is m.HandshakeResponse
    assert env.message.error == TooManyConnectionsError.code == 1002
    assert "too many connections from 10.0.0.1" in env.message.message
    assert t.eof and not t.closed  # the end follows the answer; closed once the peer closes


def test_a_refusal_answers_a_produce_from_its_header_alone():
    data = encode_bytes(produce_of(HEAD_MAX * 4), 7)
    env, _ = refuse(data[:HEAD_MAX // 2], 100)  # the payload never arrived
    assert env.cid == 7 and env.message.__class__ is m.ProduceResponse
    assert env.message.error == 1002


@pytest.mark.parametrize("data", [b"\x00\x00\x00\x02\x00\x00\x00\x00", b"\x00\x00\xff\xff" + b"\xff" * 8,
                                  b"\x00\x00\x00\x09\x00\x00\x00\x05\xc1\xc1\xc1\xc1\xc1"])
def test_a_refusal_closes_on_what_it_cannot_answer(data):
    env, t = refuse(data, 3)
    assert env is None and t.closed


def test_refusals_at_a_time_are_bounded():
    async def run():
        a = admission()
        held = [a.refusal(PER_IP, "10.0.0.1", bytearray(8)) for _ in range(MAX_REFUSING)]
        assert all(held) and a.refusal(PER_IP, "10.0.0.1", bytearray(8)) is None
        held[0].forget()
        held[0].forget()  # once only
        assert a.refusing == MAX_REFUSING - 1 and a.refusal(PER_IP, "x", bytearray(8)) is not None
    asyncio.run(run())


# -- the client's side ---------------------------------------------------------------------------
def test_client_throttles():
    t = Throttles()
    t.seen(1, 0, now=10.0)
    t.seen(1, 300, now=10.0)
    t.seen(2, 100, now=10.0)
    t.seen(1, 200, now=10.1)  # an earlier deadline does not shorten a later one
    assert t.left(1, 10.1) == pytest.approx(0.2) and t.left(2, 10.2) == 0 and t.left(3, 0) == 0
    assert t.metrics("produce") == {"produce_throttle_time_ms_avg": 150.0,
                                    "produce_throttle_time_ms_max": 300}
    assert Throttles().metrics("fetch")["fetch_throttle_time_ms_avg"] == 0.0


# -- settings --------------------------------------------------------------------------------------
def test_tables_from_toml_are_normalised(tmp_path):
    path = tmp_path / "b.toml"
    path.write_text('max_connections_per_ip = 5\n\n[max_connections_per_ip_overrides]\n'
                    '"::ffff:10.0.0.7" = 40\n"::1" = 2\n\n[quotas."User:etl"]\n'
                    'produce_bytes_per_s = 100\n\n[quotas."User:ANONYMOUS"]\nfetch_bytes_per_s = 0\n')
    cfg = BrokerConfig.load(str(path))
    assert cfg.max_connections_per_ip_overrides == (("10.0.0.7", 40), ("::1", 2))
    assert cfg.quotas == (("User:ANONYMOUS", None, 0), ("User:etl", 100, None))
    assert hash(cfg) == hash(BrokerConfig.load(str(path)))


@pytest.mark.parametrize("settings, words", [
    ({"max_connections_per_ip": 0}, "max_connections_per_ip must be an integer >= 1"),
    ({"quota_produce_bytes_per_s": -1}, "quota_produce_bytes_per_s must be an integer >= 0"),
    ({"quota_fetch_bytes_per_s": 1.5}, "quota_fetch_bytes_per_s must be an integer >= 0"),
    ({"max_connections_per_ip_overrides": {"10.0.0.300": 1}}, "'10.0.0.300' is not an IP address"),
    ({"max_connections_per_ip_overrides": {"10.0.0.3": -2}}, "['10.0.0.3'] must be an integer >= 0"),
    ({"max_connections_per_ip_overrides": 5}, "max_connections_per_ip_overrides must be a table"),
    ({"quotas": {"alice": {"produce_bytes_per_s": 1}}}, "'alice' is not a principal"),
    ({"quotas": {"User:a b": {"produce_bytes_per_s": 1}}}, "'User:a b' is not a principal"),
    ({"quotas": {"User:a": {"produce_rate": 1}}}, "must be a table of produce_bytes_per_s"),
    ({"quotas": {"User:a": {}}}, "must be a table of produce_bytes_per_s"),
    ({"quotas": {"User:a": {"fetch_bytes_per_s": -3}}}, "fetch_bytes_per_s must be an integer >= 0"),
])
def test_bad_settings_are_clear_errors(settings, words):
    with pytest.raises(InvalidConfigError) as info:
        BrokerConfig(**settings)
    assert words in info.value.message
