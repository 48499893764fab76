"""TLS on the listener (docs/security.md): real brokers with --tls-* flags on
127.0.0.1, real clients and the CLI; certificates made here with trustme
(never checked in). Every failure is a clear error (a code, the address,
the reason), the broker logs one line for it and serves the next client."""

from __future__ import annotations

import asyncio
import glob
import os
import socket
import time
from types import SimpleNamespace

import pytest

from tests.support.fixtures import BrokerProcess, cli_error, cli_ok, invoke_cli, invoked_error, run_cli, \
    wait_until
from tests.support.tls import pki, tls_flags  # noqa: F401 - the certificates fixture
from logbroker import Admin, Consumer, Producer
from logbroker.errors import BrokerUnavailableError, InvalidConfigError, TlsError
from logbroker.protocol import messages as m

trustme = pytest.importorskip("trustme")

RECORDS = 3000


def start_all(*brokers: BrokerProcess) -> None:
    for b in brokers:
        b.start()


@pytest.fixture(scope="module")
def brokers(tmp_path_factory, pki):
    """A TLS broker (1 s handshake/frame timeout) and a mutual-TLS one."""
    d = tmp_path_factory.mktemp("tls-brokers")
    tls = BrokerProcess(d / "tls", *tls_flags(pki.server), config={"frame_timeout_ms": 1000})
    mtls = BrokerProcess(d / "mtls", *tls_flags(pki.server, pki.ca, client_auth=True))
    try:
        start_all(tls, mtls)
        yield SimpleNamespace(tls=tls, mtls=mtls)
    finally:
        tls.kill()
        mtls.kill()


def serves(bootstrap: str, **tls) -> dict:
    """The broker answers a good client (topic names and partition counts)."""
    with Admin(bootstrap, **tls) as admin:
        return admin.list_topics()


def failure(bootstrap: str, exc_type, **kw):
    """The error a client gets, and how long it took."""
    started, ms = time.monotonic(), kw.pop("timeout_ms", 1000)
    with pytest.raises(exc_type) as info:
        with Admin(bootstrap, connect_timeout_ms=ms, request_timeout_ms=ms, **kw) as admin:
            admin.list_topics()
    return info.value, time.monotonic() - started


def logged(broker: BrokerProcess, text: str) -> int:
    wait_until(lambda: text in broker.log(), 5, f"{text!r} in the broker's log")
    assert "Traceback" not in broker.log()
    return broker.log().count(text)


# -- the happy path ------------------------------------------------------------------
def test_produce_and_consume_over_tls_round_trip(brokers, pki):
    b = brokers.tls.bootstrap
    sent = [(b"v%05d" % i + bytes(i % 300), b"k%d" % (i % 7), [("h", b"%d" % i)])
            for i in range(RECORDS)]
    with Producer(b, tls_ca=pki.ca, batch_size=4096) as p:  # many small batches
        for value, key, headers in sent:
            p.send("roundtrip", value, key=key, headers=headers)
        p.flush(10)
    with Consumer(b, tls_ca=pki.ca, auto_offset_reset="earliest", max_poll_records=500) as c:
        c.subscribe(["roundtrip"])
        got = []
        deadline = time.monotonic() + 15
        while len(got) < RECORDS and time.monotonic() < deadline:
            got += c.poll(1.0)
    assert [(r.value, r.key, list(r.headers)) for r in got] == \
        [(v, k, [(hk, hv) for hk, hv in h]) for v, k, h in sent]
    assert [r.offset for r in got] == list(range(RECORDS))
    assert serves(f"localhost:{brokers.tls.port}", tls_ca=pki.ca)["roundtrip"] == 1


def test_a_fetch_over_tls_carries_the_segment_bytes_unchanged(brokers, pki):
    """No sendfile over TLS: the broker reads the slices and writes them
    as they lie on disk. 12 topics x 3 batches x 5 x 60 KB (~11 MB, more
    than the socket buffers hold: the broker's TLS writes wait on the reader)."""
    from logbroker.client.net.connection import BrokerConnection
    from logbroker.records import build_batch
    from logbroker.tls import client_context

    topics = [f"slices{i:02d}" for i in range(12)]

    async def go():
        conn = await BrokerConnection.open("127.0.0.1", brokers.tls.port, timeout=5,
                                           max_frame_bytes=64 << 20,
                                           tls=client_context(pki.ca))
        try:
            for t in topics:
                batches = [build_batch([(b"%s-%d-%d" % (t.encode(), n, i) + os.urandom(60_000),
                                         None, (), 1000) for i in range(5)]) for n in range(3)]
                resp = await conn.request(m.Produce(acks=-1, producer_id=-1, producer_epoch=-1,
                                                    parts=tuple((t, 0, len(x)) for x in batches),
                                                    payload=batches), 10)
                assert all(p[2] == 0 for p in resp.parts), resp
            fetch = m.Fetch(max_wait_ms=0, max_bytes=64 << 20,
                            parts=tuple((t, 0, 0, 4 << 20) for t in topics))
            first, second = conn.request(fetch, 20), conn.request(m.Handshake(), 20)
            return await first, await second
        finally:
            conn.close()

    resp, after = asyncio.run(go())
    assert isinstance(after, m.HandshakeResponse)  # pipelined behind the big answer
    for part, data in zip(resp.parts, resp.payload):
        assert part[2] == 0, part
        seg, = glob.glob(os.path.join(brokers.tls.data_dir, f"{part[0]}-0", "*.log"))
        with open(seg, "rb") as fh:
            on_disk = fh.read()
        assert len(data) > 180_000 and bytes(data) == on_disk[:len(data)]


