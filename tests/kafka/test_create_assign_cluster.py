"""CreateTopics with a manual replica assignment in a 3-broker cluster
(tests/support/kafka_cluster.py's ``kc``, brokers 1..3): KafkaJS's
``replicaAssignment`` and confluent-kafka's ``replica_assignment`` place
every partition as given, the first replica leading; a broker that is not
registered, lists of different lengths and a broker named twice are
INVALID_REPLICA_ASSIGNMENT, and nothing is created."""

from __future__ import annotations

from tests.support.kafka_cluster import kc, metadata  # noqa: F401 (the fixture)
from tests.support.kafkajs import run_kafkajs

WAIT = 20.0


def _placed(kc, topic: str) -> dict:
    """partition -> (replicas, leader) in every broker's Kafka Metadata (the same in all)."""
    views = []
    for address in kc.kafka.values():
        (t,) = metadata(address, [topic]).topics
        views.append({p.partition_index: (list(p.replica_nodes), p.leader_id)
                      for p in t.partitions})
    assert all(v == views[0] for v in views), views
    return views[0]


def test_kafkajs_places_a_topic_as_assigned(kc):
    a, b, c = sorted(kc.brokers)
    got = run_kafkajs(f"""
const admin = kafka.admin(); await admin.connect();
const made = await admin.createTopics({{ waitForLeaders: true, topics: [{{ topic: 'js-assign',
  replicaAssignment: [{{ partition: 1, replicas: [{c}, {a}] }}, {{ partition: 0, replicas: [{b}, {c}] }}]
}}] }});
const refused = [];
for (const bad of [[[{a}, 99]], [[{a}, {b}], [{c}]], [[{a}, {a}]]]) {{
  try {{
    await admin.createTopics({{ topics: [{{ topic: 'js-assign-bad',
      replicaAssignment: bad.map((replicas, partition) => ({{ partition, replicas }})) }}] }});
    refused.push('created');
  }} catch (e) {{ refused.push(e.errors ? e.errors[0].type : e.type || e.message); }}
}}
const topics = (await admin.listTopics()).filter(t => t.startsWith('js-assign')).sort();
await admin.disconnect();
out({{ made, refused, topics }});
""", list(kc.kafka.values()))
    assert got == {"made": True, "refused": ["INVALID_REPLICA_ASSIGNMENT"] * 3,
                   "topics": ["js-assign"]}
    assert _placed(kc, "js-assign") == {0: ([b, c], b), 1: ([c, a], c)}


def test_confluent_kafka_places_a_topic_as_assigned(kc):
    import confluent_kafka as ck
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": ",".join(kc.kafka.values())})
    a, b, c = sorted(kc.brokers)
    admin.create_topics([NewTopic("ck-assign", 3, replica_assignment=[[a, b], [b, c], [c, a]])])[
        "ck-assign"].result(WAIT)
    assert _placed(kc, "ck-assign") == {0: ([a, b], a), 1: ([b, c], b), 2: ([c, a], c)}
    p = ck.Producer({"bootstrap.servers": ",".join(kc.kafka.values()), "acks": "all"})
    for partition in range(3):  # every partition takes writes: its replicas are in sync
        p.produce("ck-assign", value=b"v", partition=partition)
    assert p.flush(WAIT) == 0


def test_our_admin_places_a_topic_as_assigned(kc):
    from logbroker import Admin, NewTopic
    from logbroker.errors import InvalidReplicaAssignmentError
    from tests.support.fixtures import FAST
    a, b, c = sorted(kc.brokers)
    with Admin(bootstrap=kc.bootstrap, **FAST) as admin:
        admin.create_topics([NewTopic("lb-assign", replica_assignment={0: [c, b], 1: [a, c]})])
        for bad in ({0: [a, b], 1: [c]}, {1: [a]}, {0: [a, 99]}):
            got = admin.create_topics([NewTopic("lb-assign-bad", replica_assignment=bad)],
                                      raise_errors=False)["lb-assign-bad"]
            assert isinstance(got, InvalidReplicaAssignmentError), (bad, got)
    assert _placed(kc, "lb-assign") == {0: ([c, b], c), 1: ([a, c], a)}
    assert "lb-assign-bad" not in {t.name for t in metadata(kc.kafka[a], None).topics}


def test_the_cli_places_a_topic_as_assigned(kc):
    from tests.support.fixtures import cli_error, cli_ok, run_cli
    a, b, c = sorted(kc.brokers)
    out = cli_ok(run_cli("topics", "create", "cli-assign", "--replica-assignment",
                         f"{b}:{a},{c}:{b}", bootstrap=kc.bootstrap))
    assert "2 partition(s), replication factor 2" in out
    assert _placed(kc, "cli-assign") == {0: ([b, a], b), 1: ([c, b], c)}
    for bad in (f"{a}:{a}", f"{a}:x"):
        assert "replica" in cli_error(run_cli("topics", "create", "cli-assign-bad",
                                              "--replica-assignment", bad,
                                              bootstrap=kc.bootstrap),
                                      "INVALID_REPLICA_ASSIGNMENT")
