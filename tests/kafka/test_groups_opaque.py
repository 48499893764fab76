"""Classic groups as real applications use them on the Kafka listener (issue
30), against one broker process for the module (debug log):

- member bytes opaque: KafkaJS with a custom assigner writing version 1 over
  version 0's layout, aiokafka with an assignor writing version 4 (an
  aiokafka-based framework's): each joins, the leader reads every
  subscription as its member wrote it, each member gets its assignment as
  the leader wrote it (topic order, user data), DescribeGroups shows both
  byte for byte;
- negative committed offsets stored: KafkaJS's resetOffsets (commits -2)
  and fetchOffsets, a consumer then reading from the beginning again;
- OffsetDelete through kafka-python's KafkaAdminClient, and OffsetFetch's
  metadata "" where nothing is committed (Kafka's, never null);
- refusals named in the broker's log (an unknown API key, an unsupported
  version, refused group requests: an unknown group's OffsetDelete, a
  SyncGroup over the bound on assignment bytes)."""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import time

import pytest

from tests.support.fixtures import invoke_cli
from tests.support.kafka_members import until
from tests.support.kafka_raw import WAIT, Raw, kafka_broker
from tests.support.kafkajs import run_kafkajs
from logbroker import Admin

kafka = pytest.importorskip("kafka")
from kafka import KafkaConsumer, TopicPartition  # noqa: E402
from kafka.admin import KafkaAdminClient  # noqa: E402


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    """(BrokerProcess, Kafka bootstrap): groups settle fast, the log at debug."""
    with kafka_broker(tmp_path_factory.mktemp("kafka-opaque") / "data",
                      config={"group_initial_rebalance_delay_ms": 100,
                              "log_level": "debug"}) as got:
        yield got


def _topics(b, *names: str, partitions: int = 1) -> None:
    with Admin(b.bootstrap) as admin:
        for name in names:
            admin.create_topic(name, partitions)


def test_kafkajs_custom_assigner_version_1_bytes_come_back_as_written(kb):
    b, bootstrap = kb
    _topics(b, "op-zeta", "op-alpha")
    got = run_kafkajs("""
const { MemberMetadata, MemberAssignment } = K.AssignerProtocol;
const state = { sent: null, seen: [], given: null };
const Custom = () => ({
  name: 'custom-v1', version: 1,
  protocol({ topics }) {
    const metadata = MemberMetadata.encode({ version: 1, topics, userData: Buffer.from('ud-js') });
    state.sent = metadata.toString('hex');
    return { name: 'custom-v1', metadata };
  },
  async assign({ members }) {
    return members.map(m => {
      state.seen.push(m.memberMetadata.toString('hex'));
      const memberAssignment = MemberAssignment.encode({ version: 1,
        assignment: { 'op-zeta': [0], 'op-alpha': [0] }, userData: Buffer.from('ua-js') });
      state.given = memberAssignment.toString('hex');
      return { memberId: m.memberId, memberAssignment };
    });
  },
});
const consumer = kafka.consumer({ groupId: 'op-js', partitionAssigners: [Custom],
                                  maxWaitTimeInMs: 100 });
const joined = new Promise((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error('no GROUP_JOIN')), 20000);
  consumer.on(consumer.events.GROUP_JOIN, e => { clearTimeout(timer); resolve(e.payload); });
});
await consumer.connect();
await consumer.subscribe({ topics: ['op-zeta', 'op-alpha'] });
await consumer.run({ eachMessage: async () => {} });
const payload = await joined;
const admin = kafka.admin(); await admin.connect();
const described = (await admin.describeGroups(['op-js'])).groups[0];
await admin.disconnect(); await consumer.disconnect();
out({ ...state, protocol: payload.groupProtocol, order: Object.keys(payload.memberAssignment),
      described: described.members.map(m => [m.memberMetadata.toString('hex'),
                                             m.memberAssignment.toString('hex')]),
      protocolType: described.protocolType });
""", [bootstrap])
    assert got["protocol"] == "custom-v1" and got["protocolType"] == "consumer"
    assert got["seen"] == [got["sent"]]  # the leader read the member's bytes as written
    assert got["sent"].startswith("0001")  # version 1 over version 0's layout
    assert got["order"] == ["op-zeta", "op-alpha"]  # the leader's topic order kept
    assert got["described"] == [[got["sent"], got["given"]]]


