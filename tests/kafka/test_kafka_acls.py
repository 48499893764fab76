"""Kafka's ACL APIs (CreateAcls, DescribeAcls, DeleteAcls) on the Kafka
listener of one broker with --auth-required and super_users = ["User:admin"]
(docs/kafka.md, "ACLs"): confluent-kafka's AdminClient and KafkaJS create,
describe and delete bindings; a binding created that way really permits and
then denies a SCRAM user's produce; a non-admin is refused; bad filters and
creations get INVALID_REQUEST naming the rule."""

from __future__ import annotations

import pytest
from tests.support.fixtures import BrokerProcess, invoke_cli, invoked_ok
from tests.support.kafka_raw import WAIT, kafka_address
from tests.support.kafkajs import run_kafkajs

from logbroker import Admin
from logbroker.errors import InvalidRequestError

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,  # noqa: E402
                                   AclPermissionType, AdminClient, NewTopic, ResourcePatternType,
                                   ResourceType)

ADMIN_PW, CAROL_PW = "admin-Pa55word", "carol-Pa55word"
ANY_HOST = "*"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    data = tmp_path_factory.mktemp("kafka-acls") / "data"
    b = BrokerProcess(data, "--auth-required", "--kafka-port", "0", "--log-level", "debug",
                      config={"super_users": ["User:admin"]}).start()
    try:
        b.kafka = kafka_address(b)
        invoked_ok(invoke_cli(["users", "add", "admin", "--user-password-stdin"],
                              stdin=ADMIN_PW + "\n", bootstrap=b.bootstrap))
        with Admin(b.bootstrap, username="admin", password=ADMIN_PW) as admin:
            admin.create_user("carol", CAROL_PW)
        yield b
        assert "Traceback" not in b.log()
    finally:
        b.stop()


def scram(user: str, password: str) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user, "sasl.password": password}


def admin_client(kb, user="admin", password=ADMIN_PW) -> AdminClient:
    return AdminClient({"bootstrap.servers": kb.kafka, **scram(user, password)})


def topic_acl(principal: str, topic: str, op, permission=AclPermissionType.ALLOW,
              pattern=ResourcePatternType.LITERAL) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, topic, pattern, principal, ANY_HOST, op, permission)


def results(futures: dict) -> dict:
    """{key: result or the exception} of an AdminClient call's futures."""
    out = {}
    for key, fut in futures.items():
        try:
            out[key] = fut.result(timeout=WAIT)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            out[key] = exc
    return out


def produce(kb, user: str, password: str, topic: str):
    """One record by librdkafka as ``user``: its delivery error (None: written)."""
    p = ck.Producer({"bootstrap.servers": kb.kafka, **scram(user, password),
                     "message.timeout.ms": 5000, "retries": 0})
    errors = []
    p.produce(topic, b"x", partition=0, on_delivery=lambda err, msg: errors.append(err))
    p.flush(WAIT)
    p.close()
    assert len(errors) == 1
    return errors[0]


