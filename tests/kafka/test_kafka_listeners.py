"""Several Kafka listeners on one broker (PLAINTEXT, SSL, SASL_PLAINTEXT,
SASL_SSL: ``--kafka-listener``, docs/kafka.md "Listeners") and the SASL
mechanisms beside SCRAM-SHA-256 (SCRAM-SHA-512, PLAIN over TLS only): each
listener's clients are told that listener's address; kafka-python,
confluent-kafka and KafkaJS produce and consume through them; PLAIN over
plaintext is refused; a wrong password is refused, then throttled."""

from __future__ import annotations

import pathlib
import ssl
import time

import pytest
from scramp import ScramClient
from tests.support.fixtures import BrokerProcess
from tests.support.kafka_raw import WAIT, Raw, kread
from tests.support.kafkajs import run_kafkajs
from tests.support.tls import tls_files

from logbroker import Admin
from logbroker.cli.serve import KAFKA_LISTENER_READY, KAFKA_READY
from logbroker.security.auth_throttle import BURST

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

DORA_PW = "dora-Pa55word"
SAM_256_PW, SAM_512_PW = "sam=256", "sam=512"  # one password per mechanism, as Kafka may keep
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA = 17, 36, 3
LISTENERS = (("PLAIN", "PLAINTEXT"), ("TLS", "SSL"), ("SASL", "SASL_PLAINTEXT"),
             ("SASLTLS", "SASL_SSL"))


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """A broker with four Kafka listeners (``kb.listeners``: name -> HOST:PORT),
    user dora, and a guessing throttle of one failure a second per address."""
    d = tmp_path_factory.mktemp("kafka-listeners")
    ca, cert, key = tls_files(d)
    flags = [f"--kafka-listener=name={name},port=0,security={sec}" for name, sec in LISTENERS]
    b = BrokerProcess(d / "data", "--tls-cert", str(cert), "--tls-key", str(key),
                      "--log-level", "debug", *flags,
                      config={"auth_failures_per_s_per_ip": 1}).start()
    try:
        first = b.proc.stdout.readline().strip()
        assert first.startswith(KAFKA_READY), first
        b.listeners = {"PLAIN": first[len(KAFKA_READY):]}
        for _ in LISTENERS[1:]:
            name, address = b.proc.stdout.readline()[len(KAFKA_LISTENER_READY):].split()
            b.listeners[name] = address
        b.ca = str(ca)
        with Admin(b.bootstrap, tls_ca=b.ca) as admin:
            admin.create_user("dora", DORA_PW)
            admin.create_user("sam", SAM_256_PW, sha512_password=SAM_512_PW)
            admin.create_topic("lt", 1)
        yield b
        assert "Traceback" not in b.log()
    finally:
        b.stop()


def tls_socket(raw: Raw, ca: str) -> Raw:
    raw.sock = ssl.create_default_context(cafile=ca).wrap_socket(raw.sock,
                                                               server_hostname="127.0.0.1")
    return raw


def test_each_listener_names_its_own_addresses(kb):
    """Metadata on a listener lists the broker at that listener's port
    (Kafka's rule), read by a raw client on PLAINTEXT and by kafka-python
    over SSL, which then produce and read back."""
    raw = Raw(kb.listeners["PLAIN"])
    try:
        raw.sock.sendall(raw.send(METADATA, 1, 1, {"topics": []}))
        brokers = raw.recv(METADATA, 1)[1].brokers
        assert [f"{x.host}:{x.port}" for x in brokers] == [kb.listeners["PLAIN"]]
    finally:
        raw.close()
    tls = dict(bootstrap_servers=kb.listeners["TLS"], security_protocol="SSL",
               ssl_cafile=kb.ca)
    p = KafkaProducer(acks="all", **tls)
    try:
        assert p.send("lt", b"over-ssl", partition=0).get(timeout=WAIT).offset == 0
        seen = {f"{n.host}:{n.port}" for n in p._metadata.brokers()}
        assert seen == {kb.listeners["TLS"]}
    finally:
        p.close(timeout=WAIT)
    c = KafkaConsumer(group_id=None, **tls)
    try:
        c.assign([TopicPartition("lt", 0)])
        c.seek(TopicPartition("lt", 0), 0)
        assert [r.value for r in kread(c, 1)] == [b"over-ssl"]
    finally:
        c.close()


