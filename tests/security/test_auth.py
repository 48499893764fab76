"""Authentication (SCRAM-SHA-256, docs/security.md) against real broker
processes with --auth-required on 127.0.0.1: the bootstrap rule, clients
with the right and wrong passwords, anonymous requests, replayed and
stalled SCRAM exchanges, users admin through the CLI, what LMDB keeps."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import urllib.request

import pytest
from tests.support.fixtures import LOGBROKER, BrokerProcess, RawConn, read_line, cli_error, consume, invoke_cli, \
    invoked_error, invoked_ok, run_cli
from scramp import ScramClient

from logbroker import Admin, Consumer, Producer
from logbroker import aio
from logbroker.errors import (ClusterAuthorizationFailedError, InvalidConfigError,
                              ResourceNotFoundError, SaslAuthenticationFailedError)
from logbroker.protocol import messages as m

PASSWORD = "s3cret-Pa55word"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """An --auth-required broker whose first user (alice) came from the CLI
    over an unauthenticated loopback connection (the bootstrap rule)."""
    data = tmp_path_factory.mktemp("auth") / "data"
    b = BrokerProcess(data, "--auth-required", "--metrics-port", "0",
                      config={"frame_timeout_ms": 1000}).start()
    b.metrics_url = b.proc.stdout.readline().split()[-1]
    try:
        out = invoked_ok(invoke_cli(["users", "add", "alice", "--user-password-stdin"],
                                    stdin=PASSWORD + "\n", bootstrap=b.bootstrap))
        assert out.strip() == "created user alice"
        yield b
    finally:
        b.stop()


def alice(b, **kw) -> dict:
    return {"bootstrap": b.bootstrap, "username": "alice", "password": PASSWORD, **kw}


def test_auth_required_in_cluster_mode_needs_an_inter_broker_user():
    from logbroker.broker.config import BrokerConfig

    with pytest.raises(InvalidConfigError, match="needs inter_broker_user"):
        BrokerConfig(auth_required=True, etcd="http://127.0.0.1:2379")
    cfg = BrokerConfig(auth_required=True, etcd="http://127.0.0.1:2379", inter_broker_user="broker")
    assert cfg.inter_broker_user == "broker"


def test_open_single_node_says_so(tmp_path):
    proc = subprocess.Popen([LOGBROKER, "serve", "--data-dir", str(tmp_path / "open"), "--port",
                             "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = read_line(proc, 30)
        assert line.startswith("logbroker listening on 127.0.0.1:")
        assert line.rstrip().endswith(" (open: no authentication, loopback only)")
    finally:
        proc.terminate()
        proc.wait(30)
        proc.stdout.close()


def test_bootstrap_rule_ends_with_the_first_user(broker):
    err = invoked_error(invoke_cli(["users", "add", "bob", "--user-password-stdin"],
                                   stdin="pw-bob\n", bootstrap=broker.bootstrap),
                        "CLUSTER_AUTHORIZATION_FAILED")
    assert "authenticated" in err
    out = invoked_ok(invoke_cli(["users", "add", "bob", "--username", "alice", "--password-stdin",
                                 "--user-password-stdin"], stdin=f"{PASSWORD}\npw-bob\n",
                                bootstrap=broker.bootstrap))
    assert out.strip() == "created user bob"


def test_produce_and_consume_with_the_password(broker):
    values = [f"v{i}".encode() for i in range(20)]
    with Producer(**alice(broker)) as p:
        for v in values:
            p.send("authed", v)
        p.flush()
    with Consumer(**alice(broker), group="g-auth", auto_offset_reset="earliest") as c:
        c.subscribe(["authed"])
        got = consume(c, len(values))
    assert [r.value for r in got] == values


def test_asyncio_admin_authenticates(broker):
    async def main():
        async with aio.Admin(**alice(broker)) as admin:
            return [u.name for u in await admin.list_users()]
    assert "alice" in asyncio.run(main())


def test_wrong_password_fails_at_once_with_one_line(broker):
    start = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError) as info:
        with Admin(broker.bootstrap, username="alice", password="wrong",
                   connect_timeout_ms=20_000) as admin:
            admin.list_topics()
    assert time.monotonic() - start < 5  # not retried until the deadline
    assert broker.bootstrap in info.value.message
    assert "invalid user name or password" in info.value.message
    r = run_cli("topics", "list", "--username", "alice", "--password-stdin", stdin=b"wrong\n",
                bootstrap=broker.bootstrap)
    assert broker.bootstrap in cli_error(r, "SASL_AUTHENTICATION_FAILED")


def test_unknown_user_fails_like_a_wrong_password(broker):
    with pytest.raises(SaslAuthenticationFailedError, match="invalid user name or password"):
        with Admin(broker.bootstrap, username="nobody", password=PASSWORD) as admin:
            admin.list_topics()
    with urllib.request.urlopen(broker.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    count = [line for line in text.splitlines() if line.startswith("logbroker_auth_failures_total")]
    assert count and float(count[0].split()[-1]) >= 1


def test_anonymous_requests_are_refused(broker):
    conn = RawConn(broker.port)
    assert conn.call(m.Handshake()).error == 0
    resp = conn.call(m.Metadata())
    assert resp.error == SaslAuthenticationFailedError.code and "requires authentication" in resp.message
    assert conn.call(m.ListUsers()).error == ClusterAuthorizationFailedError.code  # users exist
    r = run_cli("topics", "list", bootstrap=broker.bootstrap)
    cli_error(r, "SASL_AUTHENTICATION_FAILED")


def _exchange(conn: RawConn, client_first: str) -> str:
    assert conn.call(m.SaslHandshake(mechanism="SCRAM-SHA-256")).mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
    resp = conn.call(m.SaslAuthenticate(auth_bytes=client_first.encode()))
    assert resp.error == 0, resp
    return resp.auth_bytes.decode()


def test_replayed_client_final_is_refused(broker):
    first_conn = RawConn(broker.port)
    client = ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD)
    client_first = client.get_client_first()
    client.set_server_first(_exchange(first_conn, client_first))
    client_final = client.get_client_final()
    ok = first_conn.call(m.SaslAuthenticate(auth_bytes=client_final.encode()))
    assert ok.error == 0 and ok.principal == "User:alice"
    client.set_server_final(ok.auth_bytes.decode())  # the broker proved it knows the keys
    assert first_conn.call(m.Metadata()).error == 0

    replay = RawConn(broker.port)
    _exchange(replay, client_first)  # the same client-first gets a fresh server nonce
    resp = replay.call(m.SaslAuthenticate(auth_bytes=client_final.encode()))
    assert resp.error == SaslAuthenticationFailedError.code
    assert replay.closed_by_peer(5)


def test_out_of_order_and_stalled_exchanges_are_closed(broker):
    early = RawConn(broker.port)
    resp = early.call(m.SaslAuthenticate(auth_bytes=b"n,,n=alice,r=abc"))
    assert resp.error == 34  # ILLEGAL_SASL_STATE
    assert early.closed_by_peer(5)

    bad = RawConn(broker.port)
    assert bad.call(m.SaslHandshake(mechanism="PLAIN")).error == 33  # UNSUPPORTED_SASL_MECHANISM
    assert bad.closed_by_peer(5)

    stalled = RawConn(broker.port)
    start = time.monotonic()
    _exchange(stalled, ScramClient(["SCRAM-SHA-256"], "alice", PASSWORD).get_client_first())
    assert stalled.closed_by_peer(10)  # frame_timeout_ms 1000, swept every second
    assert time.monotonic() - start < 5


def test_users_list_shows_names_only(broker):
    out = invoked_ok(invoke_cli(["users", "list", "--json", "--username", "alice",
                                 "--password-stdin"], stdin=PASSWORD + "\n",
                                bootstrap=broker.bootstrap))
    rows = json.loads(out)
    assert {"name": "alice", "mechanism": "SCRAM-SHA-256", "iterations": 4096} in rows
    assert all(set(r) == {"name", "mechanism", "iterations"} for r in rows)
    table = invoked_ok(invoke_cli(["users", "list", "--username", "alice", "--password-stdin"],
                                  stdin=PASSWORD + "\n", bootstrap=broker.bootstrap))
    assert table.split()[:3] == ["NAME", "MECHANISM", "ITERATIONS"] and "alice" in table


def test_deleting_a_user_fails_its_next_connection(broker):
    with Admin(**alice(broker)) as admin:
        assert admin.create_user("carol", "pw-carol") is True
        assert admin.create_user("carol", "pw-carol2") is False  # a new password
    with Admin(broker.bootstrap, username="carol", password="pw-carol2") as carol:
        carol.list_topics()
        carol.delete_user("carol")  # open connections stay open
        with pytest.raises(ResourceNotFoundError):
            carol.delete_user("carol")
    with pytest.raises(SaslAuthenticationFailedError):
        with Admin(broker.bootstrap, username="carol", password="pw-carol2") as carol:
            carol.list_topics()


def test_credentials_on_disk_are_not_the_password(broker):
    with Admin(**alice(broker)) as admin:
        admin.create_user("dave", "plain-Text-Password-42")
    secrets = (PASSWORD.encode(), b"plain-Text-Password-42")
    for root, _, files in os.walk(broker.data_dir):
        for name in files:
            with open(os.path.join(root, name), "rb") as fh:
                data = fh.read()
            assert not any(s in data for s in secrets), name