def test_confluent_acls_create_describe_delete_and_enforce(kb):
    a = admin_client(kb)
    results(a.create_topics([NewTopic("acl-t", 1, 1)]))
    assert produce(kb, "carol", CAROL_PW, "acl-t").code() == \
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    write = topic_acl("User:carol", "acl-t", AclOperation.WRITE)
    prefixed = topic_acl("User:carol", "acl-", AclOperation.DESCRIBE,
                         pattern=ResourcePatternType.PREFIXED)
    cluster = AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                         "User:carol", ANY_HOST, AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    done = results(a.create_acls([write, prefixed, cluster]))
    assert all(v is None for v in done.values()), done
    assert produce(kb, "carol", CAROL_PW, "acl-t") is None  # the ACL permits it now

    match = AclBindingFilter(ResourceType.TOPIC, "acl-t", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert sorted(b.name for b in a.describe_acls(match).result(timeout=WAIT)) == \
        ["acl-", "acl-t"]  # MATCH: the literal binding and the prefix that covers the name
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    listed = a.describe_acls(everything).result(timeout=WAIT)
    assert {(b.restype, b.name, b.resource_pattern_type, b.operation) for b in listed} == {
        (ResourceType.TOPIC, "acl-t", ResourcePatternType.LITERAL, AclOperation.WRITE),
        (ResourceType.TOPIC, "acl-", ResourcePatternType.PREFIXED, AclOperation.DESCRIBE),
        (ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
         AclOperation.DESCRIBE)}
    assert {b.host for b in listed} == {"*"}

    deny = topic_acl("User:carol", "acl-t", AclOperation.WRITE, AclPermissionType.DENY)
    assert results(a.create_acls([deny]))[deny] is None
    assert produce(kb, "carol", CAROL_PW, "acl-t").code() == \
        ck.KafkaError.TOPIC_AUTHORIZATION_FAILED  # a deny wins

    by_carol = AclBindingFilter(ResourceType.TOPIC, None, ResourcePatternType.ANY, "User:carol",
                                None, AclOperation.WRITE, AclPermissionType.ANY)
    gone = results(a.delete_acls([by_carol]))[by_carol]
    assert {b.permission_type for b in gone} == {AclPermissionType.ALLOW,
                                                 AclPermissionType.DENY} and len(gone) == 2
    left = a.describe_acls(everything).result(timeout=WAIT)
    assert {b.name for b in left} == {"acl-", "kafka-cluster"}


def test_non_admin_and_bad_creations_are_refused(kb):
    carol = admin_client(kb, "carol", CAROL_PW)
    attempt = topic_acl("User:carol", "anything", AclOperation.ALL)
    err = results(carol.create_acls([attempt]))[attempt]
    assert err.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    a = admin_client(kb)
    elsewhere = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:carol",
                           "10.0.0.1", AclOperation.READ, AclPermissionType.ALLOW)
    txn = AclBinding(ResourceType.TRANSACTIONAL_ID, "tx", ResourcePatternType.LITERAL,
                     "User:carol", ANY_HOST, AclOperation.WRITE, AclPermissionType.ALLOW)
    fine = topic_acl("User:carol", "ok-topic", AclOperation.READ)
    done = results(a.create_acls([elsewhere, txn, fine]))
    assert done[fine] is None and done[txn] is None  # TransactionalId: a resource of ours
    for bad, rule in ((elsewhere, "host"),):
        assert done[bad].args[0].code() == ck.KafkaError.INVALID_REQUEST
        assert rule in done[bad].args[0].str()
    assert "Kafka CreateAcls refused" in kb.log()
    many = [topic_acl("User:carol", f"t{i}", AclOperation.READ) for i in range(1001)]
    done = results(a.create_acls(many))  # past the bound: every creation refused, none made
    assert {e.args[0].code() for e in done.values()} == {ck.KafkaError.INVALID_REQUEST}
    assert "at most 1000" in done[many[0]].args[0].str()
    with Admin(kb.bootstrap, username="admin", password=ADMIN_PW) as admin:
        with pytest.raises(InvalidRequestError, match="at most 1000"):
            admin.create_acls([("User:carol", "topic", f"t{i}", "literal", "read", "allow")
                               for i in range(1001)])
        assert not admin.describe_acls(name="t7")


