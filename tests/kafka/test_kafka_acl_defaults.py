"""Kafka's authorizer settings on a real broker (docs/security.md,
"Authorization"): a PLAINTEXT and a SASL_SSL Kafka listener, no
auth_required, ``allow_everyone_if_no_acl_found = true`` and super user
admin, as KafkaJS's own suite runs Kafka. Anonymous and SASL users use a
topic no ACL names; once ACLs name a topic (made by KafkaJS and by
confluent-kafka) only they decide: bob denied, alice allowed, anonymous
(``User:ANONYMOUS``) denied until a binding names it."""

from __future__ import annotations

import pathlib

import pytest
from tests.support.fixtures import BrokerProcess
from tests.support.kafka_raw import WAIT, Raw, kread
from tests.support.kafkajs import run_kafkajs
from tests.support.tls import tls_files

from logbroker import Admin
from logbroker.cli.serve import KAFKA_LISTENER_READY, KAFKA_READY

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402

PASSWORDS = {"admin": "admin-Pa55", "bob": "bobbob", "alice": "alicealice"}
METADATA = 3


@pytest.fixture(scope="module")
def ab(tmp_path_factory):
    """The broker (``ab.listeners``: PLAIN and SASLTLS -> HOST:PORT, ``ab.ca``),
    users admin, bob and alice, topics ``free`` and ``guarded``."""
    d = tmp_path_factory.mktemp("acl-defaults")
    ca, cert, key = tls_files(d)
    b = BrokerProcess(d / "data", "--tls-cert", str(cert), "--tls-key", str(key),
                      "--log-level", "debug",
                      "--kafka-listener=name=PLAIN,port=0,security=PLAINTEXT",
                      "--kafka-listener=name=SASLTLS,port=0,security=SASL_SSL",
                      config={"allow_everyone_if_no_acl_found": True,
                              "super_users": ["User:admin"]}).start()
    try:
        first = b.proc.stdout.readline().strip()
        assert first.startswith(KAFKA_READY), first
        name, address = b.proc.stdout.readline()[len(KAFKA_LISTENER_READY):].split()
        b.listeners, b.ca = {"PLAIN": first[len(KAFKA_READY):], name: address}, str(ca)
        with Admin(b.bootstrap, tls_ca=b.ca) as admin:  # anonymous: no ACL names the cluster
            for user, password in PASSWORDS.items():
                admin.create_user(user, password)
            admin.create_topic("free", 1)
            admin.create_topic("guarded", 1)
            admin.create_topic("gz", 1)
        yield b
        assert "Traceback" not in b.log()
    finally:
        b.stop()


def sasl(ab, user: str) -> dict:
    return dict(bootstrap_servers=ab.listeners["SASLTLS"], security_protocol="SASL_SSL",
                ssl_cafile=ab.ca, sasl_mechanism="SCRAM-SHA-256", sasl_plain_username=user,
                sasl_plain_password=PASSWORDS[user])


def topic_error(ab, topic: str) -> int:
    """The error code of ``topic`` in an anonymous Metadata on the PLAINTEXT listener."""
    raw = Raw(ab.listeners["PLAIN"])
    try:
        raw.sock.sendall(raw.send(METADATA, 1, 1, {"topics": [{"name": topic}]}))
        return raw.recv(METADATA, 1)[1].topics[0].error_code
    finally:
        raw.close()


def test_anonymous_and_sasl_users_use_a_topic_no_acl_names(ab):
    """ACLs are enforced (no auth_required), yet with no binding for ``free``
    an anonymous producer, bob over SASL_SSL and an anonymous consumer all
    use it."""
    for conf in ({"bootstrap_servers": ab.listeners["PLAIN"]}, sasl(ab, "bob")):
        p = KafkaProducer(**conf)
        try:
            p.send("free", b"from " + conf.get("sasl_plain_username", "anonymous").encode()
                   ).get(timeout=WAIT)
        finally:
            p.close()
    c = KafkaConsumer(bootstrap_servers=ab.listeners["PLAIN"])
    try:
        c.assign([TopicPartition("free", 0)])
        c.seek(TopicPartition("free", 0), 0)
        assert sorted(r.value for r in kread(c, 2)) == [b"from anonymous", b"from bob"]
    finally:
        c.close()