# -- failures: each is clear, logged once, and the broker serves on -------------------
def test_a_plaintext_client_is_told_the_listener_may_be_tls(brokers, pki):
    err, _ = failure(brokers.tls.bootstrap, BrokerUnavailableError, timeout_ms=600)
    assert "closed by the broker before answering (is it a TLS listener? then pass tls_ca)" \
        in err.message
    logged(brokers.tls, "failed: wrong version number (a plaintext client?)")
    assert serves(brokers.tls.bootstrap, tls_ca=pki.ca) is not None


def test_an_untrusted_broker_certificate_fails_at_once_with_a_code(brokers, pki):
    before = brokers.tls.log().count("alert unknown ca")
    err, took = failure(brokers.tls.bootstrap, TlsError, tls_ca=pki.other_ca, timeout_ms=5000)
    assert err.code == 1006 and err.name == "TLS_ERROR" and not err.retriable
    assert err.message == (f"TLS handshake with {brokers.tls.bootstrap} failed: certificate "
                           "verify failed: unable to get local issuer certificate")
    assert took < 2.5  # not retried until the 5 s connect timeout
    assert logged(brokers.tls, "alert unknown ca") == before + 1
    assert serves(brokers.tls.bootstrap, tls_ca=pki.ca) is not None


def test_a_stalled_handshake_is_closed_after_the_timeout(brokers, pki):
    with socket.create_connection(("127.0.0.1", brokers.tls.port), timeout=10) as s:
        started = time.monotonic()
        assert s.recv(1) == b""  # closed by the broker (1 s: frame_timeout_ms)
        assert time.monotonic() - started < 8
    logged(brokers.tls, "failed: not completed within 1 s (frame_timeout_ms)")
    assert serves(brokers.tls.bootstrap, tls_ca=pki.ca) is not None


def test_a_tls_client_to_a_plaintext_broker(broker, pki):
    err, _ = failure(broker.bootstrap, BrokerUnavailableError, tls_ca=pki.ca, timeout_ms=600)
    assert "closed during the TLS handshake (a plaintext listener" in err.message
    assert serves(broker.bootstrap) is not None


def test_host_name_mismatch_and_expired_certificates(tmp_path, pki):
    elsewhere = BrokerProcess(tmp_path / "elsewhere", *tls_flags(pki.elsewhere))
    expired = BrokerProcess(tmp_path / "expired", *tls_flags(pki.expired))
    try:
        start_all(elsewhere, expired)
        err, _ = failure(elsewhere.bootstrap, TlsError, tls_ca=pki.ca)
        assert err.message == (f"TLS handshake with {elsewhere.bootstrap} failed: certificate "
                               "verify failed: IP address mismatch, certificate is not valid for "
                               "'127.0.0.1'")
        err, _ = failure(f"localhost:{elsewhere.port}", TlsError, tls_ca=pki.ca)
        assert err.message.endswith("hostname mismatch, certificate is not valid for 'localhost'")
        assert serves(elsewhere.bootstrap, tls_ca=pki.ca, tls_check_hostname=False) is not None
        err, _ = failure(expired.bootstrap, TlsError, tls_ca=pki.ca)
        assert err.message.endswith("certificate verify failed: certificate has expired")
        logged(expired, "TLS handshake with 127.0.0.1:")
    finally:
        elsewhere.kill()
        expired.kill()


def test_mutual_tls_wants_a_client_certificate_from_its_ca(brokers, pki):
    """TLS 1.3: the client's side of the handshake is through before the
    broker checks its certificate; the broker then closes (asyncio sends
    no alert), so the client is told what the broker probably wants."""
    b = brokers.mtls.bootstrap
    hint = "closed by the broker before answering (does it require a client certificate? " \
        "pass tls_cert and tls_key)"
    err, _ = failure(b, BrokerUnavailableError, tls_ca=pki.ca, timeout_ms=600)
    assert hint in err.message
    logged(brokers.mtls, "failed: peer did not return a certificate")
    err, _ = failure(b, BrokerUnavailableError, tls_ca=pki.ca, tls_cert=pki.stranger[0],
                     tls_key=pki.stranger[1], timeout_ms=600)
    assert hint in err.message
    logged(brokers.mtls, "failed: certificate verify failed: unable to get local issuer")
    assert serves(b, tls_ca=pki.ca, tls_cert=pki.client[0], tls_key=pki.client[1]) is not None


