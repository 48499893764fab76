"""/metrics with ``metrics_auth`` and ``metrics_tls`` (docs/metrics.md,
"Authentication and TLS"): a real broker with --auth-required,
super_users = ["User:admin"]; HTTP Basic with the broker's users, failures
throttled per address, the topic and group names filtered by the scraping
principal's describe rights; HTTPS with the listener's certificate."""

from __future__ import annotations

import base64
import http.client
import socket
import ssl

import pytest

from tests.support.fixtures import BrokerProcess, invoke_cli, invoked_ok, wait_until
from tests.support.metrics_scrape import parse
from tests.support.tls import pki, tls_flags  # noqa: F401 - the certificates fixture
from logbroker import Admin, Producer
from logbroker.client.admin.results import Acl

ADMIN_PW, ALICE_PW = "admin-Pa55word", "alice-Pa55word"


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """admin (super user), alice (may describe topic ``seen`` and group
    ``g-seen`` only); topics ``seen`` and ``secret`` with a record each,
    groups ``g-seen`` and ``g-secret`` with a committed offset in each."""
    data = tmp_path_factory.mktemp("mauth") / "data"
    b = BrokerProcess(data, "--auth-required", "--metrics-port", "0",
                      config={"super_users": ["User:admin"], "metrics_auth": True}).start()
    b.metrics_port = int(b.proc.stdout.readline().rsplit(":", 1)[1].split("/")[0])
    try:
        invoked_ok(invoke_cli(["users", "add", "admin", "--user-password-stdin"],
                              stdin=ADMIN_PW + "\n", bootstrap=b.bootstrap))
        with Admin(b.bootstrap, username="admin", password=ADMIN_PW) as admin:
            admin.create_user("alice", ALICE_PW)
            admin.create_acls([Acl("User:alice", "topic", "seen", "literal", "describe"),
                               Acl("User:alice", "group", "g-seen", "literal", "describe")])
            with Producer(b.bootstrap, username="admin", password=ADMIN_PW) as producer:
                for topic in ("seen", "secret"):
                    producer.send(topic, b"x").result(10)
            admin.commit_offsets("g-seen", {("seen", 0): 1})
            admin.commit_offsets("g-secret", {("secret", 0): 1, ("seen", 0): 1})
        yield b
    finally:
        b.kill()


def get(port: int, user: "str | None" = None, password: str = "", source: str = "127.0.0.1",
        context: "ssl.SSLContext | None" = None) -> tuple:
    """(status, headers, body text) of GET /metrics from ``source``."""
    cls = http.client.HTTPSConnection if context else http.client.HTTPConnection
    kwargs = {"context": context} if context else {}
    conn = cls("127.0.0.1", port, timeout=10, source_address=(source, 0), **kwargs)
    headers = {}
    if user is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(
            f"{user}:{password}".encode()).decode()
    try:
        conn.request("GET", "/metrics", headers=headers)
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read().decode()
    finally:
        conn.close()


def names(text: str, label: str) -> set:
    return {labels[label] for samples in parse(text).values() if isinstance(samples, dict)
            for key in samples for labels in [dict(key)] if label in labels}


def test_no_or_wrong_credentials_are_refused(secured):
    status, headers, body = get(secured.metrics_port)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic realm=")
    assert "logbroker_" not in body
    status, _, body = get(secured.metrics_port, "alice", "not-her-password", source="127.0.0.3")
    assert status == 401 and "logbroker_" not in body
    status, _, _ = get(secured.metrics_port, "nobody", ALICE_PW, source="127.0.0.3")
    assert status == 401
    assert "metrics: login from 127.0.0.3 as 'alice' failed: wrong password" in secured.log()


def test_names_are_filtered_by_the_principals_rights(secured):
    status, _, text = get(secured.metrics_port, "admin", ADMIN_PW)
    assert status == 200
    assert {"seen", "secret"} <= names(text, "topic")
    assert {"g-seen", "g-secret"} <= names(text, "group")
    status, _, text = get(secured.metrics_port, "alice", ALICE_PW)
    assert status == 200
    assert names(text, "topic") == {"seen"} and names(text, "group") == {"g-seen"}
    assert "secret" not in text
    assert "logbroker_requests_total" in text  # the counters without names are all there


def test_failed_logins_are_throttled_per_address(secured):
    port = secured.metrics_port
    statuses = [get(port, "alice", f"guess-{i}", source="127.0.0.2")[0] for i in range(7)]
    assert statuses[:5] == [401] * 5 and statuses[5:] == [429, 429], statuses
    status, headers, _ = get(port, "alice", ALICE_PW, source="127.0.0.2")
    assert status == 429 and int(headers["Retry-After"]) >= 1  # this address waits...
    assert get(port, "alice", ALICE_PW)[0] == 200  # ...another one does not
    assert "metrics: 127.0.0.2 refused: 5 failed logins" in secured.log()


def test_settings_are_checked(tmp_path):
    b = BrokerProcess(tmp_path / "data", "--metrics-port", "0", config={"metrics_auth": True})
    with pytest.raises(RuntimeError, match="metrics_auth needs auth_required"):
        b.start()


def test_metrics_over_tls(tmp_path, pki):  # noqa: F811 - the fixture
    """HTTPS with the listener's certificate; handshakes that never come
    count toward the connection bound and end at the timeout."""
    b = BrokerProcess(tmp_path / "data", "--metrics-port", "0", *tls_flags(pki.server),
                      config={"metrics_tls": True, "metrics_max_connections": 4,
                              "metrics_timeout_ms": 1000}).start()
    try:
        line = b.proc.stdout.readline()
        assert line.startswith("logbroker metrics on https://127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1].split("/")[0])
        status, _, text = get(port, context=ssl.create_default_context(cafile=pki.ca))
        assert status == 200 and "logbroker_partitions " in text
        with pytest.raises((http.client.HTTPException, ConnectionError)):
            get(port)  # plain HTTP is not answered
        silent = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(10)]
        try:  # 4 wait in their handshake, the others are closed at once, then those 4 too
            wait_until(lambda: closed(silent) >= 6, 0.8, "connections beyond the bound closed")
            wait_until(lambda: closed(silent) == 10, 5, "handshakes ended by the timeout")
        finally:
            for s in silent:
                s.close()
        assert get(port, context=ssl.create_default_context(cafile=pki.ca))[0] == 200
    finally:
        b.kill()


def closed(socks) -> int:
    """How many of ``socks`` the peer closed (reset counts)."""
    n = 0
    for s in socks:
        s.setblocking(False)
        try:
            n += s.recv(16) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n