def test_sasl_listener_refuses_anonymous_requests(kb):
    """A SASL_PLAINTEXT listener closes an unauthenticated Metadata unanswered."""
    raw = Raw(kb.listeners["SASL"])
    try:
        raw.sock.sendall(raw.send(METADATA, 1, 1, {"topics": []}))
        assert raw.closed_by_peer()
    finally:
        raw.close()


def test_confluent_scram_sha_512_on_sasl_plaintext(kb):
    ck = pytest.importorskip("confluent_kafka")
    conf = {"bootstrap.servers": kb.listeners["SASL"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "dora",
            "sasl.password": DORA_PW}
    p = ck.Producer(conf)
    p.produce("sha512", b"v512", partition=0)
    assert p.flush(WAIT) == 0
    p.close()
    c = ck.Consumer({**conf, "group.id": "unused", "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition("sha512", 0, 0)])
        got, deadline = None, time.monotonic() + WAIT
        while got is None and time.monotonic() < deadline:
            got = c.poll(0.2)
        assert got is not None and got.error() is None and got.value() == b"v512"
        brokers = c.list_topics("sha512", timeout=WAIT).brokers
        assert {f"{x.host}:{x.port}" for x in brokers.values()} == {kb.listeners["SASL"]}
    finally:
        c.close()


def scram_attempt(kb, mechanism: str, user: str, password: str) -> int:
    """One whole SCRAM exchange on the SASL_PLAINTEXT listener: the final step's error code."""
    raw, client = Raw(kb.listeners["SASL"]), ScramClient([mechanism], user, password)
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": mechanism}))
        assert raw.recv(SASL_HANDSHAKE, 1)[1].error_code == 0
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 2,
                                  {"auth_bytes": client.get_client_first().encode()}))
        client.set_server_first(raw.recv(SASL_AUTHENTICATE, 1)[1].auth_bytes.decode())
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 3,
                                  {"auth_bytes": client.get_client_final().encode()}))
        return raw.recv(SASL_AUTHENTICATE, 1)[1].error_code
    finally:
        raw.close()


def test_one_password_per_mechanism(kb):
    """A user made with a SCRAM-SHA-512 password of its own (as KafkaJS's
    test users are): each mechanism takes its password and not the other."""
    assert scram_attempt(kb, "SCRAM-SHA-256", "sam", SAM_256_PW) == 0
    assert scram_attempt(kb, "SCRAM-SHA-512", "sam", SAM_512_PW) == 0
    assert scram_attempt(kb, "SCRAM-SHA-512", "sam", SAM_256_PW) == 58


def test_kafkajs_plain_over_sasl_ssl(kb):
    got = run_kafkajs("""
const producer = kafka.producer(); await producer.connect();
await producer.send({ topic: 'plain-tls', messages: [{ value: 'p1' }, { value: 'p2' }] });
await producer.disconnect();
const consumer = kafka.consumer({ groupId: 'plain-tls-g', maxWaitTimeInMs: 100 });
await consumer.connect(); await consumer.subscribe({ topic: 'plain-tls', fromBeginning: true });
const seen = [];
await new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('timed out with ' + seen.length)), 20000);
  consumer.run({ eachMessage: async ({ message }) => {
    seen.push(message.value.toString());
    if (seen.length >= 2) { clearTimeout(timer); resolve(); } } });
});
await consumer.disconnect();
out(seen.sort());
""", [kb.listeners["SASLTLS"]], client={
        "ssl": {"ca": [pathlib.Path(kb.ca).read_text()], "servername": "127.0.0.1"},
        "sasl": {"mechanism": "plain", "username": "dora", "password": DORA_PW}})
    assert got == ["p1", "p2"]


def test_plain_over_plaintext_is_refused(kb):
    """UNSUPPORTED_SASL_MECHANISM (33) listing the SCRAM mechanisms, then the
    connection closes; the broker says why at debug level."""
    raw = Raw(kb.listeners["SASL"])
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        answer = raw.recv(SASL_HANDSHAKE, 1)[1]
        assert answer.error_code == 33
        assert answer.mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
        assert raw.closed_by_peer()
    finally:
        raw.close()
    assert "offered over TLS only" in kb.log()