class _V4Assignor:
    """An aiokafka assignor writing version 4 over version 0's layout (as an
    aiokafka-based stream framework does): every partition to the leader's
    first member, the topics in reverse order, user data both ways."""

    name = "v4-custom"
    version = 4
    seen: list = []
    got: list = []

    @classmethod
    def metadata(cls, topics):
        from aiokafka.coordinator.protocol import ConsumerProtocolMemberMetadata

        return ConsumerProtocolMemberMetadata(4, sorted(topics), b"framework-state")

    @classmethod
    def assign(cls, cluster, members):
        from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

        cls.seen.extend((m.version, m.subscription, m.user_data) for m in members.values())
        topics = sorted({t for m in members.values() for t in m.subscription}, reverse=True)
        return {mid: ConsumerProtocolMemberAssignment(4, [(t, [0]) for t in topics], b"ua-v4")
                for mid in members}

    @classmethod
    def on_assignment(cls, assignment) -> None:
        cls.got.append((assignment.version, [topic for topic, _ in assignment.assignment],
                        assignment.user_data))


def test_aiokafka_assignor_writing_version_4_joins_and_gets_its_assignment(kb):
    b, bootstrap = kb
    _topics(b, "op-a4", "op-b4")
    from aiokafka import AIOKafkaConsumer

    async def run():
        c = AIOKafkaConsumer("op-a4", "op-b4", bootstrap_servers=bootstrap, group_id="op-aio",
                             partition_assignment_strategy=(_V4Assignor,),
                             heartbeat_interval_ms=100, session_timeout_ms=6000)
        await c.start()
        try:
            deadline = time.monotonic() + WAIT
            while not _V4Assignor.got and time.monotonic() < deadline:
                await c.getmany(timeout_ms=100)
        finally:
            await c.stop()

    asyncio.run(run())
    assert _V4Assignor.seen == [(4, ["op-a4", "op-b4"], b"framework-state")]
    assert _V4Assignor.got == [(4, ["op-b4", "op-a4"], b"ua-v4")]


def test_kafkajs_reset_offsets_commits_negative_offsets_and_the_group_reads_again(kb):
    b, bootstrap = kb
    _topics(b, "op-reset", partitions=2)
    got = run_kafkajs("""
const producer = kafka.producer(); await producer.connect();
await producer.send({ topic: 'op-reset',
                      messages: ['r0', 'r1', 'r2'].map(value => ({ value, partition: 0 })) });
await producer.disconnect();
const readAll = async () => {
  const consumer = kafka.consumer({ groupId: 'op-reset-g', maxWaitTimeInMs: 100 });
  await consumer.connect(); await consumer.subscribe({ topic: 'op-reset', fromBeginning: true });
  const seen = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out with ' + seen)), 20000);
    consumer.run({ eachMessage: async ({ message }) => {
      seen.push(message.value.toString());
      if (seen.length >= 3) { clearTimeout(timer); resolve(); } } });
  });
  await consumer.disconnect();
  return seen;
};
const first = await readAll();
const admin = kafka.admin(); await admin.connect();
const fetch = async (groupId) => (await admin.fetchOffsets({ groupId, topics: ['op-reset'] }))[0]
  .partitions.sort((a, b) => a.partition - b.partition);
const committed = await fetch('op-reset-g');
await admin.resetOffsets({ groupId: 'op-reset-g', topic: 'op-reset', earliest: true });
const reset = await fetch('op-reset-g');
const again = await readAll();  // from its reset policy (fromBeginning), as on Kafka
const after = await fetch('op-reset-g');
await admin.disconnect();
out({ first, committed, reset, again, after });
""", [bootstrap])
    assert got["first"] == got["again"] == ["r0", "r1", "r2"]
    assert [p["offset"] for p in got["committed"]] == ["3", "-1"]
    assert [p["offset"] for p in got["reset"]] == ["-2", "-2"]  # stored as committed
    assert [p["offset"] for p in got["after"]] == ["3", "-2"]  # partition 1 had nothing
    with Admin(b.bootstrap) as ours:  # our tools show a reset request without a lag
        rows = ours.describe_groups(["op-reset-g"])["op-reset-g"].partitions
    assert [(r.partition, r.committed, r.lag) for r in rows] == [(0, 3, 0), (1, -2, -1)]
    shown = invoke_cli(["groups", "describe", "op-reset-g"], bootstrap=b.bootstrap)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.splitlines()[-1].split()[3:6] == ["-2", "0", "-"]


