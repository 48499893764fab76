"""SASL/SCRAM-SHA-256 and ACLs on the Kafka listener (docs/kafka.md,
"Security"), against one broker with --auth-required and
super_users = ["User:admin"]: alice may read, write and describe topic
``kt``; bob may describe it only; ``secret`` is nobody's but admin's.
kafka-python in the dev extra (skipped without it)."""

from __future__ import annotations

import urllib.request

import pytest
from tests.support.fixtures import BrokerProcess, invoke_cli, invoked_ok
from tests.support.kafka_raw import WAIT, Raw, kafka_and_metrics, kread
from scramp import ScramClient

from logbroker import Admin
from logbroker.client.admin.results import Acl

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.errors import TopicAuthorizationFailedError  # noqa: E402

ADMIN_PW, ALICE_PW, BOB_PW = "admin-Pa55word", "alice-Pa55word", "bob-Pa55word"
SASL_HANDSHAKE, SASL_AUTHENTICATE, METADATA, LIST_OFFSETS = 17, 36, 3, 2
FIND_COORDINATOR = 10


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """The broker, its Kafka bootstrap (``kb.kafka``) and metrics URL."""
    data = tmp_path_factory.mktemp("kafka-auth") / "data"
    b = BrokerProcess(data, "--auth-required", "--kafka-port", "0", "--metrics-port", "0",
                      config={"super_users": ["User:admin"]}).start()
    try:
        kafka_and_metrics(b)
        invoked_ok(invoke_cli(["users", "add", "admin", "--user-password-stdin"],
                              stdin=ADMIN_PW + "\n", bootstrap=b.bootstrap))
        with admin_of(b) as admin:
            admin.create_user("alice", ALICE_PW)
            admin.create_user("bob", BOB_PW)
            admin.create_topic("kt", 1)
            admin.create_topic("secret", 1)
            admin.create_acls([Acl("User:alice", "topic", "kt", "literal", op)
                               for op in ("read", "write", "describe")]
                              + [Acl("User:bob", "topic", "kt", "literal", "describe")])
        yield b
    finally:
        b.stop()


def admin_of(b) -> Admin:
    return Admin(b.bootstrap, username="admin", password=ADMIN_PW)


def sasl(user: str, password: str) -> dict:
    return dict(security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-256",
                sasl_plain_username=user, sasl_plain_password=password)


def metric(b, name: str) -> float:
    with urllib.request.urlopen(b.metrics_url, timeout=WAIT) as resp:
        text = resp.read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(name) and not line.startswith("#"))


def authed(b, user: str = "alice", password: str = ALICE_PW) -> Raw:
    """A raw Kafka connection through SaslHandshake v1 + SaslAuthenticate."""
    raw, client = Raw(b.kafka), ScramClient(["SCRAM-SHA-256"], user, password)
    raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "SCRAM-SHA-256"}))
    assert raw.recv(SASL_HANDSHAKE, 1)[1].error_code == 0
    raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 2,
                              {"auth_bytes": client.get_client_first().encode()}))
    first = raw.recv(SASL_AUTHENTICATE, 1)[1]
    assert first.error_code == 0, first
    client.set_server_first(first.auth_bytes.decode())
    raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 1, 3,
                              {"auth_bytes": client.get_client_final().encode()}))
    final = raw.recv(SASL_AUTHENTICATE, 1)[1]
    assert final.error_code == 0, final
    client.set_server_final(final.auth_bytes.decode())  # the broker proved it knows the key
    return raw


def test_kafka_python_produces_and_consumes_with_scram(kb):
    p = KafkaProducer(bootstrap_servers=kb.kafka, acks="all", **sasl("alice", ALICE_PW))
    try:
        assert p.send("kt", value=b"a1", partition=0).get(timeout=WAIT).offset == 0
    finally:
        p.close(timeout=WAIT)
    c = KafkaConsumer(bootstrap_servers=kb.kafka, group_id=None, **sasl("alice", ALICE_PW))
    try:
        c.assign([TopicPartition("kt", 0)])
        c.seek(TopicPartition("kt", 0), 0)
        assert [r.value for r in kread(c, 1)] == [b"a1"]
    finally:
        c.close()


