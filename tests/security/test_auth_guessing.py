"""Password guessing, throttled (docs/security.md, "Password guessing"),
against one real broker with --auth-required and both listeners: an
attacker guessing from one loopback address (127.0.0.2, 127.0.0.3...: the
raw connections bind their source address) gets at most
auth_failures_per_s_per_ip proofs checked a second, on our listener and on
the Kafka listener, and is told why it is refused, while the right password
from another address (127.0.0.1, through our client and kafka-python)
works at once; a guessing run spread over many addresses is held to the
per-user limit, and the user still logs in from an address it used before;
throttled attempts are counted in logbroker_auth_throttled_total."""

from __future__ import annotations

import time
import urllib.request

import pytest
from scramp import ScramClient

from logbroker import Admin
from logbroker.security.auth_throttle import BURST, PER_IP, PER_USER
from tests.support.fixtures import BrokerProcess, RawConn, invoke_cli, invoked_ok
from tests.support.kafka_raw import Raw, kafka_and_metrics
from tests.support.scram import scram_exchange

PASSWORD, BOB_PW = "alice-Pa55word", "bob-Pa55word"
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
GUESSING_S = 2.0  # each guessing run: bounded in time...
MAX_GUESSES = 2_000  # ...and in count
SLACK = 3  # guesses beyond rate * elapsed + BURST tolerated (clock edges)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """An --auth-required broker with a Kafka listener (``broker.kafka``) and
    metrics (``broker.metrics_url``); users alice and bob."""
    data = tmp_path_factory.mktemp("guessing") / "data"
    b = BrokerProcess(data, "--auth-required", "--kafka-port", "0", "--metrics-port", "0").start()
    try:
        kafka_and_metrics(b)
        invoked_ok(invoke_cli(["users", "add", "alice", "--user-password-stdin"],
                              stdin=PASSWORD + "\n", bootstrap=b.bootstrap))
        with Admin(b.bootstrap, username="alice", password=PASSWORD) as admin:
            admin.create_user("bob", BOB_PW)
        yield b
    finally:
        b.stop()


def _outcome(error: int, message: str) -> str:
    if error == 0:
        return "ok"
    assert error == 58, (error, message)  # SASL_AUTHENTICATION_FAILED, whatever the reason
    if message.startswith("authentication throttled"):
        return "throttled"
    assert message == "invalid user name or password", message
    return "wrong"


def ours(b, user: str, password: str, source: str) -> "tuple[str, str]":
    """One SCRAM exchange on our listener from ``source``: ("ok" | "wrong" |
    "throttled", the broker's message)."""
    conn = RawConn(b.port, source=source)
    try:
        answer = scram_exchange(conn, user, password)
        return _outcome(answer.error, answer.message), answer.message
    finally:
        conn.close()


def kafka(b, user: str, password: str, source: str) -> "tuple[str, str]":
    """One SCRAM exchange on the Kafka listener (SaslHandshake v1,
    SaslAuthenticate v1) from ``source``, as ``ours``."""
    raw, client = Raw(b.kafka, source=source), ScramClient(["SCRAM-SHA-256"], user, password)
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "SCRAM-SHA-256"}))
        assert raw.recv(SASL_HANDSHAKE, 1)[1].error_code == 0
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 2,
                                  {"auth_bytes": client.get_client_first().encode()}))
        first = raw.recv(SASL_AUTHENTICATE, 1)[1]
        if first.error_code:
            return _outcome(first.error_code, first.error_message), first.error_message
        client.set_server_first(first.auth_bytes.decode())
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 3,
                                  {"auth_bytes": client.get_client_final().encode()}))
        final = raw.recv(SASL_AUTHENTICATE, 1)[1]
        return _outcome(final.error_code, final.error_message or ""), final.error_message or ""
    finally:
        raw.sock.close()


def guessing(attempt, sources: "list[str]", user: str) -> "tuple[dict, float, str]":
    """Wrong passwords for ``user`` from ``sources`` in turn, for GUESSING_S
    (at most MAX_GUESSES): the outcomes counted, the seconds it took, and
    the last throttled message."""
    counts = {"ok": 0, "wrong": 0, "throttled": 0}
    last = ""
    start = time.monotonic()
    for i in range(MAX_GUESSES):
        if time.monotonic() - start >= GUESSING_S:
            break
        got, message = attempt(sources[i % len(sources)], user, f"guess-{i}")
        counts[got] += 1
        if got == "throttled":
            last = message
    return counts, time.monotonic() - start, last


@pytest.mark.parametrize("listener", ["ours", "kafka"])
def test_guessing_from_one_address_is_held_to_its_rate(broker, listener):
    attempt = ours if listener == "ours" else kafka
    source = "127.0.0.2" if listener == "ours" else "127.0.0.3"
    counts, elapsed, message = guessing(lambda s, u, p: attempt(broker, u, p, s), [source],
                                        "alice")
    assert counts["ok"] == 0
    assert counts["wrong"] <= PER_IP * elapsed + BURST + SLACK, (counts, elapsed)
    assert counts["throttled"] > 0, counts  # the attacker kept trying: refused without a check
    assert f"too many failed attempts from {source}" in message and "retry in" in message
    assert "auth_failures_per_s_per_ip" in message
    # the right password from another address works at once, through real clients
    start = time.monotonic()
    with Admin(broker.bootstrap, username="alice", password=PASSWORD) as admin:
        assert "bob" in [u.name for u in admin.list_users()]
    if listener == "kafka":
        kafka_admin = pytest.importorskip("kafka").KafkaAdminClient(
            bootstrap_servers=broker.kafka, security_protocol="SASL_PLAINTEXT",
            sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="alice",
            sasl_plain_password=PASSWORD, request_timeout_ms=10_000)
        try:
            kafka_admin.list_topics()
        finally:
            kafka_admin.close()
    assert time.monotonic() - start < 5
    assert attempt(broker, "alice", PASSWORD, "127.0.0.1")[0] == "ok"


def test_guessing_over_many_addresses_is_held_to_the_user_rate(broker):
    # bob logs in from 127.0.0.1 first: an address of his, exempt from his user's limit
    assert ours(broker, "bob", BOB_PW, "127.0.0.1")[0] == "ok"
    sources = [f"127.0.0.{i}" for i in range(10, 18)]  # 8 addresses: 80 guesses/s by address
    counts, elapsed, message = guessing(lambda s, u, p: ours(broker, u, p, s), sources, "bob")
    assert counts["ok"] == 0
    assert counts["wrong"] <= PER_USER * elapsed + BURST + SLACK, (counts, elapsed)
    assert counts["throttled"] > 0, counts
    assert "too many failed attempts as 'bob'" in message, message
    # bob's own address still logs him in while the others are held back
    assert ours(broker, "bob", BOB_PW, "127.0.0.1")[0] == "ok"
    with Admin(broker.bootstrap, username="bob", password=BOB_PW) as admin:
        admin.list_topics()


def test_throttled_attempts_are_counted(broker):
    for _ in range(BURST + 3):  # the burst and then some, from an address of its own
        ours(broker, "alice", "wrong", "127.0.0.30")
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    line = next(x for x in text.splitlines() if x.startswith("logbroker_auth_throttled_total "))
    assert float(line.split()[1]) >= 1
