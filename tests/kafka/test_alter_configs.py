"""Writable topic configs (docs/kafka.md §4.9): confluent-kafka's
AdminClient alter_configs (AlterConfigs, the whole set replaced) and
incremental_alter_configs (SET / DELETE / APPEND / SUBTRACT), KafkaJS's
admin.alterConfigs and describeConfigs, our Admin and CLI; a change
applies live (max.message.bytes refuses a bigger record at once,
segment.bytes rolls the next appends); refusals name the config and are
logged. One single-node broker process for the file."""

from __future__ import annotations

import asyncio
import json
import warnings

import pytest

from tests.support.fixtures import run_cli
from tests.support.kafka_raw import WAIT, kafka_broker
from tests.support.kafkajs import run_kafkajs

ck_admin = pytest.importorskip("confluent_kafka.admin")
ck = pytest.importorskip("confluent_kafka")
DYNAMIC = ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
DEFAULT = ck_admin.ConfigSource.DEFAULT_CONFIG.value


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-alter") / "data", "--log-level",
                      "debug") as started:
        yield started


def _topic(name: str):
    return ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, name)


def _described(admin, name: str) -> dict:
    res = _topic(name)
    return admin.describe_configs([res])[res].result(WAIT)


def _create(admin, name: str, config: "dict | None" = None) -> None:
    admin.create_topics([ck_admin.NewTopic(name, 1, 1, config=config or {})],
                        request_timeout=WAIT)[name].result(WAIT)


def _incremental(admin, name: str, *ops, validate_only: bool = False):
    res = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, name,
                                  incremental_configs=[ck_admin.ConfigEntry(
                                      key, value, incremental_operation=op)
                                      for key, value, op in ops])
    return admin.incremental_alter_configs([res], validate_only=validate_only)[res].result(WAIT)