def test_plain_after_a_v0_handshake_takes_a_raw_token(kb):
    """SaslHandshake v0 (old clients): the PLAIN message follows as a raw
    size-prefixed frame, answered by an empty one, then requests are served."""
    raw = tls_socket(Raw(kb.listeners["SASLTLS"]), kb.ca)
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 0, 1, {"mechanism": "PLAIN"}))
        assert raw.recv(SASL_HANDSHAKE, 0)[1].error_code == 0
        token = b"\0dora\0" + DORA_PW.encode()
        raw.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert raw.sock.recv(4) == b"\0\0\0\0"
        raw.sock.sendall(raw.send(METADATA, 1, 2, {"topics": []}))
        brokers = raw.recv(METADATA, 1)[1].brokers
        assert [f"{x.host}:{x.port}" for x in brokers] == [kb.listeners["SASLTLS"]]
    finally:
        raw.close()


def plain_attempt(kb, password: str):
    """One SASL PLAIN exchange over the SASL_SSL listener: its answer."""
    raw = tls_socket(Raw(kb.listeners["SASLTLS"]), kb.ca)
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "PLAIN"}))
        assert raw.recv(SASL_HANDSHAKE, 1)[1].mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512",
                                                             "PLAIN")
        token = b"\0dora\0" + password.encode()
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 2, {"auth_bytes": token}))
        return raw.recv(SASL_AUTHENTICATE, 1)[1]
    finally:
        raw.close()


def test_wrong_password_is_refused_then_throttled(kb):
    """SASL_AUTHENTICATION_FAILED (58) for a wrong PLAIN password; after the
    throttle's burst (5, then one failure a second per address here) an
    attempt is refused before its password is looked at, naming the limit,
    a SCRAM-SHA-512 one as well; the right password passes again once the
    window has passed."""
    first = plain_attempt(kb, "wrong")
    assert first.error_code == 58 and "throttled" not in first.error_message
    answers = [plain_attempt(kb, "wrong") for _ in range(BURST)]
    assert all(a.error_code == 58 for a in answers)
    assert "throttled" in answers[-1].error_message
    raw = Raw(kb.listeners["SASL"])
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "SCRAM-SHA-512"}))
        assert raw.recv(SASL_HANDSHAKE, 1)[1].error_code == 0
        hello = ScramClient(["SCRAM-SHA-512"], "dora", DORA_PW).get_client_first()
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 2, {"auth_bytes": hello.encode()}))
        answer = raw.recv(SASL_AUTHENTICATE, 1)[1]
        assert answer.error_code == 58 and "throttled" in answer.error_message
    finally:
        raw.close()
    deadline = time.monotonic() + WAIT
    while (answer := plain_attempt(kb, DORA_PW)).error_code and time.monotonic() < deadline:
        time.sleep(0.2)  # polling the throttle's window (bounded), not synchronising
    assert answer.error_code == 0


@pytest.mark.slow  # etcd and three brokers: ~5-9 s (the registration logic has fast tests)
def test_cluster_brokers_register_each_listener(tmp_path):
    """Three brokers with listeners A and B each, joined through etcd:
    Metadata on any broker's B lists every broker at its B address, on A at
    its A address (each broker registers its named listeners)."""
    from tests.support.cluster import EtcdProcess, require_etcd
    from tests.support.fixtures import Cluster, wait_until
    from tests.support.kafka_cluster import metadata

    require_etcd()
    flags = ("--kafka-listener=name=A,port=0", "--kafka-listener=name=B,port=0")
    with EtcdProcess(tmp_path / "etcd") as etcd:
        cluster = Cluster(tmp_path, etcd.url, n=3, extra=flags)
        try:
            cluster.start()
            on = {"A": {}, "B": {}}
            for i, b in cluster.brokers.items():
                line = b.proc.stdout.readline().strip()
                on["A"][i] = line[len(KAFKA_READY):]
                name, address = b.proc.stdout.readline()[len(KAFKA_LISTENER_READY):].split()
                on[name][i] = address
            for name in ("A", "B"):
                want = sorted(on[name].items())
                for i in cluster.brokers:
                    wait_until(lambda: sorted((x.node_id, f"{x.host}:{x.port}") for x in
                                              metadata(on[name][i], []).brokers) == want,
                               10, f"broker {i}'s listener {name} lists every broker's {name}")
        finally:
            cluster.close()
