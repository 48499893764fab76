"""Authorization against a real broker with --auth-required and
super_users = ["User:admin"] on 127.0.0.1 (docs/security.md,
"Authorization"): every request kind is denied to alice without its ACL,
with the stable code, and allowed once the ACL is added; denials are
counted in the metrics; ACLs through the CLI and the clients."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import urllib.request

import pytest
from tests.support.fixtures import BrokerProcess, RawConn, batch, consume, invoke_cli, invoked_error, invoked_ok, wait_until
from scramp import ScramClient

from logbroker import Admin, Consumer, Producer
from logbroker.security.acl_rules import RULES
from logbroker.client.admin.results import Acl
from logbroker.client.net.auth import user_credentials
from logbroker.errors import GroupAuthorizationFailedError, TopicAuthorizationFailedError
from logbroker.protocol import messages as m

ADMIN_PW, ALICE_PW = "admin-Pa55word", "alice-Pa55word"
ALICE = "User:alice"
TOPIC, GROUP, CLUSTER, TXN = 29, 30, 31, 53
AUTHZ = (TOPIC, GROUP, CLUSTER, TXN)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """admin (a super user, created by the bootstrap rule), alice (no ACL),
    topics orders and victim (made by admin)."""
    data = tmp_path_factory.mktemp("acl") / "data"
    b = BrokerProcess(data, "--auth-required", "--metrics-port", "0",
                      config={"super_users": ["User:admin"]}).start()
    b.metrics_url = b.proc.stdout.readline().split()[-1]
    try:
        invoked_ok(invoke_cli(["users", "add", "admin", "--user-password-stdin"],
                              stdin=ADMIN_PW + "\n", bootstrap=b.bootstrap))
        with admin_of(b) as admin:
            admin.create_user("alice", ALICE_PW)
            admin.create_topic("orders", 1)
            admin.create_topic("victim", 1)
        yield b
    finally:
        b.stop()


def admin_of(b) -> Admin:
    return Admin(b.bootstrap, username="admin", password=ADMIN_PW)


def authed(port: int, user: str = "alice", password: str = ALICE_PW) -> RawConn:
    """A raw connection that completed its SCRAM exchange as ``user``."""
    conn = RawConn(port)
    assert conn.call(m.Handshake()).error == 0
    client = ScramClient(["SCRAM-SHA-256"], user, password)
    assert conn.call(m.SaslHandshake(mechanism="SCRAM-SHA-256")).error == 0
    first = conn.call(m.SaslAuthenticate(auth_bytes=client.get_client_first().encode()))
    client.set_server_first(first.auth_bytes.decode())
    final = conn.call(m.SaslAuthenticate(auth_bytes=client.get_client_final().encode()))
    assert final.error == 0 and final.principal == f"User:{user}", final
    return conn


def _cred():
    salt, stored, server, n = user_credentials("pw-eve", 4096)
    return dict(salt=salt, stored_key=stored, server_key=server, iterations=n)


def acl(rtype, name, op, pattern="literal") -> Acl:
    return Acl(ALICE, rtype, name, pattern, op)


BATCH = batch([b"a", b"b"])
# request, what it is denied with, the ACLs that allow it
CASES = [
    (m.Metadata(topics=("orders",)), TOPIC, [acl("topic", "orders", "describe")]),
    (m.CreateTopics(topics=(("alice-new", 1, {}),)), TOPIC,
     [acl("topic", "alice-", "create", "prefix")]),
    (m.DeleteTopics(topics=("victim",)), TOPIC, [acl("topic", "victim", "delete")]),
    (m.DescribeTopics(topics=("orders",)), TOPIC, [acl("topic", "orders", "describe")]),
    (m.Produce(acks=1, parts=(("orders", 0, len(BATCH)),), payload=(BATCH,)), TOPIC,
     [acl("topic", "orders", "write")]),
    (m.Produce(acks=1, parts=(("orders", 0, len(BATCH)),), payload=(BATCH,),
               transactional_id="t-p"), TXN,
     [acl("transactional_id", "t-p", "write"), acl("topic", "orders", "write")]),
    (m.Fetch(max_wait_ms=0, parts=(("orders", 0, 0, 1 << 20),)), TOPIC,
     [acl("topic", "orders", "read")]),
    (m.ListOffsets(parts=(("orders", 0, -1),)), TOPIC, [acl("topic", "orders", "describe")]),
    (m.CommitOffsets(group="g1", offsets=(("orders", 0, 1, ""),)), GROUP,
     [acl("group", "g1", "read"), acl("topic", "orders", "read")]),
    (m.FetchOffsets(group="g1"), GROUP, [acl("group", "g1", "describe")]),
    (m.ListGroups(), CLUSTER, [acl("cluster", "logbroker", "describe")]),
    (m.DescribeGroups(groups=("g1",)), GROUP, [acl("group", "g1", "describe")]),
    (m.DeleteGroups(groups=("g-gone",)), GROUP, [acl("group", "g-gone", "delete")]),
    (m.FindCoordinator(group="g1"), GROUP, [acl("group", "g", "describe", "prefix")]),
    (m.JoinGroup(group="g-join", session_timeout_ms=6000, rebalance_timeout_ms=1000,
                 protocol_type="consumer", protocols=(("range", b""),)), GROUP,
     [acl("group", "g-join", "read")]),
    (m.SyncGroup(group="g1", generation=1, member_id="nobody"), GROUP,
     [acl("group", "g1", "read")]),
    (m.Heartbeat(group="g1", generation=1, member_id="nobody"), GROUP,
     [acl("group", "g1", "all")]),
    (m.LeaveGroup(group="g1", members=(("nobody", None),)), GROUP, [acl("group", "g1", "read")]),
    (m.ConsumerGroupHeartbeat(group="g-848", member_epoch=0, rebalance_timeout_ms=1000,
                              topic_names=("orders",)), GROUP, [acl("group", "g-848", "read")]),
    (m.ConsumerGroupDescribe(groups=("g1",)), GROUP, [acl("group", "g1", "describe")]),
    (m.ReplicaFetch(replica_id=1), CLUSTER, [acl("cluster", "logbroker", "cluster_action")]),
    (m.OffsetForLeaderEpoch(replica_id=1), CLUSTER,
     [acl("cluster", "logbroker", "cluster_action")]),
    (m.DescribeCluster(), CLUSTER, [acl("cluster", "logbroker", "describe")]),
    (m.ElectLeaders(topics=("orders",)), CLUSTER, [acl("cluster", "logbroker", "alter")]),
    (m.CreateUser(name="eve", **_cred()), CLUSTER, [acl("cluster", "logbroker", "alter")]),
    (m.ListUsers(), CLUSTER, [acl("cluster", "logbroker", "describe")]),
    (m.DeleteUser(name="eve"), CLUSTER, [acl("cluster", "logbroker", "alter")]),
    (m.CreateAcls(acls=((ALICE, "topic", "x", "literal", "read", "allow"),)), CLUSTER,
     [acl("cluster", "logbroker", "alter")]),
    (m.DescribeAcls(), CLUSTER, [acl("cluster", "logbroker", "describe")]),
    (m.DeleteAcls(principal="User:nobody"), CLUSTER, [acl("cluster", "logbroker", "all")]),
    (m.DeleteOffsets(group="g1", parts=(("orders", 0),)), GROUP,
     [acl("group", "g1", "delete"), acl("topic", "orders", "read")]),
    (m.DescribeConfigs(topics=("orders",)), TOPIC, [acl("topic", "orders", "describe_configs")]),
    (m.AlterConfigs(topics=(("orders", (("retention_ms", "set", 60000),), False),),
                    validate_only=True), TOPIC, [acl("topic", "orders", "alter_configs")]),
    (m.CreatePartitions(topics=(("orders", 8, ()),), validate_only=True), TOPIC,
     [acl("topic", "orders", "alter")]),
    (m.DeleteRecords(parts=(("orders", 0, 0),)), TOPIC, [acl("topic", "orders", "delete")]),
    (m.AlterReassignments(parts=(("orders", 0, (0,)),)), CLUSTER,
     [acl("cluster", "logbroker", "alter")]),
    (m.ListReassignments(topics=(("orders", None),)), CLUSTER,
     [acl("cluster", "logbroker", "describe")]),
    # transactions (Kafka's rules on the TransactionalId resource)
    (m.FindCoordinator(group="t-1", key_type=1), TXN, [acl("transactional_id", "t-", "describe",
                                                           "prefix")]),
    (m.InitProducerId(transactional_id="t-1", transaction_timeout_ms=60_000), TXN,
     [acl("transactional_id", "t-1", "write")]),
    (m.AddPartitionsToTxn(transactional_id="t-1", producer_id=1, producer_epoch=0,
                          parts=(("orders", 0),)), TXN,
     [acl("transactional_id", "t-1", "write"), acl("topic", "orders", "write")]),
    (m.AddOffsetsToTxn(transactional_id="t-1", producer_id=1, producer_epoch=0, group="g1"), TXN,
     [acl("transactional_id", "t-1", "write"), acl("group", "g1", "read")]),
    (m.EndTxn(transactional_id="t-1", producer_id=1, producer_epoch=0), TXN,
     [acl("transactional_id", "t-1", "write")]),
    (m.DescribeTransactions(transactional_ids=("t-1",)), TXN,
     [acl("transactional_id", "t-1", "describe")]),
    (m.ListTransactions(), CLUSTER, [acl("cluster", "logbroker", "describe")]),
    # transactions, the leader's side: a single node answers WriteTxnMarkers 42 once allowed
    (m.WriteTxnMarkers(markers=((7, 0, True, 0, "orders", 0),)), CLUSTER,
     [acl("cluster", "logbroker", "cluster_action")]),
    (m.VerifyTxnPartitions(transactional_id="t-1", producer_id=7, producer_epoch=0,
                           parts=(("orders", 0),)), CLUSTER,
     [acl("cluster", "logbroker", "cluster_action")]),
    # an operator's transaction tools (api/txn_admin.py)
    (m.DescribeProducers(parts=(("orders", 0),)), TOPIC, [acl("topic", "orders", "read")]),
    (m.AbortTxnPartition(parts=(("orders", 0, 7, -1, -1),)), CLUSTER,
     [acl("cluster", "logbroker", "alter")]),
    (m.TxnOffsetCommit(transactional_id="t-acl", producer_id=7, producer_epoch=0, group="g1",
                       offsets=(("orders", 0, 1, ""),)), TXN,
     [acl("transactional_id", "t-acl", "write"), acl("group", "g1", "read"),
      acl("topic", "orders", "read")]),
]


# the requests whose allowed answer must be a success, entry by entry: (field, error's index)
ENTRY_ERRORS = {m.Produce: ("parts", 2), m.Fetch: ("parts", 2), m.ListOffsets: ("parts", 2),
                m.CreateTopics: ("topics", 1), m.DeleteTopics: ("topics", 1),
                m.Metadata: ("topics", 1), m.DescribeTopics: ("topics", 1)}


def test_the_cases_cover_every_checked_request_kind():
    assert {type(req) for req, _, _ in CASES} == set(RULES)


def _denials(b) -> dict:
    with urllib.request.urlopen(b.metrics_url, timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("logbroker_authorization_denials_total{"):
            kind = line.split('request="', 1)[1].split('"', 1)[0]
            out[kind] = float(line.split()[-1])
    return out


@pytest.mark.parametrize("req, code, acls", CASES, ids=lambda v: type(v).__name__
                         if isinstance(v, m.Message) else "")
def test_request_is_denied_without_its_acl_and_allowed_with_it(broker, req, code, acls):
    kind = type(req).__name__
    before = _denials(broker).get(kind, 0)
    conn = authed(broker.port)
    denied = conn.call(req)
    assert denied.error == code, denied
    assert "User:alice may not" in denied.message
    assert _denials(broker).get(kind, 0) == before + 1
    with admin_of(broker) as admin:
        assert admin.create_acls(acls) == len(acls)
        try:
            allowed = conn.call(req, timeout=20)
            assert allowed.error not in AUTHZ, allowed
            if type(req) in ENTRY_ERRORS:
                field, at = ENTRY_ERRORS[type(req)]
                entries = getattr(allowed, field)
                assert allowed.error == 0 and entries and all(e[at] == 0 for e in entries), allowed
        finally:
            admin.delete_acls(principal=ALICE)
    assert conn.call(req).error == code  # removed: denied again


def test_listing_every_topic_shows_only_those_alice_may_describe(broker):
    conn = authed(broker.port)
    assert conn.call(m.Metadata()).topics == ()
    with admin_of(broker) as admin:
        admin.create_acls([acl("topic", "ord", "read", "prefix")])
        try:
            assert [t[0] for t in conn.call(m.Metadata()).topics] == ["orders"]
            assert [t[0] for t in conn.call(m.DescribeTopics()).topics] == ["orders"]
        finally:
            admin.delete_acls(principal=ALICE)
    admin_conn = authed(broker.port, "admin", ADMIN_PW)
    assert "orders" in [t[0] for t in admin_conn.call(m.Metadata()).topics]


def test_deny_wins_and_wildcard_principal(broker):
    conn = authed(broker.port)
    fetch = m.Fetch(max_wait_ms=0, parts=(("orders", 0, 0, 1024),))
    with admin_of(broker) as admin:
        admin.create_acls([Acl("User:*", "topic", "orders", "literal", "read")])
        try:
            assert conn.call(fetch).error == 0
            admin.create_acls([Acl(ALICE, "topic", "o", "prefix", "read", "deny")])
            assert conn.call(fetch).error == TOPIC
        finally:
            admin.delete_acls(resource_type="topic", name="orders")
            admin.delete_acls(principal=ALICE)


def test_clients_and_cli_with_acls(broker):
    """alice's Producer fails with TOPIC_AUTHORIZATION_FAILED; after `acls
    add` through the CLI she produces and consumes in a group."""
    with Producer(broker.bootstrap, username="alice", password=ALICE_PW,
                  request_timeout_ms=5000) as p:
        with pytest.raises(TopicAuthorizationFailedError,
                           match="User:alice may not describe topic 'cli-t'"):
            p.send("cli-t", b"x").result(10)
    as_admin = ["--username", "admin", "--password-stdin"]
    err = invoked_error(invoke_cli(["acls", "add", "--principal", ALICE, "--topic", "cli-t",
                                    "--operation", "read", "--username", "alice",
                                    "--password-stdin"], stdin=ALICE_PW + "\n",
                                   bootstrap=broker.bootstrap), "CLUSTER_AUTHORIZATION_FAILED")
    assert "User:alice may not alter cluster" in err
    with admin_of(broker) as admin:
        admin.create_topic("cli-t", 1)
    for args in (["--topic", "cli-t", "--operation", "write", "--operation", "read"],
                 ["--group", "cli-", "--prefix", "--operation", "read"],
                 ["--transactional-id", "cli-tx", "--operation", "write"]):
        out = invoked_ok(invoke_cli(["acls", "add", "--principal", ALICE, *args, *as_admin],
                                    stdin=ADMIN_PW + "\n", bootstrap=broker.bootstrap))
        assert out.startswith("added ")
    rows = json.loads(invoked_ok(invoke_cli(["acls", "list", "--json", "--principal", ALICE,
                                             *as_admin], stdin=ADMIN_PW + "\n",
                                            bootstrap=broker.bootstrap)))
    assert {"principal": ALICE, "permission": "allow", "operation": "read", "resource": "group",
            "name": "cli-", "pattern": "prefix"} in rows and len(rows) == 4
    assert {"principal": ALICE, "permission": "allow", "operation": "write",
            "resource": "transactional_id", "name": "cli-tx", "pattern": "literal"} in rows
    table = invoked_ok(invoke_cli(["acls", "list", *as_admin], stdin=ADMIN_PW + "\n",
                                  bootstrap=broker.bootstrap))
    assert table.split()[:6] == ["PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME",
                                 "PATTERN"]
    try:
        with Producer(broker.bootstrap, username="alice", password=ALICE_PW) as p:
            p.send("cli-t", b"hello").result(10)
        with Consumer(broker.bootstrap, username="alice", password=ALICE_PW, group="cli-g",
                      auto_offset_reset="earliest") as c:
            c.subscribe(["cli-t"])
            assert [r.value for r in consume(c, 1)] == [b"hello"]
    finally:
        out = invoked_ok(invoke_cli(["acls", "remove", "--principal", ALICE, *as_admin],
                                    stdin=ADMIN_PW + "\n", bootstrap=broker.bootstrap))
        assert out.strip() == "removed 4 ACL(s)"


def test_bad_names_are_refused_not_crashed_on(broker):
    conn = authed(broker.port)
    long = "x" * 600  # longer than an LMDB key: the check must not look it up
    resp = conn.call(m.Metadata(topics=(long,), auto_create=True))
    assert resp.error == TOPIC and resp.message.endswith("(no ACL allows it)")
    assert conn.call(m.Produce(acks=1, parts=((long, 0, len(BATCH)),), payload=(BATCH,))).error \
        == TOPIC
    assert conn.call(m.ListGroups()).error == CLUSTER  # the connection goes on


def test_asyncio_admin_administers_acls(broker):
    from logbroker import aio

    async def main():
        async with aio.Admin(broker.bootstrap, username="admin", password=ADMIN_PW) as admin:
            new = Acl("User:*", "group", "aio-", "prefix", "read")
            assert await admin.create_acls([new, new]) == 1
            assert await admin.create_acls([new]) == 0
            assert await admin.describe_acls(resource_type="group", name="aio-") == [new]
            assert await admin.delete_acls(principal="User:*") == [new]
            return await admin.describe_acls(principal="User:*")
    assert asyncio.run(main()) == []


def test_parts_of_denied_topics_fail_alone(broker):
    """Produce, Fetch and ListOffsets answer per part: the allowed topics
    are served, the denied ones get 29, in the request's order."""
    conn = authed(broker.port)
    with admin_of(broker) as admin:
        admin.create_acls([acl("topic", "orders", "write"), acl("topic", "orders", "read")])
        try:
            produce = conn.call(m.Produce(acks=1, parts=(("secret", 0, len(BATCH)),
                                                         ("orders", 0, len(BATCH))),
                                          payload=(BATCH, BATCH)))
            assert produce.error == 0 and [p[:3] for p in produce.parts] == [
                ("secret", 0, TOPIC), ("orders", 0, 0)], produce
            assert "may not write topic 'secret'" in produce.parts[0][3]
            fetch = conn.call(m.Fetch(max_wait_ms=0, parts=(("orders", 0, 0, 1 << 20),
                                                            ("secret", 0, 0, 1 << 20))))
            assert [p[:3] for p in fetch.parts] == [("orders", 0, 0), ("secret", 0, TOPIC)]
            assert fetch.parts[0][6] > 0 and fetch.parts[1][6] == 0
            offsets = conn.call(m.ListOffsets(parts=(("secret", 0, -1), ("orders", 0, -1))))
            assert [p[:3] for p in offsets.parts] == [("secret", 0, TOPIC), ("orders", 0, 0)]
        finally:
            admin.delete_acls(principal=ALICE)


def test_a_consumer_without_its_group_acl_fails_at_once(broker):
    with admin_of(broker) as admin:
        admin.create_acls([acl("topic", "orders", "read")])
        try:
            with Consumer(broker.bootstrap, username="alice", password=ALICE_PW,
                          group="no-acl") as c:
                c.subscribe(["orders"])
                with pytest.raises(GroupAuthorizationFailedError,
                                   match="User:alice may not describe group 'no-acl'"):
                    for _ in range(20):  # not retried until a deadline: raised by a poll
                        c.poll(0.5)
        finally:
            admin.delete_acls(principal=ALICE)


def test_a_transactional_batch_needs_a_transactional_id_alice_may_write(broker):
    """Kafka's rule (api/produce.py): with ACLs enforced, a transactional
    batch comes with the request's transactional id, whose WRITE is checked."""
    from logbroker.records.builder import build_batch

    conn = authed(broker.port)
    pid = conn.call(m.InitProducerId()).producer_id
    data = build_batch([b"t"], producer_id=pid, producer_epoch=0, base_sequence=0,
                       transactional=True)
    bare = m.Produce(acks=1, parts=(("orders", 0, len(data)),), payload=(data,))
    named = dataclasses.replace(bare, transactional_id="t-alice")
    with admin_of(broker) as admin:
        admin.create_acls([acl("topic", "orders", "write")])
        try:
            assert conn.call(bare).parts[0].error == TXN
            assert conn.call(named).error == TXN  # no ACL on the id: the whole request
            admin.create_acls([acl("transactional_id", "t-alice", "write")])
            # allowed; but no transaction of the id holds the partition (api/txn_verify.py)
            assert conn.call(named).parts[0].error == 48
            init = wait_until(lambda: (r := conn.call(m.InitProducerId(
                transactional_id="t-alice", transaction_timeout_ms=60_000))).error == 0 and r,
                10, "InitProducerId")
            assert conn.call(m.AddPartitionsToTxn(
                transactional_id="t-alice", producer_id=init.producer_id,
                producer_epoch=init.producer_epoch, parts=(("orders", 0),))).parts[0].error == 0
            data = build_batch([b"t"], producer_id=init.producer_id,
                               producer_epoch=init.producer_epoch, base_sequence=0,
                               transactional=True)
            named = dataclasses.replace(named, parts=(("orders", 0, len(data)),), payload=(data,))
            assert conn.call(named).parts[0].error == 0
        finally:
            admin.delete_acls(principal=ALICE)