def test_once_a_topic_has_acls_they_decide_for_users_and_anonymous(ab):
    """KafkaJS (its own suite's "checks topic access"): admin binds DENY all
    for bob and ALLOW all for alice on ``guarded``; bob's Metadata is
    refused, alice's served; anonymous is refused (29) until confluent-kafka
    adds a binding for User:ANONYMOUS."""
    users = {u: {"ssl": {"ca": [pathlib.Path(ab.ca).read_text()], "servername": "127.0.0.1"},
                 "sasl": {"mechanism": "scram-sha-256", "username": u, "password": pw}}
             for u, pw in PASSWORDS.items()}
    got = run_kafkajs("""
const as = (user) => new K.Kafka({ clientId: user, brokers: args.brokers,
  logLevel: K.logLevel.NOTHING, retry: { retries: 0 }, ...args.users[user] }).admin();
const admin = as('admin'); await admin.connect();
const binding = (principal, permissionType) => ({ resourceType: K.AclResourceTypes.TOPIC,
  resourceName: 'guarded', resourcePatternType: K.ResourcePatternTypes.LITERAL, principal,
  host: '*', operation: K.AclOperationTypes.ALL, permissionType });
const created = await admin.createAcls({ acl: [
  binding('User:bob', K.AclPermissionTypes.DENY), binding('User:alice', K.AclPermissionTypes.ALLOW)] });
await admin.disconnect();
const result = { created };
for (const user of ['bob', 'alice']) {
  const a = as(user); await a.connect();
  try {
    const md = await a.fetchTopicMetadata({ topics: ['guarded'] });
    result[user] = md.topics.map((t) => t.name);
  } catch (e) { result[user] = e.type || e.message; }
  await a.disconnect();
}
out(result);
""", [ab.listeners["SASLTLS"]], args={"users": users})
    assert got == {"created": True, "bob": "TOPIC_AUTHORIZATION_FAILED", "alice": ["guarded"]}
    assert topic_error(ab, "guarded") == 29  # a binding exists, none for User:ANONYMOUS
    assert topic_error(ab, "free") == 0
    assert "(User:ANONYMOUS) denied Metadata: describe on topic 'guarded'" in ab.log()

    pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)
    a = AdminClient({"bootstrap.servers": ab.listeners["SASLTLS"], "security.protocol": "SASL_SSL",
                     "ssl.ca.location": ab.ca, "sasl.mechanisms": "SCRAM-SHA-256",
                     "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})
    anyone = AclBinding(ResourceType.TOPIC, "guarded", ResourcePatternType.LITERAL,
                        "User:ANONYMOUS", "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    assert a.create_acls([anyone])[anyone].result(timeout=WAIT) is None
    assert topic_error(ab, "guarded") == 0


def test_compressed_batches_with_acls_enforced(ab):
    """ACLs enforced, so the Produce handler looks for a transactional bit
    in batches without a transactional id: a compressed batch reaches it
    checked off the loop (an ``Inspected`` part) and is appended as any
    other (KafkaJS's own suite: "consume GZIP messages"; once answered
    UNKNOWN_SERVER_ERROR). KafkaJS sends a GZIP batch and kafka-python a
    gzip batch and a legacy (v0) message set; all are read back."""
    got = run_kafkajs("""
const p = kafka.producer(); await p.connect();
const sent = await p.send({ topic: 'gz', compression: K.CompressionTypes.GZIP,
  messages: [{ value: 'kafkajs-1' }, { value: 'kafkajs-2' }] });
await p.disconnect();
out(sent.map((r) => r.errorCode));
""", [ab.listeners["PLAIN"]])
    assert got == [0]
    for conf in ({"compression_type": "gzip"}, {"compression_type": "gzip", "api_version": (0, 9)}):
        p = KafkaProducer(bootstrap_servers=ab.listeners["PLAIN"], **conf)
        try:
            p.send("gz", str(conf.get("api_version", "v2")).encode(), partition=0).get(timeout=WAIT)
        finally:
            p.close()
    c = KafkaConsumer(bootstrap_servers=ab.listeners["PLAIN"])
    try:
        c.assign([TopicPartition("gz", 0)])
        c.seek(TopicPartition("gz", 0), 0)
        assert sorted(r.value for r in kread(c, 4)) == [b"(0, 9)", b"kafkajs-1", b"kafkajs-2",
                                                         b"v2"]
    finally:
        c.close()
