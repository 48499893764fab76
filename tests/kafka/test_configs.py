"""Topic configs over the Kafka listener (docs/kafka.md §4.9): Kafka's
names in CreateTopics (kafka/topic_configs.py's table) and DescribeConfigs
for topics and the broker, through kafka-python's and confluent-kafka's
admin clients against one real broker process; the table's conversions
as pure functions."""

from __future__ import annotations

import json

import pytest

from tests.support.fixtures import run_cli
from tests.support.kafka_raw import WAIT, Raw, kafka_broker
from logbroker.errors import InvalidConfigError
from logbroker.kafka import topic_configs as tc
from logbroker.storage.config import LogConfig

kafka_admin = pytest.importorskip("kafka.admin")
ck_admin = pytest.importorskip("confluent_kafka.admin")


def test_kafka_names_become_ours_and_back():
    assert tc.to_ours("retention.ms", "3600000") == ("retention_ms", 3600000)
    assert tc.to_ours("max.message.bytes", "2000000") == ("max_batch_bytes", 2000000)
    assert tc.to_ours("min.cleanable.dirty.ratio", "0.25") == ("min_cleanable_dirty_percent", 25)
    assert tc.to_ours("unclean.leader.election.enable", "TRUE") == \
        ("unclean_leader_election", "true")
    assert tc.to_ours("cleanup.policy", "compact, delete") == ("cleanup_policy", "compact,delete")
    # Kafka configs without effect here are taken at any value Kafka takes
    assert tc.to_ours("compression.type", "gzip") == ("compression_type", "gzip")
    assert tc.to_ours("message.timestamp.difference.max.ms", "5000") == \
        ("message_timestamp_difference_max_ms", 5000)
    for name, value, rule in (("flush", "lazy", "unknown topic config 'flush'"),  # ours only
                              ("retention.mss", "1", "unknown topic config"),
                              ("compression.type", "brotli", "compression.type"),
                              ("message.timestamp.type", "Now", "message.timestamp.type"),
                              ("max.message.bytes", "10", "max.message.bytes"),
                              ("segment.ms", "soon", "segment.ms must be an integer"),
                              ("preallocate", "yes", "preallocate must be true or false"),
                              ("min.cleanable.dirty.ratio", "1.5", "min.cleanable"),
                              ("min.cleanable.dirty.ratio", "nan", "min.cleanable")):
        with pytest.raises(InvalidConfigError, match=rule):
            tc.to_ours(name, value)
    entries = {name: (value, kind) for name, value, kind in tc.to_kafka(LogConfig().to_dict())}
    assert entries["max.message.bytes"] == (str(16 << 20), tc.INT)
    assert entries["min.cleanable.dirty.ratio"] == ("0.5", tc.DOUBLE)
    assert entries["cleanup.policy"] == ("delete", tc.LIST)
    assert entries["retention.ms"] == ("604800000", tc.LONG)
    assert "flush" not in entries  # our own knob has no Kafka name: not shown
    missing = {name: value for name, value, _k in tc.defaults_missing(LogConfig().to_dict())}
    assert missing["compression.type"] == "producer" and "retention.ms" not in missing
    # every setting of ours goes to Kafka and comes back the same
    for name, value, _kind in tc.to_kafka(LogConfig().to_dict()):
        got = tc.to_ours(name, value)
        assert LogConfig().to_dict()[got[0]] == got[1], name


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    with kafka_broker(tmp_path_factory.mktemp("kafka-configs") / "data") as started:
        yield started


def _described(b, topic: str) -> dict:
    return json.loads(run_cli("topics", "describe", topic, "--json", bootstrap=b.bootstrap)
                      .stdout)


def test_kafka_python_creates_with_kafka_names_and_describes(kb):
    b, bootstrap = kb
    admin = kafka_admin.KafkaAdminClient(bootstrap_servers=bootstrap,
                                         request_timeout_ms=int(WAIT * 1000))
    try:
        admin.create_topics([kafka_admin.NewTopic("cfg-a", 2, 1, topic_configs={
            "max.message.bytes": "2000000", "min.cleanable.dirty.ratio": "0.3",
            "cleanup.policy": "compact", "retention.ms": "3600000",
            "compression.type": "producer"})])
        desc = _described(b, "cfg-a")
        text = json.dumps(desc)
        for key, value in (("max_batch_bytes", 2000000), ("min_cleanable_dirty_percent", 30),
                           ("cleanup_policy", "compact"), ("retention_ms", 3600000)):
            assert f'"{key}": {json.dumps(value)}' in text, (key, text[:400])
        resource = kafka_admin.ConfigResource(kafka_admin.ConfigResourceType.TOPIC, "cfg-a")
        every = admin.describe_configs([resource], config_filter="all")["topic"]["cfg-a"]
        modified = admin.describe_configs([resource])["topic"]["cfg-a"]  # non-default only
        want = {"max.message.bytes": "2000000", "min.cleanable.dirty.ratio": "0.3",
                "cleanup.policy": "compact", "retention.ms": "3600000",
                "compression.type": "producer"}  # set on the topic: dynamic, as Kafka shows it
        assert {k: v["value"] for k, v in modified.items()} == want
        assert every["segment.bytes"]["value"] == str(1 << 30)
        assert {k: every[k]["value"] for k in want} == want
        with pytest.raises(Exception, match="(?i)invalid.?config|40"):
            admin.create_topics([kafka_admin.NewTopic("cfg-bad", 1, 1, topic_configs={
                "no.such.config": "1"})], validate_only=False)
    finally:
        admin.close()
    assert run_cli("topics", "describe", "cfg-bad", bootstrap=b.bootstrap).returncode != 0