def test_offset_delete_through_kafka_python(kb):
    b, bootstrap = kb
    _topics(b, "op-del", "op-kept", partitions=2)
    with Admin(b.bootstrap) as ours:
        ours.commit_offsets("op-del-g", {("op-del", 0): 5, ("op-del", 1): 6, ("op-kept", 0): 7})
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    member = KafkaConsumer("op-kept", bootstrap_servers=bootstrap, group_id="op-live",
                           enable_auto_commit=False, heartbeat_interval_ms=100,
                           session_timeout_ms=6000)
    try:
        gone = admin.delete_group_offsets("op-del-g", [TopicPartition("op-del", 0)])
        assert {tp: e.errno for tp, e in gone.items()} == {TopicPartition("op-del", 0): 0}
        left = admin.list_group_offsets("op-del-g")["op-del-g"]
        assert {(tp.topic, tp.partition): om.offset for tp, om in left.items()} == {
            ("op-del", 1): 6, ("op-kept", 0): 7}
        asked = admin.list_group_offsets({"op-del-g": [TopicPartition("op-del", 0)]})["op-del-g"]
        assert [(om.offset, om.metadata) for om in asked.values()] == [(-1, "")]  # Kafka's ""
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            admin.delete_group_offsets("op-no-such-group", [TopicPartition("op-del", 0)])
        deadline = time.monotonic() + WAIT
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(timeout_ms=100)
        assert member.assignment()
        member.commit({TopicPartition("op-kept", 0): kafka.OffsetAndMetadata(1, "", -1)})
        busy = admin.delete_group_offsets("op-live", [TopicPartition("op-kept", 0),
                                                      TopicPartition("op-del", 0)])
        assert {(tp.topic, e.errno) for tp, e in busy.items()} == {
            ("op-kept", 86), ("op-del", 0)}  # GROUP_SUBSCRIBED_TO_TOPIC where it reads
        # our side: Admin.delete_offsets through the CLI
        done = invoke_cli(["groups", "delete-offsets", "op-del-g", "-t", "op-del", "--json"],
                          bootstrap=b.bootstrap)
        assert done.exit_code == 0, done.output
        assert [r["result"] for r in json.loads(done.stdout)] == ["deleted", "deleted"]
        assert admin.list_group_offsets("op-del-g")["op-del-g"].keys() == {
            TopicPartition("op-kept", 0)}
        refused = invoke_cli(["groups", "delete-offsets", "op-live", "-t", "op-kept"],
                             bootstrap=b.bootstrap)
        assert refused.exit_code == 1 and "GROUP_SUBSCRIBED_TO_TOPIC" in refused.stderr
    finally:
        member.close()
        admin.close()


def _raw_request(bootstrap: str, api_key: int, version: int) -> bytes:
    """A request of ``api_key`` at ``version`` with an empty body; what came back."""
    host, port = bootstrap.rsplit(":", 1)
    client = b"raw"
    body = struct.pack(">hhih", api_key, version, 7, len(client)) + client
    with socket.create_connection((host, int(port)), timeout=WAIT) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        try:
            return s.recv(65536)
        except (ConnectionResetError, TimeoutError):
            return b""


def test_refusals_are_named_in_the_broker_log(kb):
    b, bootstrap = kb
    assert _raw_request(bootstrap, 1234, 0) == b""  # closed, unanswered
    assert _raw_request(bootstrap, 11, 99) == b""  # JoinGroup v99
    raw = Raw(bootstrap)  # opaque bytes are bounded: 8 MiB of assignments per SyncGroup
    try:
        big = [{"member_id": "m", "assignment": bytes(9 << 20)}]
        raw.sock.sendall(raw.send(14, 3, 1, {"group_id": "op-big", "generation_id": 1,
                                             "member_id": "m", "assignments": big}))
        assert raw.recv(14, 3)[1].error_code == 42
    finally:
        raw.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        with pytest.raises(kafka.errors.GroupIdNotFoundError):
            admin.delete_group_offsets("op-log-nobody", [TopicPartition("op-del", 0)])
    finally:
        admin.close()
    wanted = ("refused Kafka api 1234 v0 from 127.0.0.1:",
              "refused Kafka api 11 v99 from 127.0.0.1:",
              "UNSUPPORTED_VERSION: JoinGroup v99 unsupported",
              "unknown group 'op-log-nobody'",
              "INVALID_REQUEST: assignments over 8388608 bytes together")
    until(lambda: all(w in b.log() for w in wanted), f"the log lines {wanted}")
    line = next(ln for ln in b.log().splitlines() if "'op-log-nobody'" in ln)
    assert "DEBUG" in line and "refused DeleteOffsets from 127.0.0.1:" in line
    assert "GROUP_ID_NOT_FOUND" in line