def test_bad_tls_files_are_config_errors_before_any_io(pki, tmp_path):
    with pytest.raises(InvalidConfigError, match=r"tls_ca '/nonexistent.pem': cannot read it"):
        Admin("127.0.0.1:1", tls_ca="/nonexistent.pem")
    with pytest.raises(InvalidConfigError, match="not a PEM CA bundle"):
        Producer("127.0.0.1:1", tls_ca=pki.client[1])
    with pytest.raises(InvalidConfigError, match="tls_key does not match tls_cert"):
        Consumer("127.0.0.1:1", tls_ca=pki.ca, tls_cert=pki.client[0], tls_key=pki.stranger[1])
    with pytest.raises(InvalidConfigError, match="tls_key needs tls_cert"):
        Admin("127.0.0.1:1", tls_key=pki.client[1])


# -- the CLI --------------------------------------------------------------------------
def test_cli_commands_take_the_tls_options(brokers, pki):
    b = brokers.tls.bootstrap
    out = invoke_cli(["topics", "create", "cli-tls", "--tls-ca", pki.ca], bootstrap=b)
    assert out.exit_code == 0, out.stderr
    out = invoke_cli(["produce", "cli-tls", "--tls-ca", pki.ca], stdin=b"one\ntwo\n", bootstrap=b)
    assert out.exit_code == 0, out.stderr
    out = invoke_cli(["consume", "cli-tls", "-o", "earliest", "-n", "2", "--tls-ca", pki.ca],
                     bootstrap=b)
    assert out.exit_code == 0 and out.stdout.split() == ["one", "two"], out.stderr
    message = invoked_error(invoke_cli(["topics", "list", "--tls-ca", pki.other_ca], bootstrap=b),
                            "TLS_ERROR")
    assert message.startswith(f"TLS handshake with {b} failed: certificate verify failed")
    message = invoked_error(invoke_cli(["topics", "list"], bootstrap=b, timeout=0.5),
                            "BROKER_UNAVAILABLE")
    assert "is it a TLS listener? then pass tls_ca" in message
    invoked_error(invoke_cli(["groups", "list", "--tls-ca", "/nonexistent.pem"], bootstrap=b),
                  "INVALID_CONFIG")


def test_the_real_cli_fails_with_one_line_and_serve_refuses_bad_files(brokers, pki, tmp_path):
    b = brokers.mtls.bootstrap
    assert "cli-mtls" not in cli_ok(run_cli("topics", "list", "--tls-ca", pki.ca, "--tls-cert",
                                            pki.client[0], "--tls-key", pki.client[1],
                                            bootstrap=b))
    assert "does it require a client certificate?" in cli_error(
        run_cli("topics", "list", "--tls-ca", pki.ca, "--timeout", "0.5", bootstrap=b),
        "BROKER_UNAVAILABLE")
    assert "certificate verify failed" in cli_error(
        run_cli("topics", "list", "--tls-ca", pki.other_ca, bootstrap=b), "TLS_ERROR")
    result = run_cli("serve", "--data-dir", str(tmp_path / "d"), "--port", "0",
                     "--tls-cert", pki.server[0], "--tls-key", pki.client[1], timeout=30)
    err = result.stderr.decode()
    assert result.returncode != 0 and "Traceback" not in err
    assert "error: INVALID_CONFIG: tls_cert" in err and "tls_key does not match tls_cert" in err


@pytest.mark.spark
def test_spark_reads_a_tls_broker_by_bootstrap(spark, brokers, pki):
    """Spark's bootstrap mode takes the clients' TLS options: the driver's
    planning (Admin) and each task's fetches verify the broker against
    ``tls_ca``; the rows are what was produced."""
    pytest.importorskip("pyarrow")
    tls = {"tls_ca": pki.ca}
    with Producer(brokers.tls.bootstrap, **tls) as p:
        for i in range(500):
            p.send("spark-tls", b"v%d" % i, key=b"k%d" % (i % 7))
        p.flush()
    rows = (spark.read.format("logbroker").option("bootstrap", brokers.tls.bootstrap)
            .options(subscribe="spark-tls", **tls).load()
            .selectExpr("offset", "cast(value as string) as v").orderBy("offset").collect())
    assert [(r.offset, r.v) for r in rows] == [(i, f"v{i}") for i in range(500)]


def test_spark_tls_options_are_checked_at_planning(pki, tmp_path):
    from logbroker.spark.options import SparkSourceError, parse_options

    base = {"bootstrap": "127.0.0.1:1", "subscribe": "t"}
    assert dict(parse_options({**base, "tls_CA": pki.ca}).client) == {"tls_ca": pki.ca}
    assert dict(parse_options({**base, "tls_ca": pki.ca, "tls_check_hostname": "false"}).client) \
        == {"tls_ca": pki.ca, "tls_check_hostname": False}
    with pytest.raises(SparkSourceError, match="tls_ca"):
        parse_options({**base, "tls_ca": str(tmp_path / "missing.pem")})
    with pytest.raises(SparkSourceError, match="bootstrap mode"):
        data = tmp_path / "d"
        data.mkdir()
        (data / "meta.lmdb").mkdir()
        parse_options({"path": str(data), "subscribe": "t", "tls_ca": pki.ca})