def test_confluent_describes_topic_and_broker_configs(kb):
    b, bootstrap = kb
    admin = ck_admin.AdminClient({"bootstrap.servers": bootstrap})
    ok = admin.create_topics([ck_admin.NewTopic("cfg-b", 1, 1, config={
        "segment.ms": "60000", "unclean.leader.election.enable": "false"})],
        request_timeout=WAIT)
    ok["cfg-b"].result(WAIT)
    topic = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, "cfg-b")
    entries = admin.describe_configs([topic])[topic].result(WAIT)
    seg, ret = entries["segment.ms"], entries["retention.ms"]
    assert (seg.value, seg.source, seg.is_read_only) == \
        ("60000", ck_admin.ConfigSource.DYNAMIC_TOPIC_CONFIG.value, False)
    assert (ret.value, ret.source, ret.is_default) == \
        ("604800000", ck_admin.ConfigSource.DEFAULT_CONFIG.value, True)
    assert entries["compression.type"].value == "producer"
    assert "partitions" not in entries and "replication.factor" not in entries
    broker = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.BROKER, "0")
    got = admin.describe_configs([broker])[broker].result(WAIT)
    assert got["log.retention.ms"].value == "604800000"
    assert got["message.max.bytes"].value == str(16 << 20)
    assert got["num.partitions"].value == "1"
    missing = ck_admin.ConfigResource(ck_admin.ConfigResource.Type.TOPIC, "cfg-none")
    with pytest.raises(Exception, match="(?i)unknown topic"):
        admin.describe_configs([missing])[missing].result(WAIT)


def test_raw_describe_configs_keys_synonyms_and_refusals(kb):
    _b, bootstrap = kb
    raw = Raw(bootstrap)
    try:
        raw.sock.sendall(raw.send(19, 4, 1, {"topics": [{
            "name": "cfg-c", "num_partitions": 1, "replication_factor": -1, "assignments": [],
            "configs": [{"name": "retention.bytes", "value": "1000000"}]}]}))
        assert raw.recv(19, 4)[1].topics[0].error_code == 0
        raw.sock.sendall(raw.send(32, 3, 2, {"resources": [
            {"resource_type": 2, "resource_name": "cfg-c",
             "configuration_keys": ["retention.bytes", "retention.ms", "nope"]}],
            "include_synonyms": True}))
        result = raw.recv(32, 3)[1].results[0]
        rows = {c.name: c for c in result.configs}
        assert result.error_code == 0 and sorted(rows) == ["retention.bytes", "retention.ms"]
        rb = rows["retention.bytes"]
        assert (rb.value, rb.config_source, rb.config_type) == ("1000000", 1, tc.LONG)
        assert [(s.name, s.value, s.source) for s in rb.synonyms] == \
            [("retention.bytes", "1000000", 1), ("log.retention.bytes", "-1", 5)]
        # v0: is_default instead of a source
        raw.sock.sendall(raw.send(32, 0, 3, {"resources": [
            {"resource_type": 2, "resource_name": "cfg-c", "configuration_keys": None},
            {"resource_type": 4, "resource_name": "0", "configuration_keys": None},
            {"resource_type": 8, "resource_name": "x", "configuration_keys": None}]}))
        topic, mixed, logger = raw.recv(32, 0)[1].results
        rows = {c.name: c for c in topic.configs}
        assert rows["retention.ms"].is_default and not rows["retention.bytes"].is_default
        assert (mixed.error_code, logger.error_code) == (42, 42)
        assert "separate requests" in mixed.error_message
        raw.sock.sendall(raw.send(32, 1, 4, {"resources": [
            {"resource_type": 4, "resource_name": "7", "configuration_keys": None}]}))
        (other,) = raw.recv(32, 1)[1].results
        assert other.error_code == 42 and "unexpected broker id" in other.error_message
    finally:
        raw.close()


def test_raw_create_topics_validate_only_checks_and_internal_names_are_refused(kb):
    """validate_only answers what creating would (a bad name, a bad count),
    creates nothing; the internal offsets topic is refused (INVALID_TOPIC_EXCEPTION, as a
    write to it), never reported created."""
    b, bootstrap = kb
    raw = Raw(bootstrap)

    def create(cid, topics, validate_only):
        raw.sock.sendall(raw.send(19, 4, cid, {"topics": [{
            "name": name, "num_partitions": n, "replication_factor": -1, "assignments": [],
            "configs": []} for name, n in topics], "timeout_ms": 5000,
            "validate_only": validate_only}))
        return {t.name: (t.error_code, t.error_message) for t in raw.recv(19, 4)[1].topics}

    try:
        got = create(1, [("a/b", 1), ("vo-neg", -5), ("vo-ok", 2), ("__consumer_offsets", 1)], True)
        assert got["a/b"][0] == 17 and "invalid topic name" in got["a/b"][1]  # INVALID_TOPIC_EXCEPTION
        assert got["vo-neg"][0] == 40 and "partitions must be" in got["vo-neg"][1]  # INVALID_CONFIG
        assert got["vo-ok"] == (0, None)
        assert got["__consumer_offsets"][0] == 17 and "internal" in got["__consumer_offsets"][1]
        got = create(2, [("__consumer_offsets", 1), ("vo-real", 1)], False)
        assert got["__consumer_offsets"][0] == 17 and "internal" in got["__consumer_offsets"][1]
        assert got["vo-real"][0] == 17  # the request is refused whole: nothing was created
    finally:
        raw.close()
    listed = run_cli("topics", "list", bootstrap=b.bootstrap).stdout
    assert not {"vo-ok", "vo-neg", "vo-real"} & set(listed.split())  # nothing was created