def test_wrong_password_fails_authentication_and_closes(kb):
    """SASL_AUTHENTICATION_FAILED (58), then the connection closes (as Kafka;
    kafka-python reports it as SaslAuthenticationFailedError and retries
    its bootstrap with backoff, too slowly for a test)."""
    before = metric(kb, "logbroker_auth_failures_total")
    raw, client = Raw(kb.kafka), ScramClient(["SCRAM-SHA-256"], "alice", "wrong")
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 1, 1, {"mechanism": "SCRAM-SHA-256"}))
        assert raw.recv(SASL_HANDSHAKE, 1)[1].mechanisms == ("SCRAM-SHA-256", "SCRAM-SHA-512")
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 0, 2,
                                  {"auth_bytes": client.get_client_first().encode()}))
        client.set_server_first(raw.recv(SASL_AUTHENTICATE, 0)[1].auth_bytes.decode())
        raw.sock.sendall(raw.send(SASL_AUTHENTICATE, 0, 3,
                                  {"auth_bytes": client.get_client_final().encode()}))
        final = raw.recv(SASL_AUTHENTICATE, 0)[1]
        assert final.error_code == 58 and final.auth_bytes == b""  # SASL_AUTHENTICATION_FAILED
        assert raw.closed_by_peer()
    finally:
        raw.close()
    assert metric(kb, "logbroker_auth_failures_total") >= before + 1


def test_produce_needs_the_write_acl(kb):
    p = KafkaProducer(bootstrap_servers=kb.kafka, acks="all", retries=0, **sasl("bob", BOB_PW))
    try:
        before = metric(kb, "logbroker_authorization_denials_total")
        with pytest.raises(TopicAuthorizationFailedError):
            p.send("kt", value=b"b-denied", partition=0).get(timeout=WAIT)
        assert metric(kb, "logbroker_authorization_denials_total") >= before + 1
        with admin_of(kb) as admin:
            admin.create_acls([Acl("User:bob", "topic", "kt", "literal", "write")])
        assert p.send("kt", value=b"b-ok", partition=0).get(timeout=WAIT).offset >= 1
    finally:
        p.close(timeout=WAIT)


def test_anonymous_requests_close_the_connection(kb):
    before = metric(kb, "logbroker_auth_failures_total")
    raw = Raw(kb.kafka)
    try:
        raw.sock.sendall(raw.send(18, 2, 1, {}))  # ApiVersions is answered before SASL
        versions = raw.recv(18, 2)[1]
        assert {(k.api_key, k.max_version) for k in versions.api_keys} >= {(17, 1), (36, 1)}
        raw.sock.sendall(raw.send(METADATA, 1, 2, {"topics": None}))
        assert raw.closed_by_peer()
    finally:
        raw.close()
    assert metric(kb, "logbroker_auth_failures_total") >= before + 1


def test_metadata_narrowed_list_offsets_and_group_denied(kb):
    raw = authed(kb)
    try:
        raw.sock.sendall(raw.send(METADATA, 1, 4, {"topics": None}))
        assert [t.name for t in raw.recv(METADATA, 1)[1].topics] == ["kt"]
        raw.sock.sendall(raw.send(LIST_OFFSETS, 1, 5, {"replica_id": -1, "topics": [
            {"name": n, "partitions": [{"partition_index": 0, "timestamp": -1}]}
            for n in ("secret", "kt")]}))
        got = {t.name: t.partitions[0].error_code for t in raw.recv(LIST_OFFSETS, 1)[1].topics}
        assert got == {"secret": 29, "kt": 0}  # TOPIC_AUTHORIZATION_FAILED for secret alone
        raw.sock.sendall(raw.send(FIND_COORDINATOR, 1, 6, {"key": "g-alice", "key_type": 0}))
        found = raw.recv(FIND_COORDINATOR, 1)[1]  # no ACL on the group
        assert found.error_code == 30 and "may not describe group" in found.error_message
    finally:
        raw.close()