def _whole(admin, res):
    """confluent-kafka's AlterConfigs (deprecated there for the incremental one)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return admin.alter_configs([res])[res]


def test_confluent_incremental_and_whole_alterations(kb):
    b, bootstrap = kb
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, "alt-a", {"message.timestamp.difference.max.ms": "5000",
                             "retention.ms": "3600000"})
    got = _described(admin, "alt-a")
    ts = got["message.timestamp.difference.max.ms"]
    assert (ts.value, ts.source, ts.is_read_only) == ("5000", DYNAMIC, False)
    assert (got["segment.bytes"].source, got["segment.bytes"].is_read_only) == (DEFAULT, False)
    assert "flush" not in got  # our own knob: not shown on the Kafka listener

    op = ck_admin.AlterConfigOpType
    _incremental(admin, "alt-a", ("segment.ms", "60000", op.SET),
                 ("cleanup.policy", "compact", op.APPEND), ("retention.ms", None, op.DELETE))
    got = _described(admin, "alt-a")
    assert (got["segment.ms"].value, got["segment.ms"].source) == ("60000", DYNAMIC)
    assert (got["cleanup.policy"].value, got["cleanup.policy"].source) == \
        ("delete,compact", DYNAMIC)
    assert (got["retention.ms"].value, got["retention.ms"].source) == ("604800000", DEFAULT)
    _incremental(admin, "alt-a", ("cleanup.policy", "delete", op.SUBTRACT))
    assert _described(admin, "alt-a")["cleanup.policy"].value == "compact"
    # validate_only changes nothing
    _incremental(admin, "alt-a", ("segment.ms", "120000", op.SET), validate_only=True)
    assert _described(admin, "alt-a")["segment.ms"].value == "60000"
    # refusals: INVALID_CONFIG naming the config, nothing changed
    for key, value, rule in (("no.such.config", "1", "no.such.config"),
                             ("retention.ms", "-7", "retention.ms"),
                             ("segment.ms", "soon", "segment.ms")):
        with pytest.raises(ck.KafkaException, match=rule) as err:
            _incremental(admin, "alt-a", (key, value, op.SET))
        assert err.value.args[0].code() == ck.KafkaError.INVALID_CONFIG
    with pytest.raises(ck.KafkaException, match="not a list setting"):
        _incremental(admin, "alt-a", ("segment.ms", "5", op.APPEND))
    with pytest.raises(ck.KafkaException) as err:
        _incremental(admin, "alt-none", ("segment.ms", "60000", op.SET))
    assert err.value.args[0].code() == ck.KafkaError.UNKNOWN_TOPIC_OR_PART
    assert _described(admin, "alt-a")["segment.ms"].value == "60000"

    # AlterConfigs replaces the topic's whole set: what it leaves out returns to the default
    res = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, "alt-a",
                                  set_config={"retention.bytes": "1000000"})
    _whole(admin, res).result(WAIT)
    got = _described(admin, "alt-a")
    assert {k for k, e in got.items() if e.source == DYNAMIC} == {"retention.bytes"}
    assert got["message.timestamp.difference.max.ms"].value == str((1 << 63) - 1)
    broker = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.BROKER, "0",
                                     set_config={"log.retention.ms": "1"})
    with pytest.raises(ck.KafkaException, match="read-only"):
        _whole(admin, broker).result(WAIT)
    log = b.log()
    assert "AlterConfigs of topic 'alt-a' refused" in log and "no.such.config" in log


def test_live_effect_max_message_bytes_and_segment_bytes(kb):
    b, bootstrap = kb
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    _create(admin, "alt-live")
    op = ck_admin.AlterConfigOpType
    _incremental(admin, "alt-live", ("max.message.bytes", "1000", op.SET),
                 ("segment.bytes", "1024", op.SET))
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                            "message.max.bytes": 100_000})
    errors = []

    def sent(err, _msg):
        errors.append(err)

    producer.produce("alt-live", b"x" * 4000, on_delivery=sent)
    assert producer.flush(WAIT) == 0
    assert errors[0] is not None and errors[0].code() == ck.KafkaError.MSG_SIZE_TOO_LARGE
    for i in range(6):  # each ~600-byte batch, segments of 1024 bytes: rolled as they fill
        producer.produce("alt-live", b"y" * 500, on_delivery=sent)
        assert producer.flush(WAIT) == 0
    assert errors[1:] == [None] * 6
    desc = json.loads(run_cli("topics", "describe", "alt-live", "--json",
                              bootstrap=b.bootstrap).stdout)[0]
    assert desc["partitions"][0]["segments"] >= 3, desc
    assert desc["overrides"] == {"max_batch_bytes": 1000, "segment_bytes": 1024}
    _incremental(admin, "alt-live", ("max.message.bytes", None, op.DELETE))
    producer.produce("alt-live", b"x" * 4000, on_delivery=sent)
    assert producer.flush(WAIT) == 0 and errors[-1] is None


def test_our_admin_and_cli_alter_and_describe(kb):
    from logbroker import Admin
    from logbroker.errors import InvalidConfigError

    b, _bootstrap = kb
    with Admin(b.bootstrap) as admin:
        admin.create_topic("alt-ours", 1, {"retention_ms": 60_000})
        admin.alter_configs("alt-ours", {"segment_ms": 30_000, "compression_type": "gzip"},
                            delete=["retention_ms"])
        got = admin.describe_configs("alt-ours")
        assert got.overrides == {"segment_ms": 30_000, "compression_type": "gzip"}
        assert got.configs["retention_ms"] == 604_800_000 and got.configs["segment_ms"] == 30_000
        with pytest.raises(InvalidConfigError, match="segment_bytes"):
            admin.alter_configs("alt-ours", {"segment_bytes": 5})
    done = run_cli("topics", "alter", "alt-ours", "--config", "retention_bytes=5000000",
                   "--delete-config", "compression_type", bootstrap=b.bootstrap)
    assert done.returncode == 0, done.stderr
    text = run_cli("topics", "describe", "alt-ours", bootstrap=b.bootstrap).stdout.decode()
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines() if line.strip()}
    assert rows["retention_bytes"] == ["5000000", "topic"]
    assert rows["retention_ms"] == ["604800000", "default"]
    assert "compression_type" not in rows


def test_kafkajs_alter_and_describe_configs(kb):
    _b, bootstrap = kb
    got = run_kafkajs("""
      const admin = kafka.admin();
      await admin.connect();
      await admin.createTopics({ topics: [{ topic: 'alt-js', numPartitions: 1,
        configEntries: [{ name: 'message.timestamp.difference.max.ms', value: '9000' }] }] });
      await admin.alterConfigs({ validateOnly: false, resources: [{ type: K.ConfigResourceTypes.TOPIC,
        name: 'alt-js', configEntries: [{ name: 'retention.ms', value: '120000' },
                                         { name: 'cleanup.policy', value: 'compact' }] }] });
      const d = await admin.describeConfigs({ includeSynonyms: false, resources: [
        { type: K.ConfigResourceTypes.TOPIC, name: 'alt-js' }] });
      const b = await admin.describeConfigs({ includeSynonyms: false, resources: [
        { type: K.ConfigResourceTypes.BROKER, name: '0',
          configNames: ['default.replication.factor', 'num.partitions'] }] });
      let refused = null;
      try {
        await admin.alterConfigs({ resources: [{ type: K.ConfigResourceTypes.TOPIC,
          name: 'alt-js', configEntries: [{ name: 'retention.msx', value: '1' }] }] });
      } catch (e) { refused = e.type; }
      await admin.disconnect();
      out({ topic: d.resources[0].configEntries, broker: b.resources[0].configEntries, refused });
    """, [bootstrap])
    rows = {e["configName"]: e for e in got["topic"]}
    assert rows["retention.ms"]["configValue"] == "120000"
    assert rows["cleanup.policy"]["configValue"] == "compact"
    assert rows["retention.ms"]["readOnly"] is False
    # AlterConfigs replaced the whole set: the creation's setting is back at its default
    assert rows["message.timestamp.difference.max.ms"]["isDefault"] is True
    assert {e["configName"]: e["configValue"] for e in got["broker"]} == \
        {"default.replication.factor": "1", "num.partitions": "1"}
    assert got["refused"] == "INVALID_CONFIG"


def test_alterations_are_computed_against_the_current_settings():
    from logbroker.api.configs import altered
    from logbroker.errors import InvalidConfigError, InvalidRequestError

    current = {"retention_ms": 1000, "cleanup_policy": "compact"}
    assert altered(current, {}, (("segment_ms", "set", 5), ("retention_ms", "delete", None)),
                   False) == {"cleanup_policy": "compact", "segment_ms": 5}
    assert altered(current, {}, (("segment_ms", "set", 5),), True) == {"segment_ms": 5}
    # append / subtract start from the effective value when the topic sets none
    assert altered({}, {"cleanup_policy": "delete"}, (("cleanup_policy", "append", "compact"),),
                   False) == {"cleanup_policy": "delete,compact"}
    assert altered(current, {}, (("cleanup_policy", "append", "compact, delete"),), False) == \
        {"retention_ms": 1000, "cleanup_policy": "compact,delete"}
    assert altered(current, {}, (("cleanup_policy", "subtract", "compact"),), False) == \
        {"retention_ms": 1000, "cleanup_policy": ""}
    for changes, error, rule in (
            ((("segment_ms", "set", 1), ("segment_ms", "delete", None)), InvalidRequestError,
             "changed twice"),
            ((("segment_ms", "drop", 1),), InvalidRequestError, "operation must be"),
            ((("flushh", "set", 1),), InvalidConfigError, "unknown topic setting 'flushh'"),
            ((("replication_factor", "set", 3),), InvalidConfigError, "unknown topic setting"),
            ((("segment_ms", "append", "1"),), InvalidConfigError, "not a list setting")):
        with pytest.raises(error, match=rule):
            altered(current, {}, changes, False)


def test_raw_alterations_bounded_and_refused_per_resource(kb):
    """A request changing over 1000 configs is refused whole before any is
    parsed; a resource named twice, an unknown operation and a broker
    resource are refused alone, the valid resource beside them applied."""
    from tests.support.kafka_raw import Raw

    _b, bootstrap = kb
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(19, 4, 1, {"topics": [{
            "name": "alt-raw", "num_partitions": 1, "replication_factor": -1,
            "assignments": [], "configs": []}]}))
        assert raw.recv(19, 4)[1].topics[0].error_code == 0
        many = [{"name": "retention.ms", "config_operation": 0, "value": "1"}] * 1001
        raw.sock.sendall(raw.send(44, 0, 2, {"resources": [
            {"resource_type": 2, "resource_name": "alt-raw", "configs": many}],
            "validate_only": False}))
        (row,) = raw.recv(44, 0)[1].responses
        assert row.error_code == 42 and "at most 1000" in row.error_message
        one = [{"name": "segment.ms", "config_operation": 0, "value": "70000"}]
        raw.sock.sendall(raw.send(44, 0, 3, {"resources": [
            {"resource_type": 2, "resource_name": "alt-a-twice", "configs": one},
            {"resource_type": 2, "resource_name": "alt-a-twice", "configs": one},
            {"resource_type": 2, "resource_name": "alt-raw", "configs": [
                {"name": "segment.ms", "config_operation": 9, "value": "1"}]},
            {"resource_type": 4, "resource_name": "0", "configs": one},
            {"resource_type": 2, "resource_name": "alt-raw", "configs": one}],
            "validate_only": False}))
        rows = raw.recv(44, 0)[1].responses
        assert [r.error_code for r in rows] == [42, 42, 42, 42, 42]  # alt-raw is named twice too
        raw.sock.sendall(raw.send(44, 0, 4, {"resources": [
            {"resource_type": 4, "resource_name": "0", "configs": one},
            {"resource_type": 2, "resource_name": "alt-raw", "configs": one}],
            "validate_only": False}))
        broker, topic = raw.recv(44, 0)[1].responses
        assert (broker.error_code, topic.error_code) == (42, 0)
        assert "read-only" in broker.error_message
        raw.sock.sendall(raw.send(32, 1, 5, {"resources": [
            {"resource_type": 2, "resource_name": "alt-raw", "configuration_keys": ["segment.ms"]}],
            "include_synonyms": False}))
        (entry,) = raw.recv(32, 1)[1].results[0].configs
        assert (entry.value, entry.config_source, entry.read_only) == ("70000", 1, False)
    finally:
        raw.close()


def test_config_requests_are_bounded_and_need_kafkas_config_operations():
    """Over 1000 topics in one DescribeConfigs / AlterConfigs: refused before
    any topic is looked at (no services needed); each topic needs
    describe_configs / alter_configs, the latter implying the former."""
    from logbroker.api import configs
    from logbroker.protocol import messages as m
    from logbroker.security.acl import AclBinding, Authorizer
    from logbroker.security.acl_rules import RULES

    many = tuple(f"t{i}" for i in range(1001))
    assert configs.describe_configs(None, m.DescribeConfigs(topics=many), None).error == 42
    assert configs.describe_configs(None, m.DescribeConfigs(topics=many), None).topics == ()
    change = m.AlterConfigs(topics=tuple((t, (), False) for t in many))
    assert asyncio.run(configs.alter_configs(None, change, None)).error == 42
    req = m.AlterConfigs(topics=(("a", (), False), ("b", (), True)))
    assert RULES[m.AlterConfigs](req, lambda t: True) == [("alter_configs", "topic", "a"),
                                                           ("alter_configs", "topic", "b")]
    assert RULES[m.DescribeConfigs](m.DescribeConfigs(topics=("a",)), lambda t: True) == \
        [("describe_configs", "topic", "a")]
    acl = Authorizer([AclBinding("User:al", "topic", "a", "literal", "alter_configs", "allow")])
    assert acl.authorize("User:al", "describe_configs", "topic", "a")
    assert not acl.authorize("User:al", "describe", "topic", "a")
    assert not acl.authorize("User:al", "alter_configs", "topic", "b")