def test_delete_acls_filters_are_bounded(kb):
    """16 filters are one pass; 17 are refused, each result INVALID_REQUEST."""
    a = admin_client(kb)
    keep = topic_acl("User:carol", "kept", AclOperation.READ)
    assert results(a.create_acls([keep]))[keep] is None

    def by_name(i):
        return AclBindingFilter(ResourceType.TOPIC, f"f{i}", ResourcePatternType.ANY, None, None,
                                AclOperation.ANY, AclPermissionType.ANY)
    kept = AclBindingFilter(ResourceType.TOPIC, "kept", ResourcePatternType.MATCH, None, None,
                            AclOperation.ANY, AclPermissionType.ANY)
    too_many = [by_name(i) for i in range(16)] + [kept]
    done = results(a.delete_acls(too_many))
    assert {e.args[0].code() for e in done.values()} == {ck.KafkaError.INVALID_REQUEST}
    assert "at most 16" in done[kept].args[0].str()
    done = results(a.delete_acls([by_name(i) for i in range(15)] + [kept]))
    assert [b.name for b in done[kept]] == ["kept"]
    assert all(done[by_name(i)] == [] for i in range(15))


def test_kafkajs_acls(kb):
    got = run_kafkajs("""
const admin = kafka.admin(); await admin.connect();
const acl = { resourceType: K.AclResourceTypes.GROUP, resourceName: 'js-group',
  resourcePatternType: K.ResourcePatternTypes.LITERAL, principal: 'User:carol', host: '*',
  operation: K.AclOperationTypes.READ, permissionType: K.AclPermissionTypes.ALLOW };
await admin.createAcls({ acl: [acl] });
const filter = { resourceType: K.AclResourceTypes.GROUP, resourceName: 'js-group',
  resourcePatternType: K.ResourcePatternTypes.LITERAL, principal: 'User:carol', host: '*',
  operation: K.AclOperationTypes.ANY, permissionType: K.AclPermissionTypes.ANY };
const described = await admin.describeAcls(filter);
const deleted = await admin.deleteAcls({ filters: [filter] });
const after = await admin.describeAcls(filter);
await admin.disconnect();
out({ described: described.resources, deleted: deleted.filterResponses, after: after.resources });
""", [kb.kafka], client={"sasl": {"mechanism": "scram-sha-256", "username": "admin",
                                  "password": ADMIN_PW}})
    assert got["described"] == [{"resourceType": 3, "resourceName": "js-group",
                                 "resourcePatternType": 3, "acls": [
                                     {"principal": "User:carol", "host": "*", "operation": 3,
                                      "permissionType": 3}]}]
    [filter_result] = got["deleted"]
    assert filter_result["errorCode"] == 0 and len(filter_result["matchingAcls"]) == 1
    assert got["after"] == []


def test_a_transactional_producer_needs_write_on_its_transactional_id(kb):
    """Kafka's rule (docs/kafka.md §4.14): InitProducerId, AddPartitionsToTxn,
    EndTxn and a transactional Produce want WRITE on the TransactionalId
    (and the Produce WRITE on the topic): without it librdkafka's
    init_transactions fails with TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53);
    with it the transaction commits."""
    dave_pw = "dave-Pa55word"
    with Admin(kb.bootstrap, username="admin", password=ADMIN_PW) as admin:
        admin.create_user("dave", dave_pw)
    a = admin_client(kb)
    results(a.create_topics([NewTopic("dave-t", 1, 1)]))
    write = topic_acl("User:dave", "dave-t", AclOperation.WRITE)
    assert results(a.create_acls([write]))[write] is None

    def producer():
        return ck.Producer({"bootstrap.servers": kb.kafka, **scram("dave", dave_pw),
                            "transactional.id": "dave-tx"})
    with pytest.raises(ck.KafkaException) as info:
        producer().init_transactions(WAIT)
    assert info.value.args[0].code() == ck.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    txn = AclBinding(ResourceType.TRANSACTIONAL_ID, "dave-tx", ResourcePatternType.LITERAL,
                     "User:dave", ANY_HOST, AclOperation.WRITE, AclPermissionType.ALLOW)
    assert results(a.create_acls([txn]))[txn] is None
    p = producer()
    p.init_transactions(WAIT)
    p.begin_transaction()
    p.produce("dave-t", b"in a transaction", partition=0)
    p.commit_transaction(WAIT)