def test_group_administration_follows_kafkas_acl_rules(kb):
    """ListGroups without describe on the cluster lists the groups the
    principal may describe (Kafka's rule; our listener refuses it);
    DescribeGroups and DeleteGroups need describe / delete on the group."""
    describe, list_, delete = 15, 16, 42
    with admin_of(kb) as admin:
        for group in ("ga-alice", "ga-other"):
            admin.commit_offsets(group, {("kt", 0): 0})
        admin.create_acls([Acl("User:alice", "group", "ga-alice", "literal", "describe")])
    raw, root = authed(kb), authed(kb, "admin", ADMIN_PW)
    try:
        raw.sock.sendall(raw.send(list_, 2, 4, {}))
        listed = raw.recv(list_, 2)[1]
        assert listed.error_code == 0 and [g.group_id for g in listed.groups] == ["ga-alice"]
        root.sock.sendall(root.send(list_, 0, 4, {}))  # a super user: every group
        assert {"ga-alice", "ga-other"} <= {g.group_id for g in root.recv(list_, 0)[1].groups}
        raw.sock.sendall(raw.send(describe, 4, 5, {"groups": ["ga-alice"]}))
        got = raw.recv(describe, 4)[1].groups[0]
        assert (got.error_code, got.group_state) == (0, "Empty")
        raw.sock.sendall(raw.send(describe, 4, 6, {"groups": ["ga-other", "ga-alice"]}))
        assert [g.error_code for g in raw.recv(describe, 4)[1].groups] == [30, 30]  # refused whole
        raw.sock.sendall(raw.send(delete, 1, 7, {"groups_names": ["ga-alice"]}))
        assert [r.error_code for r in raw.recv(delete, 1)[1].results] == [30]
        with admin_of(kb) as admin:
            admin.create_acls([Acl("User:alice", "group", "ga-alice", "literal", "delete")])
        raw.sock.sendall(raw.send(delete, 1, 8, {"groups_names": ["ga-alice"]}))
        assert [r.error_code for r in raw.recv(delete, 1)[1].results] == [0]
    finally:
        raw.close()
        root.close()


def test_sasl_handshake_v0_takes_raw_tokens(kb):
    raw, client = Raw(kb.kafka), ScramClient(["SCRAM-SHA-256"], "alice", ALICE_PW)
    try:
        raw.sock.sendall(raw.send(SASL_HANDSHAKE, 0, 1, {"mechanism": "SCRAM-SHA-256"}))
        assert raw.recv(SASL_HANDSHAKE, 0)[1].error_code == 0
        for step in (client.get_client_first, client.get_client_final):
            token = step().encode()
            raw.sock.sendall(len(token).to_bytes(4, "big") + token)
            while (frame := raw.reader.next_frame()) is None:
                raw.reader.receive_data(raw.sock.recv(65536))
            reply = bytes(frame).decode()
            if step == client.get_client_first:
                client.set_server_first(reply)
            else:
                client.set_server_final(reply)
        raw.sock.sendall(raw.send(METADATA, 1, 2, {"topics": [{"name": "kt"}]}))
        assert [t.name for t in raw.recv(METADATA, 1)[1].topics] == ["kt"]
    finally:
        raw.close()


def test_every_topic_answers_keep_to_what_the_principal_may_describe(kb):
    """A group alice may read and describe holds offsets of ``kt`` and of
    ``secret``: an OffsetFetch of every topic (null topics), on both
    listeners, and DescribeGroups' offset rows name ``kt`` only (Kafka
    filters the all-topics OffsetFetch by describe on each topic), and the
    all-topics Metadata leaves ``secret`` out too. A super user sees both."""
    from kafka import KafkaAdminClient

    both = {("kt", 0): 3, ("secret", 0): 7}
    with admin_of(kb) as admin:
        admin.commit_offsets("g-all", both)
        admin.create_acls([Acl("User:alice", "group", "g-all", "literal", op)
                           for op in ("read", "describe")])
        assert set(admin.fetch_offsets("g-all")) == set(both)
    with Admin(kb.bootstrap, username="alice", password=ALICE_PW) as alice:
        got = alice.fetch_offsets("g-all")
        assert {tp: o.offset for tp, o in got.items()} == {("kt", 0): 3}
        rows = alice.describe_groups(["g-all"])["g-all"].partitions
        assert [(r.topic, r.partition, r.committed) for r in rows] == [("kt", 0, 3)]
        assert alice.fetch_offsets("g-all", [("kt", 0)])[("kt", 0)].offset == 3
    client = KafkaAdminClient(bootstrap_servers=kb.kafka, request_timeout_ms=WAIT * 1000,
                              **sasl("alice", ALICE_PW))
    try:
        got = client.list_group_offsets({"g-all": None})["g-all"]  # OffsetFetch, topics null
        assert {(tp.topic, tp.partition): o.offset for tp, o in got.items()} == {("kt", 0): 3}
        assert "secret" not in client.list_topics() and "kt" in client.list_topics()
    finally:
        client.close()
    client = KafkaAdminClient(bootstrap_servers=kb.kafka, request_timeout_ms=WAIT * 1000,
                              **sasl("admin", ADMIN_PW))
    try:
        got = client.list_group_offsets({"g-all": None})["g-all"]
        assert {(tp.topic, tp.partition): o.offset for tp, o in got.items()} == both
    finally:
        client.close()
